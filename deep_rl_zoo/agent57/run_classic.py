"""Trains Agent57 on a classic-control task, by default MountainCar-v0 (sparse reward):
`python -m deep_rl_zoo.agent57.run_classic --num_actors=4`."""

from deep_rl_zoo.agent57.train import Agent57Config, main
from deep_rl_zoo.config import ATARI_FIELDS, run_script
from deep_rl_zoo.ngu.run_classic import DEFAULTS

if __name__ == "__main__":
    # Blocks are --replay_period steps (no --unroll_length); each policy has its gamma_j (no --discount).
    run_script(Agent57Config, DEFAULTS, main, exclude=ATARI_FIELDS | {"unroll_length", "discount"})
