"""Trains C51 on an Atari game: `python -m deep_rl_zoo.c51_dqn.run_atari --environment_name=Pong`.

Defaults follow Bellemare et al. 2017 (51 atoms on [-10, 10], Adam with lr 2.5e-4 and eps 0.01/32,
otherwise Nature DQN), with a smaller replay so it fits a laptop; pass `--replay_capacity=1000000` for
the paper's setting.
"""

from deep_rl_zoo.c51_dqn.train import C51Config, main
from deep_rl_zoo.config import run_script

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "replay_capacity": 200_000,
    "min_replay_size": 50_000,
    "batch_size": 32,
    "learning_rate": 2.5e-4,
    "adam_eps": 0.01 / 32,
    "learn_interval": 4,
    "target_network_update_period": 2500,  # 10,000 env steps at one gradient step per 4
    "exploration_epsilon_decay_steps": 1_000_000,
    "exploration_epsilon_end_value": 0.01,
    "eval_exploration_epsilon": 0.001,
    "max_grad_norm": 10.0,
    "num_atoms": 51,
    "v_min": -10.0,  # returns of clipped rewards
    "v_max": 10.0,
}

if __name__ == "__main__":
    run_script(C51Config, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
