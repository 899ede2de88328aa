"""Trains IQN on a classic-control or Box2D task: `python -m deep_rl_zoo.iqn.run_classic`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.iqn.train import IqnConfig, main

DEFAULTS = {}  # IqnConfig's own defaults are the classic-control ones

if __name__ == "__main__":
    run_script(IqnConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
