"""Trains A2C-grad (actors send gradients, the learner averages them) on a classic-control task:
`python -m deep_rl_zoo.a2c.run_classic_grad --num_actors=8`."""

from deep_rl_zoo.a2c.run_classic import DEFAULTS
from deep_rl_zoo.a2c.train import A2cConfig, main_grad
from deep_rl_zoo.config import ATARI_FIELDS, run_script

if __name__ == "__main__":
    run_script(A2cConfig, DEFAULTS, main_grad, exclude=ATARI_FIELDS)
