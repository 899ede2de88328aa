"""Milliseconds per R2D2 learner gradient step on CPU, with the classic (CartPole) or Atari shapes.

The replay is filled with synthetic blocks from 4 actors whose episodes have geometric lengths of mean
`--mean_episode_length` (22: a random CartPole policy, where almost every replayed sequence crosses an
episode start; 500: a solved CartPole), so the cost of resetting the LSTM state inside sequences shows.

    python benchmarks/r2d2_learner_speed.py --mean_episode_length=22,100,500 --steps=30
    python benchmarks/r2d2_learner_speed.py --compare --rounds=5   # one pass vs split at episode starts

`--compare` times, in one process and in alternating rounds, the learner as it is (`RecurrentQNetwork` resets its
LSTM state in one pass, `networks.common.lstm_with_resets`) against `drqn.agent.unroll`'s path for networks
that cannot take `first`: one LSTM call per stretch between two steps where any sequence starts an
episode (how every R2D2 and DRQN learner step ran before).

Before/after a change of the code, measured in one run (the machine is shared and noisy): `--baseline=REV`
extracts the package at git revision REV into a scratch folder and alternates rounds between it and this
tree, each round a fresh process. Each round reports CPU milliseconds (`time.process_time`, what the
process itself used: less sensitive to other load than wall time) and wall milliseconds, and a digest of
the network's parameters after its steps: equal digests mean both trees took bitwise the same steps.

    python benchmarks/r2d2_learner_speed.py --baseline=HEAD~3 --rounds=4 --steps=20
    python benchmarks/r2d2_learner_speed.py --baseline=HEAD~3 --system --rounds=2 --env_steps=3000
    python benchmarks/r2d2_learner_speed.py --actor --steps=2000   # an actor's ms per env step

`--system` times whole `r2d2.run_classic` runs instead (default flags, 4 actors, one iteration of
`--env_steps`, no evaluation): env steps/s of the training phase, and CPU seconds of all its processes.
`--actor` times `R2d2Actor.step` on CartPole-v1 (network forward, epsilon-greedy, a block every 10 steps
handed to a link that drops it), with the env's own step timed apart.
"""

import argparse
import csv
import hashlib
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import main_loop
from deep_rl_zoo.drqn import agent as drqn_agent
from deep_rl_zoo.r2d2 import train
from deep_rl_zoo.sequence_replay import SequenceBlock

sys.path.insert(0, str(Path(__file__).resolve().parent))
import revisions  # noqa: E402  (benchmarks/ is not a package)


def fill(learner, config, observation_shape, num_actions, mean_episode_length, rng):
    # --baseline runs this file over older trees too, whose blocks were half a sequence
    period = getattr(config, "replay_period", None) or config.sequence_length // 2
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
                extras={"previous_action": rng.integers(num_actions, size=period).astype(np.int64)},
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


def _parameter_digest(module) -> str:
    digest = hashlib.sha256()
    for tensor in module.state_dict().values():
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def worker(config, env, length, steps):
    """One round in a fresh process: CPU and wall ms per gradient step, and the parameters' digest."""
    learner = _learner(config, env, length)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(steps):
        learner.gradient_step()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    digest = _parameter_digest(learner.network)
    print(json.dumps({"cpu_ms": 1000 * cpu / steps, "wall_ms": 1000 * wall / steps, "digest": digest}))


def _system_round(python_path: str, env_steps: int, folder: str) -> dict:
    """One whole run_classic run from `python_path`: its training env steps/s and CPU seconds."""
    csv_path = os.path.join(folder, "results.csv")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "deep_rl_zoo.r2d2.run_classic",
            "--seed=1",
            "--num_iterations=1",
            f"--num_train_steps={env_steps}",
            "--num_eval_steps=0",
            "--noshow_progress",
            "--nouse_tensorboard",
            f"--checkpoint_dir={folder}/checkpoints",
            f"--runs_dir={folder}/runs",
            f"--results_csv_path={csv_path}",
        ],
        env={**os.environ, "PYTHONPATH": python_path},
        check=True,
        capture_output=True,
        cwd=folder,
    )
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(csv_path) as f:
        row = list(csv.DictReader(f))[-1]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"steps_per_s": float(row["train_steps_per_second"]), "cpu_s": cpu, "wall_s": wall}


def baseline_compare(args, lengths):
    """Alternating rounds, the tree at --baseline first, then this one; medians per tree."""
    here = str(revisions.REPO_ROOT)
    with tempfile.TemporaryDirectory() as folder:
        trees = {f"baseline {args.baseline}": revisions.extract(args.baseline, folder), "this tree": here}
        if args.system:
            results = {name: [] for name in trees}
            for r in range(args.rounds):
                for name, path in trees.items():
                    with tempfile.TemporaryDirectory() as run_folder:
                        results[name].append(_system_round(path, args.env_steps, run_folder))
                    print(f"round {r} {name}: {results[name][-1]}", flush=True)
            medians = {
                name: {k: statistics.median(x[k] for x in values) for k in values[0]}
                for name, values in results.items()
            }
            (old, new) = medians.values()
            print(
                f"run_classic, {args.env_steps} env steps: {old['steps_per_s']:.1f} -> {new['steps_per_s']:.1f} "
                f"env steps/s ({new['steps_per_s'] / old['steps_per_s']:.2f}x), CPU {old['cpu_s']:.1f} -> "
                f"{new['cpu_s']:.1f} s ({new['cpu_s'] / old['cpu_s']:.2f}x); medians of {args.rounds} "
                "alternating rounds"
            )
            return
        for length in lengths:
            arguments = [f"--mean_episode_length={length:g}", f"--steps={args.steps}"]
            arguments += [f"--set={item}" for item in args.set]
            results = {name: [] for name in trees}
            for _ in range(args.rounds):
                for name, path in trees.items():
                    results[name].append(revisions.json_round(__file__, path, arguments))
            digests = {name: {x["digest"] for x in values} for name, values in results.items()}
            cpu = {name: statistics.median(x["cpu_ms"] for x in values) for name, values in results.items()}
            wall = {name: statistics.median(x["wall_ms"] for x in values) for name, values in results.items()}
            (old, new) = trees
            same = "bitwise the same" if len(digests[old] | digests[new]) == 1 else f"DIFFERENT {digests}"
            print(
                f"mean episode length {length:g}: CPU {cpu[old]:.1f} -> {cpu[new]:.1f} ms per gradient step "
                f"({cpu[new] / cpu[old]:.2f}x), wall {wall[old]:.1f} -> {wall[new]:.1f} ms "
                f"({wall[new] / wall[old]:.2f}x); parameters after {args.steps} steps: {same} "
                f"(medians of {args.rounds} alternating rounds)",
                flush=True,
            )


class _DroppingLink:
    """An actor's link that keeps nothing (for timing the actor alone)."""

    actor_index = 0

    def send(self, block, statistics):
        pass

    def pull_parameters(self):
        pass


class _TimedAgent:
    """Passes steps to `agent`, adding up the CPU time they take."""

    def __init__(self, agent):
        self.agent, self.cpu_s = agent, 0.0

    def reset(self):
        self.agent.reset()

    def step(self, timestep):
        start = time.process_time()
        action = self.agent.step(timestep)
        self.cpu_s += time.process_time() - start
        return action


def time_actor(config, env, steps):
    """R2d2Actor.step's CPU ms per env step on CartPole (the rest of the env loop timed apart)."""
    actor, _ = train.build_actor(config, env, torch.device("cpu"), _DroppingLink(), seed=0)
    timed = _TimedAgent(actor)
    start = time.process_time()
    for _ in itertools.islice(main_loop.run_env_loop(env, timed, seed=0), steps):
        pass
    total = time.process_time() - start
    print(
        f"R2d2Actor.step: {1000 * timed.cpu_s / steps:.3f} CPU ms per env step; the env and loop around it "
        f"{1000 * (total - timed.cpu_s) / steps:.3f} ms ({steps} steps)"
    )


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
    parser.add_argument("--baseline", help="git revision to compare this tree with (alternating rounds)")
    parser.add_argument("--system", action="store_true", help="with --baseline: whole run_classic runs")
    parser.add_argument("--env_steps", type=int, default=3000, help="with --system: training env steps")
    parser.add_argument("--actor", action="store_true", help="time an actor's steps instead")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="an R2d2Config field (int)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    env = gym.make("CartPole-v1")
    overrides = {name: int(value) for name, value in (item.split("=", 1) for item in args.set)}
    config = train.R2d2Config(use_tensorboard=False, **overrides)
    lengths = [float(x) for x in args.mean_episode_length.split(",")]
    if args.worker:
        worker(config, env, lengths[0], args.steps)
        return
    if args.actor:
        time_actor(config, env, args.steps)
        return
    load = open("/proc/loadavg").read().split()[:3]
    if args.baseline:
        baseline_compare(args, lengths)
        print("load average before", load, "after", open("/proc/loadavg").read().split()[:3])
        return
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
        cpu = time.process_time()
        elapsed = _timed(learner, args.steps)
        cpu = 1000 * (time.process_time() - cpu) / args.steps
        if args.profile:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(20)
        print(
            f"mean episode length {length:g}: {elapsed:.1f} ms per gradient step ({cpu:.1f} CPU ms) "
            f"(batch {config.batch_size} x {config.sequence_length} steps, burn-in {config.burn_in})",
            flush=True,
        )
    print("load average before", load, "after", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
