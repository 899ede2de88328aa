"""Trains C51 on a classic-control or Box2D task: `python -m deep_rl_zoo.c51_dqn.run_classic`."""

from deep_rl_zoo.c51_dqn.train import C51Config, main
from deep_rl_zoo.config import ATARI_FIELDS, run_script

DEFAULTS = {}  # C51Config's own defaults are the classic-control ones

if __name__ == "__main__":
    run_script(C51Config, DEFAULTS, main, exclude=ATARI_FIELDS)
