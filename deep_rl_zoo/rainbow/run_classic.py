"""Trains Rainbow on a classic-control or Box2D task: `python -m deep_rl_zoo.rainbow.run_classic`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.rainbow.train import RainbowConfig, main

DEFAULTS = {}  # RainbowConfig's own defaults are the classic-control ones

if __name__ == "__main__":
    run_script(RainbowConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
