"""Trains DRQN on a classic-control or Box2D task: `python -m deep_rl_zoo.drqn.run_classic`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.drqn.train import DrqnConfig, main

DEFAULTS = {}  # DrqnConfig's own defaults are the classic-control ones

if __name__ == "__main__":
    run_script(DrqnConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
