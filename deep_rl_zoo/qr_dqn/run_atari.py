"""Trains QR-DQN on an Atari game: `python -m deep_rl_zoo.qr_dqn.run_atari --environment_name=Pong`.

Defaults follow Dabney et al. 2017 (N = 200 quantiles, Adam lr 5e-5, eps 0.01 / 32, 1-step returns),
with a smaller replay so it fits a laptop; pass `--replay_capacity=1000000` for the paper's setting.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.qr_dqn.train import QrDqnConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "num_quantiles": 200,
    "replay_capacity": 200_000,
    "min_replay_size": 50_000,
    "batch_size": 32,
    "learning_rate": 5e-5,
    "adam_eps": 0.01 / 32,
    "n_step": 1,
    "learn_interval": 4,
    "target_network_update_period": 2500,  # 10,000 env steps at one gradient step per 4
    "exploration_epsilon_decay_steps": 1_000_000,
    "exploration_epsilon_end_value": 0.01,
    "eval_exploration_epsilon": 0.001,
    "max_grad_norm": 10.0,
}

if __name__ == "__main__":
    run_script(QrDqnConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
