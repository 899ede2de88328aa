"""Env steps per second of Atari data collection with 1, 2, ... actor processes feeding one learner.

Each actor runs the real acting path of our distributed agents: its own Pong env (Nature-DQN
preprocessing), PPO's Nature-CNN actor-critic on the CPU sampling every action (`unrolls.UnrollActor`),
unrolls of 128 steps sent through the local runtime's per-actor pipes (`runtime.local`). The learner
only consumes: it takes every unroll and publishes the same parameters again (so the actors' wait for new
parameters is as short as it can be and the figure measures collection, not learning).

    python benchmarks/distributed_scaling.py --num_actors=1,2 --seconds=30
    unshare -n sh -c 'ip link set lo up; python benchmarks/distributed_scaling.py --backends=local,ray'

The second line measures the Ray backend beside the local one in one run (Ray's overhead as a ratio),
in a network namespace with only loopback, so the local Ray instance sends nothing off the machine.

For each actor count: start the pool, wait until every actor has delivered one unroll (start-up and
imports excluded), then count env steps delivered during `--seconds`. Target: 2 actors
reach >= 1.7x the env steps/s of 1 actor on a 2-core machine. The machine must be otherwise idle for
that to be possible: with other work running, the actors share the cores with it. `--actors_on_gpu`
places the actors' networks as the run scripts' flag does (see benchmarks/gpu_checks.sh).
"""

import argparse
import functools
import sys
import time

import torch

from deep_rl_zoo import distributed, gym_env
from deep_rl_zoo.ppo import train
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.runtime.local import LocalActorRuntime
from deep_rl_zoo.runtime.ray_backend import RayActorRuntime

UNROLL_LENGTH = 128


def build_actor(
    config: train.PpoConfig, actor_index: int, seed: int, device: torch.device, link: LearnerLink
):
    torch.set_num_threads(1)
    env = gym_env.create_atari_environment(config.environment_name, seed=seed)
    actor, network = train.build_actor(config, env, device, link, seed=seed)
    return env, actor, network


def measure(num_actors: int, seconds: float, actors_on_gpu: bool = False, backend: str = "local") -> float:
    config = train.PpoConfig(environment_name="Pong", num_actors=num_actors, unroll_length=UNROLL_LENGTH,
                             minibatch_size=64, shared_torso=True)  # fmt: skip
    env = gym_env.create_atari_environment(config.environment_name, seed=0)
    network = train.build_network(config, env)
    env.close()
    if backend == "ray":
        pool = RayActorRuntime(
            network,
            functools.partial(build_actor, config),
            list(range(num_actors)),
            actors_on_gpu=actors_on_gpu,
        )
    else:
        pool = LocalActorRuntime(
            network,
            functools.partial(build_actor, config),
            seeds=list(range(num_actors)),
            devices=distributed.actor_devices(num_actors, actors_on_gpu),
        )
    with pool:
        warmed_up: set[int] = set()
        while len(warmed_up) < num_actors:  # every actor has started and sent once
            warmed_up.add(pool.get().actor_index)
            pool.publish(network)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += pool.get().num_env_steps
            pool.publish(network)
        return steps / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_actors", default="1,2", help="Comma-separated actor counts.")
    parser.add_argument("--seconds", type=float, default=30.0, help="Measuring time per actor count.")
    parser.add_argument(
        "--actors_on_gpu",
        action="store_true",
        help="Actor i on GPU i mod (visible GPUs), as the run scripts.",
    )
    parser.add_argument(
        "--backends",
        default="local",
        help="Comma-separated: local, ray (a local Ray instance; run inside `unshare -n` to keep it on "
        "loopback). With both, Ray's figure is also given as a ratio to the local one.",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    counts = [int(x) for x in args.num_actors.split(",")]
    backends = args.backends.split(",")
    results: dict[tuple[str, int], float] = {}
    for backend in backends:
        for count in counts:
            results[backend, count] = measure(count, args.seconds, args.actors_on_gpu, backend)
            rate = results[backend, count]
            versus_local = ""
            if backend != "local" and ("local", count) in results:
                versus_local = f", {rate / results['local', count]:.2f}x the local backend"
            print(
                f"{backend} backend, {count} actor(s): {rate:.0f} env steps/s "
                f"({rate / results[backend, counts[0]]:.2f}x{versus_local})",
                flush=True,
            )
    rates = {count: results[backends[0], count] for count in counts}
    if 1 in rates and 2 in rates:
        speedup = rates[2] / rates[1]
        print(f"2 actors / 1 actor = {speedup:.2f}; target >= 1.70: {'PASS' if speedup >= 1.7 else 'FAIL'}")
        return 0 if speedup >= 1.7 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
