"""Trains Double DQN on a classic-control or Box2D task: `python -m deep_rl_zoo.double_dqn.run_classic`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.double_dqn.train import DoubleDqnConfig, main

DEFAULTS = {}  # DoubleDqnConfig's own defaults are the classic-control ones

if __name__ == "__main__":
    run_script(DoubleDqnConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
