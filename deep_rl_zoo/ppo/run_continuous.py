"""Trains PPO with a Gaussian policy on a continuous-action task:
`python -m deep_rl_zoo.ppo.run_continuous --environment_name=Pendulum-v1` (the default),
`LunarLanderContinuous-v3`, `BipedalWalker-v3`, or a MuJoCo task such as `HalfCheetah-v5`.

Observations and rewards are normalised by running statistics (as in the PPO paper's reference
implementation); the statistics live in the learner, reach the actors with the parameters and are
saved in every checkpoint.

The defaults were tuned here on Pendulum-v1 (gamma 0.9, Adam 1e-3, 4 actors x 256 steps, 10 epochs of
minibatches of 128). For MuJoCo, the paper's setting (Schulman et al. 2017, table 3: 2048 steps per
update, 10 epochs of minibatches of 64, Adam 3e-4 annealed, gamma 0.99, lambda 0.95, clip 0.2) is

    python -m deep_rl_zoo.ppo.run_continuous --environment_name=HalfCheetah-v5 --discount=0.99 \\
        --learning_rate=3e-4 --unroll_length=512 --minibatch_size=64 --num_train_steps=100000 \\
        --num_iterations=10
"""

from functools import partial

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.ppo.train import PpoConfig, main

DEFAULTS = {
    "environment_name": "Pendulum-v1",
    "num_iterations": 30,
    "num_train_steps": 10_240,
    "num_eval_steps": 2_000,  # 10 Pendulum episodes
    "num_parallel_envs": 4,
    "unroll_length": 256,
    "num_epochs": 10,
    "minibatch_size": 128,
    "learning_rate": 1e-3,
    "discount": 0.9,
    "gae_lambda": 0.95,
    "clip_epsilon": 0.2,
    "entropy_coef": 0.0,
    "normalize_observations": True,
    "normalize_rewards": True,
}

if __name__ == "__main__":
    run_script(PpoConfig, DEFAULTS, partial(main, action_space="continuous"), exclude=ATARI_FIELDS)
