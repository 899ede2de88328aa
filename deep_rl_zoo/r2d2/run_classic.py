"""Trains R2D2 on a classic-control or Box2D task: `python -m deep_rl_zoo.r2d2.run_classic --num_actors=4`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.r2d2.train import R2d2Config, main

DEFAULTS = {}  # R2d2Config's own defaults are the classic-control ones

if __name__ == "__main__":
    # Actors send blocks of --replay_period steps: the distributed loop's --unroll_length is unused.
    run_script(R2d2Config, DEFAULTS, main, exclude=ATARI_FIELDS | {"unroll_length"})
