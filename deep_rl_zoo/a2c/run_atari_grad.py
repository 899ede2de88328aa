"""Trains A2C-grad on an Atari game: `python -m deep_rl_zoo.a2c.run_atari_grad --num_actors=16`."""

from deep_rl_zoo.a2c.run_atari import DEFAULTS
from deep_rl_zoo.a2c.train import A2cConfig, main_grad
from deep_rl_zoo.config import run_script

if __name__ == "__main__":
    run_script(A2cConfig, DEFAULTS, main_grad, exclude=frozenset({"hidden_sizes", "shared_torso"}))
