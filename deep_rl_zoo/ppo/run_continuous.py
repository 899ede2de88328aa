"""Trains PPO with a Gaussian policy on a continuous-action task:
`python -m deep_rl_zoo.ppo.run_continuous --environment_name=HalfCheetah-v5` (MuJoCo), `Pendulum-v1`,
`LunarLanderContinuous-v3`, `BipedalWalker-v3`.

Defaults follow the PPO paper's MuJoCo setting (Schulman et al. 2017, table 3): 2048 steps per update,
10 epochs of minibatches of 64, Adam 3e-4, gamma 0.99, lambda 0.95, clip 0.2, separate 64-64 tanh
networks, with observation and reward normalisation (as in its reference implementation); here the
2048 steps come from 4 actors x 512.
"""

from functools import partial

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.ppo.train import PpoConfig, main

DEFAULTS = {
    "environment_name": "Pendulum-v1",
    "num_iterations": 30,
    "num_train_steps": 10_240,
    "num_eval_steps": 5_000,
    "num_actors": 4,
    "unroll_length": 512,
    "num_epochs": 10,
    "minibatch_size": 64,
    "learning_rate": 3e-4,
    "discount": 0.99,
    "gae_lambda": 0.95,
    "clip_epsilon": 0.2,
    "entropy_coef": 0.0,
    "normalize_observations": True,
    "normalize_rewards": True,
}

if __name__ == "__main__":
    run_script(PpoConfig, DEFAULTS, partial(main, action_space="continuous"), exclude=ATARI_FIELDS)
