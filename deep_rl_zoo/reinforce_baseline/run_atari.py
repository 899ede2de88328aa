"""Trains REINFORCE with baseline on an Atari game:
`python -m deep_rl_zoo.reinforce_baseline.run_atari --environment_name=Pong`.

Learns once per life (a lost life ends the return, `--terminal_on_life_loss`), with two Nature-DQN
networks, one for the policy and one for the baseline. Not tuned: Monte-Carlo policy gradients are
slow on Atari; this script shows the algorithm end to end.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.reinforce_baseline.train import ReinforceBaselineConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "learning_rate": 1e-4,
    "value_learning_rate": 1e-4,
    "entropy_coef": 0.01,
    "max_grad_norm": 40.0,
}

if __name__ == "__main__":
    run_script(ReinforceBaselineConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
