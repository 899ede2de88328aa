"""Trains DRQN on an Atari game: `python -m deep_rl_zoo.drqn.run_atari --environment_name=Pong`.

As in Hausknecht & Stone 2015 the network sees one frame per step (`environment_frame_stack=1`) and
has to remember the rest; sequences of 10 learned steps (no burn-in in the paper; 10 here), Adadelta
in the paper, Adam here. The bootstrap action is the online network's (double Q-learning,
`--double_q`), not the paper's max over the target network (`--nodouble_q`).
The sequence replay stores frame handles, so each frame is kept once.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.drqn.train import DrqnConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "environment_frame_stack": 1,
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "unroll_length": 10,
    "burn_in": 10,
    "lstm_size": 512,
    "head_hidden_sizes": (),  # the paper's linear head on the LSTM (rewards are clipped on Atari)
    "n_step": 1,  # the paper's one-step targets
    "replay_capacity": 400_000,
    "min_replay_size": 50_000,
    "batch_size": 32,
    "learning_rate": 1e-4,
    "adam_eps": 1.5e-4,
    "learn_interval": 4,
    "target_network_update_period": 2500,  # 10,000 env steps at one gradient step per 4
    "exploration_epsilon_decay_steps": 1_000_000,
    "exploration_epsilon_end_value": 0.1,
    "eval_exploration_epsilon": 0.05,
    "max_grad_norm": 10.0,
}

if __name__ == "__main__":
    run_script(DrqnConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
