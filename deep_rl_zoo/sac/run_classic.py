"""Trains SAC (discrete actions) on a classic-control or Box2D task:
`python -m deep_rl_zoo.sac.run_classic --num_actors=8`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.sac.train import SacConfig, main

DEFAULTS = {"num_iterations": 25, "num_train_steps": 20_000}  # a 500k-step budget

if __name__ == "__main__":
    run_script(SacConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
