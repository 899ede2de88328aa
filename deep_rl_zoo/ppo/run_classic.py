"""Trains PPO on a classic-control or Box2D task with discrete actions:
`python -m deep_rl_zoo.ppo.run_classic --num_actors=8`."""

from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.ppo.train import PpoConfig, main

DEFAULTS = {"num_iterations": 10, "num_train_steps": 10_000}  # CartPole-v1 is solved well inside 100k steps

if __name__ == "__main__":
    run_script(PpoConfig, DEFAULTS, main, exclude=ATARI_FIELDS | {"initial_action_std"})
