"""Trains Prioritized DQN on an Atari game:
`python -m deep_rl_zoo.prioritized_dqn.run_atari --environment_name=Pong`.

Defaults follow Schaul et al. 2015's proportional variant: the tuned Double DQN with the learning rate
divided by 4, alpha = 0.6 and beta annealed from 0.4 to 1 over the whole run, with a smaller replay
so it fits a laptop; pass `--replay_capacity=1000000` for the paper's setting.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.prioritized_dqn.train import PrioritizedDqnConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "replay_capacity": 200_000,
    "min_replay_size": 50_000,
    "batch_size": 32,
    "learning_rate": 2.5e-5,  # DQN's Adam 1e-4 divided by 4, as the paper divides its RMSProp 2.5e-4
    "adam_eps": 1.5e-4,
    "learn_interval": 4,
    "target_network_update_period": 7500,  # 30,000 env steps at one gradient step per 4
    "exploration_epsilon_decay_steps": 1_000_000,
    "exploration_epsilon_end_value": 0.01,
    "eval_exploration_epsilon": 0.001,
    "max_grad_norm": 10.0,
    "priority_exponent": 0.6,
    "importance_sampling_exponent_begin_value": 0.4,
    "importance_sampling_exponent_decay_steps": 5_000_000,  # num_iterations * num_train_steps
    "priority_epsilon": 1e-6,
}

if __name__ == "__main__":
    run_script(PrioritizedDqnConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
