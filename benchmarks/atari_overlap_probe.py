"""What overlapping env steps with the network's forward could gain over the zoo's serial vector loop.

The zoo's vector loop (`main_loop.run_vector_env_loop`) steps N envs, then runs one batched forward for
all N, one after the other: it cannot beat N / (env round + forward). On a 2-core CPU the C++ env
threads idle during the forward and the forward's core idles during the env round. This probe splits
the N envs into two vector envs of N / 2 and keeps one half stepping in ale-py's C++ threads (`send`,
later `recv`) while the network acts on the other half's observations. It uses ale-py's vector env
directly (its own frame stack, no life loss, no statistics: the same for both loops) and DQN's Nature
CNN with greedy actions, so it measures only the schedule, not the zoo's Python layer. The zoo does
not run this schedule yet: agents take all N envs' timesteps at once (`step_batch`), and the PPO
actor's unrolls advance in lockstep; this probe is the figure an issue for it starts from.

Contenders alternate over `--blocks` blocks of `--rounds` rounds: `serial` (N envs, then a forward of
N), `overlapped` (two halves), `env alone` and `forward alone` (of N) for the serial bound.

`--processes=P` runs P such probes at once, each in its own process with its own envs and one torch
thread, as the actor processes of a batched agent do (PPO on 2 cores: 2 processes of 4 envs, each vector
env on 2 C++ threads); a barrier starts each contender in all of them together, and the rates printed are
the sums over the processes. One process beside an idle core is where the overlap can gain; P processes
that already keep every core busy leave it little idle time to fill.

    python benchmarks/atari_overlap_probe.py [--num_envs=8] [--env_threads=1] [--rounds=150] [--blocks=3]
    python benchmarks/atari_overlap_probe.py --processes=2 --num_envs=4 --env_threads=2   # PPO's actors
"""

import argparse
import multiprocessing
import queue
import sys
import time
from pathlib import Path

import numpy as np
import torch
from ale_py.vector_env import AtariVectorEnv

try:
    from deep_rl_zoo import greedy_actors
except ImportError:  # run as a script from a checkout that was not `pip install -e`-ed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deep_rl_zoo import greedy_actors
from deep_rl_zoo.networks.value import build_q_network

CPU = torch.device("cpu")


class Probe:
    def __init__(self, num_envs: int, env_threads: int, seed: int):
        def vector(n: int) -> AtariVectorEnv:
            return AtariVectorEnv(
                "pong", n, num_threads=env_threads, stack_num=4, img_height=84, img_width=84, frameskip=4
            )

        self.num_envs = num_envs
        self.network = build_q_network((4, 84, 84), 6)
        self._rng = np.random.default_rng(seed)
        self._whole = vector(num_envs)
        self._halves = [vector(num_envs // 2), vector(num_envs // 2)]
        self._observation, _ = self._whole.reset(seed=seed)
        self._half_observations = [
            half.reset(seed=seed + 1000 * (i + 1))[0] for i, half in enumerate(self._halves)
        ]

    def _act(self, observations: np.ndarray) -> np.ndarray:
        return np.asarray(greedy_actors.greedy_actions(self.network, observations, CPU), np.int64)

    def serial(self, rounds: int) -> None:
        for _ in range(rounds):
            self._observation, *_ = self._whole.step(self._act(self._observation))

    def overlapped(self, rounds: int) -> None:
        (a, b), (obs_a, obs_b) = self._halves, self._half_observations
        a.send(self._act(obs_a))
        for _ in range(rounds):
            actions_b = self._act(obs_b)  # while half a steps in the C++ threads
            obs_a, *_ = a.recv()
            b.send(actions_b)
            actions_a = self._act(obs_a)  # while half b steps
            obs_b, *_ = b.recv()
            a.send(actions_a)
        obs_a, *_ = a.recv()
        self._half_observations = [obs_a, obs_b]

    def env_alone(self, rounds: int) -> None:
        for _ in range(rounds):
            self._whole.step(self._rng.integers(6, size=self.num_envs))

    def forward_alone(self, rounds: int) -> None:
        for _ in range(rounds):
            self._act(self._observation)


def measure(args: argparse.Namespace, index: int, barrier, results) -> None:
    """One probe (process `index`): each contender's seconds over all blocks, put on `results`."""
    torch.set_num_threads(1)
    probe = Probe(args.num_envs, args.env_threads, args.seed + 7919 * index)
    contenders = {
        "serial": probe.serial,
        "overlapped": probe.overlapped,
        "env alone": probe.env_alone,
        "forward alone": probe.forward_alone,
    }
    for run in contenders.values():  # warm-up
        run(10)
    seconds = dict.fromkeys(contenders, 0.0)
    for _ in range(args.blocks):
        for name, run in contenders.items():
            barrier.wait(timeout=600)  # a probe that died leaves the others an error, not a hang
            start = time.perf_counter()
            run(args.rounds)
            seconds[name] += time.perf_counter() - start
    results.put(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_envs", type=int, default=8, help="Envs in all per process (an even number).")
    parser.add_argument("--env_threads", type=int, default=1, help="C++ threads of each vector env.")
    parser.add_argument("--rounds", type=int, default=150, help="Rounds of all the envs per block.")
    parser.add_argument("--blocks", type=int, default=3, help="Blocks in which the contenders take turns.")
    parser.add_argument("--processes", type=int, default=1, help="Probes running at once, one per process.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if (
        args.num_envs < 2
        or args.num_envs % 2
        or min(args.env_threads, args.rounds, args.blocks, args.processes) < 1
    ):
        raise SystemExit(
            "--num_envs must be even and >= 2; --env_threads, --rounds, --blocks, --processes >= 1"
        )
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(args.processes), context.Queue()
    workers = [
        context.Process(target=measure, args=(args, index, barrier, results))
        for index in range(args.processes)
    ]
    for worker in workers:
        worker.start()
    per_process = []
    while len(per_process) < len(workers):
        try:
            per_process.append(results.get(timeout=1))
        except queue.Empty:
            if any(worker.exitcode not in (None, 0) for worker in workers):
                for worker in workers:
                    worker.kill()
                raise SystemExit("a probe process failed (its traceback is above)") from None
    for worker in workers:
        worker.join()
    steps = args.blocks * args.rounds * args.num_envs
    rates = {name: sum(steps / seconds[name] for seconds in per_process) for name in per_process[0]}
    print(
        f"{args.processes} process(es) x {args.num_envs} envs, {args.env_threads} C++ thread(s) per vector env, "
        "1 torch thread each"
    )
    for name, rate in rates.items():
        print(f"  {name:14s} {rate:7.0f} env steps/s")
    bound = 1 / (1 / rates["env alone"] + 1 / rates["forward alone"])
    print(
        f"serial bound {bound:.0f} env steps/s; overlapped / serial {rates['overlapped'] / rates['serial']:.2f}, "
        f"overlapped / serial bound {rates['overlapped'] / bound:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
