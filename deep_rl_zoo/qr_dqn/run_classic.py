"""Trains QR-DQN on a classic-control or Box2D task: `python -m deep_rl_zoo.qr_dqn.run_classic`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.qr_dqn.train import QrDqnConfig, main

DEFAULTS = {}  # QrDqnConfig's own defaults are the classic-control ones

if __name__ == "__main__":
    run_script(QrDqnConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
