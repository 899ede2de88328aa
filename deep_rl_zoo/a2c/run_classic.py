"""Trains A2C on a classic-control or Box2D task: `python -m deep_rl_zoo.a2c.run_classic --num_actors=8`."""

from deep_rl_zoo.a2c.train import A2cConfig, main
from deep_rl_zoo.config import ATARI_FIELDS, run_script

DEFAULTS = {"num_iterations": 20, "num_train_steps": 25_000}

if __name__ == "__main__":
    run_script(A2cConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
