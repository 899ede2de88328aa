"""Trains IQN on an Atari game: `python -m deep_rl_zoo.iqn.run_atari --environment_name=Pong`.

Defaults follow Dabney et al. 2018 (N = N' = 64, K = 32, 64 cosines, Adam lr 5e-5, eps 0.01 / 32,
1-step returns), with a smaller replay so it fits a laptop; `--replay_capacity=1000000` is the paper's.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.iqn.train import IqnConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "num_online_taus": 64,
    "num_target_taus": 64,
    "num_acting_taus": 32,
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
    run_script(IqnConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
