"""Trains Double DQN on an Atari game: `python -m deep_rl_zoo.double_dqn.run_atari --environment_name=Pong`.

Defaults follow the tuned Double DQN of van Hasselt et al. 2015 (Nature DQN, with a target copy every
30,000 env steps and a final epsilon of 0.01), with a smaller replay so it fits a laptop; pass
`--replay_capacity=1000000` for the paper's setting.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.double_dqn.train import DoubleDqnConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "replay_capacity": 200_000,
    "min_replay_size": 50_000,
    "batch_size": 32,
    "learning_rate": 1e-4,
    "adam_eps": 1.5e-4,
    "learn_interval": 4,
    "target_network_update_period": 7500,  # 30,000 env steps at one gradient step per 4
    "exploration_epsilon_decay_steps": 1_000_000,
    "exploration_epsilon_end_value": 0.01,
    "eval_exploration_epsilon": 0.001,
    "max_grad_norm": 10.0,
}

if __name__ == "__main__":
    run_script(DoubleDqnConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
