"""Trains R2D2 on an Atari game: `python -m deep_rl_zoo.r2d2.run_atari --environment_name=Pong --num_actors=16`.

Defaults follow Kapturowski et al. 2019 (section 2.3 and the appendix's table): 4 stacked frames, no
life-loss terminal, no reward clipping (the value rescaling h takes its place), episodes cut at 30
minutes (27,000 env steps), 5-step double-Q targets, discount 0.997, Adam lr 1e-4 eps 1e-3, batches
of 64 sequences, a target copy every 2500 gradient steps, priority exponent 0.9, importance-sampling
exponent 0.6, Nature CNN + LSTM 512 reading the previous action and reward too, sequences of a 40-step
burn-in then 80 learned transitions (121 observations), a new one every 40 steps of an actor (so each
transition is learned in two sequences).

Changed here: a replay of 1M env steps (the paper's 4M frames take 28 GB; 1M take 7.2 GB here, see
benchmarks/README.md), 16 actors rather than 256, a gradient step every 200 env steps received (the
paper's learner managed 5 steps per second against 256 actors, one per ~13,000 env steps, which
leaves a workstation-sized run almost without learning), and a ReLU layer of 512 before a plain Q
head where the paper has a dueling head.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.r2d2.train import R2d2Config, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 40,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 30_000,
    "max_episode_steps": 27_000,  # 108,000 frames: 30 minutes of play
    "terminal_on_life_loss": False,
    "clip_reward": False,
    "num_actors": 16,
    "burn_in": 40,
    "trace_length": 80,
    "replay_period": 40,
    "lstm_size": 512,
    "head_hidden_sizes": (512,),
    "replay_capacity": 1_000_000,
    "min_replay_size": 50_000,
    "batch_size": 64,
    "updates_per_env_step": 1 / 200,
    "learning_rate": 1e-4,
    "adam_eps": 1e-3,
    "discount": 0.997,
    "n_step": 5,
    "target_network_update_period": 2500,
    "eval_exploration_epsilon": 0.001,
    "max_grad_norm": 40.0,
}

if __name__ == "__main__":
    run_script(R2d2Config, DEFAULTS, main, exclude=frozenset({"hidden_sizes", "unroll_length"}))
