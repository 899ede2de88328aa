"""Trains IMPALA on a classic-control or Box2D task with discrete actions:
`python -m deep_rl_zoo.impala.run_classic --num_actors=8` (add `--lstm_size=64` for an LSTM core)."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.impala.train import ImpalaConfig, main

DEFAULTS = {"num_iterations": 25, "num_train_steps": 20_000}  # a 500k-step budget; solved near 100k

if __name__ == "__main__":
    run_script(ImpalaConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
