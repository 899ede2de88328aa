"""Trains actor-critic on an Atari game:
`python -m deep_rl_zoo.actor_critic.run_atari --environment_name=Pong`.

One environment and the shared-torso Nature-DQN actor-critic, with A3C's (Mnih et al. 2016) unroll
length, entropy bonus and gradient clip. A single environment makes the updates far more correlated
than A3C's 16 workers; see A2C/IMPALA for the parallel versions.
"""

from deep_rl_zoo.actor_critic.train import ActorCriticConfig, main
from deep_rl_zoo.config import run_script

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "learning_rate": 1e-4,
    "unroll_length": 5,
    "entropy_coef": 0.01,
    "max_grad_norm": 40.0,
    "shared_torso": True,
}

if __name__ == "__main__":
    run_script(ActorCriticConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
