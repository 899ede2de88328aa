"""Trains Prioritized DQN on a classic-control or Box2D task: `python -m deep_rl_zoo.prioritized_dqn.run_classic`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.prioritized_dqn.train import PrioritizedDqnConfig, main

DEFAULTS = {}  # PrioritizedDqnConfig's own defaults are the classic-control ones

if __name__ == "__main__":
    run_script(PrioritizedDqnConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
