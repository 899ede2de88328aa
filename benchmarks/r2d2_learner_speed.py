"""Milliseconds per R2D2 learner gradient step on CPU, with the classic (CartPole) or Atari shapes.

The replay is filled with synthetic blocks from 4 actors whose episodes have geometric lengths of mean
`--mean_episode_length` (22: a random CartPole policy, where almost every replayed sequence crosses an
episode start; 500: a solved CartPole), so the cost of resetting the LSTM state inside sequences shows.

    python benchmarks/r2d2_learner_speed.py --mean_episode_length=22,100,500 --steps=30
"""

import argparse
import dataclasses
import time

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo.r2d2 import train
from deep_rl_zoo.sequence_replay import SequenceBlock


def fill(learner, config, observation_shape, num_actions, mean_episode_length, rng):
    period = config.sequence_length // 2
    num_blocks = max(config.min_replay_size, config.batch_size * period * 4) // period + 8
    for j in range(num_blocks):
        first = rng.random(period) < 1.0 / mean_episode_length
        learner._replay.add_block(
            SequenceBlock(
                actor_index=j % 4,
                observation=rng.standard_normal((period, *observation_shape)).astype(np.float32),
                action=rng.integers(num_actions, size=period).astype(np.int64),
                reward=np.ones(period, np.float32),
                terminated=np.roll(first, -1),
                truncated=np.zeros(period, bool),
                first=first,
                core_state=tuple(rng.standard_normal(config.lstm_size).astype(np.float32) for _ in range(2)),
            )
        )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mean_episode_length", default="22,500")
    parser.add_argument("--steps", type=int, default=30, help="timed gradient steps (after 3 untimed)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions too")
    args = parser.parse_args()
    torch.set_num_threads(1)
    env = gym.make("CartPole-v1")
    config = train.R2d2Config(use_tensorboard=False)
    for length in [float(x) for x in args.mean_episode_length.split(",")]:
        torch.manual_seed(0)
        agents = train.build_learner(config, env, torch.device("cpu"))
        learner = agents.learner
        fill(learner, config, env.observation_space.shape, 2, length, np.random.default_rng(0))
        for _ in range(3):
            learner.gradient_step()
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
        start = time.perf_counter()
        for _ in range(args.steps):
            learner.gradient_step()
        elapsed = time.perf_counter() - start
        if args.profile:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(20)
        print(
            f"mean episode length {length:g}: {1000 * elapsed / args.steps:.1f} ms per gradient step "
            f"(batch {config.batch_size} x {config.sequence_length} steps, burn-in {config.burn_in})"
        )
    print(
        dataclasses.asdict(config)["lstm_size"], "LSTM units; load", open("/proc/loadavg").read().split()[:3]
    )


if __name__ == "__main__":
    main()
