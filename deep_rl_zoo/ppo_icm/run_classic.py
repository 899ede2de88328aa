"""Trains PPO-ICM on a classic-control task with discrete actions:
`python -m deep_rl_zoo.ppo_icm.run_classic --environment_name=MountainCar-v0` (the default).

The defaults (PpoIcmConfig's) were tuned here on MountainCar-v0; see the config's docstring.
"""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.ppo_icm.train import PpoIcmConfig, main

DEFAULTS = {
    "environment_name": "MountainCar-v0",
    "num_iterations": 20,
    "num_train_steps": 25_000,  # 500k env steps in all
    "num_eval_steps": 2_000,  # at least 10 greedy episodes of at most 200 steps
}

if __name__ == "__main__":
    run_script(PpoIcmConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
