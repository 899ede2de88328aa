"""Milliseconds per R2D2 learner gradient step on CPU, with the classic (CartPole) or Atari shapes.

The replay is filled with synthetic blocks from 4 actors whose episodes have geometric lengths of mean
`--mean_episode_length` (22: a random CartPole policy, where almost every replayed sequence crosses an
episode start; 500: a solved CartPole), so the cost of resetting the LSTM state inside sequences shows.

    python benchmarks/r2d2_learner_speed.py --mean_episode_length=22,100,500 --steps=30
    python benchmarks/r2d2_learner_speed.py --compare --rounds=5   # one pass vs split at episode starts

`--compare` times, in one process and in alternating rounds, the learner as it is (`DrqnNetwork` resets its
LSTM state in one pass, `networks.common.lstm_with_resets`) against `drqn.agent.unroll`'s path for networks
that cannot take `first`: one LSTM call per stretch between two steps where any sequence starts an
episode (how every R2D2 and DRQN learner step ran before).
"""

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo.drqn import agent as drqn_agent
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


def _learner(config, env, length):
    torch.manual_seed(0)
    learner = train.build_learner(config, env, torch.device("cpu")).learner
    fill(learner, config, env.observation_space.shape, 2, length, np.random.default_rng(0))
    for _ in range(3):
        learner.gradient_step()
    return learner


def _timed(learner, steps):
    start = time.perf_counter()
    for _ in range(steps):
        learner.gradient_step()
    return 1000 * (time.perf_counter() - start) / steps


def compare(config, env, lengths, rounds, steps):
    one_pass = drqn_agent._takes_first
    split = lambda network: False  # noqa: E731  (the stretch-by-stretch path of unroll)
    for length in lengths:
        learners = {"one pass": _learner(config, env, length), "split": _learner(config, env, length)}
        times = {name: [] for name in learners}
        for _ in range(rounds):
            for name, learner in learners.items():
                drqn_agent._takes_first = one_pass if name == "one pass" else split
                times[name].append(_timed(learner, steps))
        drqn_agent._takes_first = one_pass
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(
            f"mean episode length {length:g}: split at episode starts {medians['split']:.1f} ms, one pass "
            f"{medians['one pass']:.1f} ms per gradient step ({medians['one pass'] / medians['split']:.2f}x; "
            f"medians of {rounds} alternating rounds of {steps} steps)"
        )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mean_episode_length", default="22,100,500")
    parser.add_argument("--steps", type=int, default=30, help="timed gradient steps (after 3 untimed)")
    parser.add_argument("--compare", action="store_true", help="one pass vs split, alternating rounds")
    parser.add_argument("--rounds", type=int, default=5, help="with --compare: rounds of --steps each")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions too")
    args = parser.parse_args()
    torch.set_num_threads(1)
    env = gym.make("CartPole-v1")
    config = train.R2d2Config(use_tensorboard=False)
    lengths = [float(x) for x in args.mean_episode_length.split(",")]
    load = open("/proc/loadavg").read().split()[:3]
    if args.compare:
        compare(config, env, lengths, args.rounds, args.steps)
        print("load average before", load, "after", open("/proc/loadavg").read().split()[:3])
        return
    for length in lengths:
        learner = _learner(config, env, length)
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
        elapsed = _timed(learner, args.steps)
        if args.profile:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(20)
        print(
            f"mean episode length {length:g}: {elapsed:.1f} ms per gradient step "
            f"(batch {config.batch_size} x {config.sequence_length} steps, burn-in {config.burn_in})"
        )
    print("load average before", load, "after", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
