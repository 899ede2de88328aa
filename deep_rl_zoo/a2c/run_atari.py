"""Trains A2C on an Atari game: `python -m deep_rl_zoo.a2c.run_atari --num_actors=16 --actors_on_gpu`.

Defaults follow Mnih et al. 2016 and OpenAI baselines' A2C: 16 actors x 5 steps per update, RMSprop
7e-4 (alpha 0.99, eps 1e-5), entropy 0.01, value weight 0.5, gradient norm clipped at 0.5. The learning
rate stays constant unless --anneal_learning_rate is given (both references anneal it linearly to 0).
"""

from deep_rl_zoo.a2c.train import A2cConfig, main
from deep_rl_zoo.config import run_script

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 40,
    "num_train_steps": 250_000,
    "num_eval_steps": 30_000,
    "num_parallel_envs": 16,
    "unroll_length": 5,
    "learning_rate": 7e-4,
    "entropy_coef": 0.01,
    "shared_torso": True,
}

if __name__ == "__main__":
    run_script(A2cConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes", "shared_torso"}))
