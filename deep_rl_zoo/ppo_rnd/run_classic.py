"""Trains PPO-RND on a classic-control task with discrete actions:
`python -m deep_rl_zoo.ppo_rnd.run_classic --environment_name=MountainCar-v0` (the default).

MountainCar-v0 is the sparse-reward case: -1 per step until the car reaches the flag, which random
actions almost never do within the 200-step limit, so plain PPO sees no signal and stays at -200.
The defaults (PpoRndConfig's) were tuned here on it; see the config's docstring.
"""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.ppo_rnd.train import PpoRndConfig, main

DEFAULTS = {
    "environment_name": "MountainCar-v0",
    "num_iterations": 20,
    "num_train_steps": 25_000,  # 500k env steps in all
    "num_eval_steps": 2_000,  # at least 10 greedy episodes of at most 200 steps
}

if __name__ == "__main__":
    run_script(PpoRndConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
