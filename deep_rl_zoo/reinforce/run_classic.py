"""Trains REINFORCE on a classic-control or Box2D task: `python -m deep_rl_zoo.reinforce.run_classic`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.reinforce.train import ReinforceConfig, main

DEFAULTS = {
    "num_iterations": 30,  # 300,000 env steps of training at most
    "num_train_steps": 10_000,
    "num_eval_steps": 5000,  # 10 whole episodes of a solved CartPole-v1
}

if __name__ == "__main__":
    run_script(ReinforceConfig, DEFAULTS, main, exclude=ATARI_FIELDS)
