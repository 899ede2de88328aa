"""Env steps per second of agents' actors on wrapped Pong, against the same env stepped with random actions.

Every contender drives its own copy of the training environment (`run_support.make_environment` with
the agent's `run_atari` defaults: Nature-DQN preprocessing, frame stack of 4, life loss and reward
clipping) through `main_loop.run_env_loop`, so environment, wrappers and loop cost the same for all;
what differs is only how the action is chosen:

- `random`: a uniformly random action (no network).
- `dqn`, `rainbow`, `iqn`: the agent's evaluation actor from `<agent>.train.build_agents(config, env,
  device)`, a forward pass of its freshly initialised network on every step (epsilon 0 unless
  `--epsilon` says otherwise; the speed of a forward does not depend on the weights). An agent whose
  package is not in this checkout is skipped with a note.

`--forward_variants` also times one forward pass of DQN's Nature CNN on one observation in ways the
actor could run it, to show what is within reach: as `greedy_actors.greedy_action` does it now, into a
preallocated input tensor, with channels_last memory format, as a frozen TorchScript trace, and with
two torch threads. Each way is timed in alternating rounds as well.

The contenders take turns in `--blocks` blocks of `--num_steps` env steps each, so a change in the load
of a shared machine hits all of them alike. The ratio printed is actor steps/s / random steps/s; the
target for DQN is >= 0.80.

    python benchmarks/atari_acting_speed.py [--agents=dqn,rainbow,iqn] [--num_steps=1000] [--blocks=3]
        [--num_threads=1] [--epsilon=0.0] [--forward_variants]
"""

import argparse
import dataclasses
import importlib
import sys
import time
import typing
from pathlib import Path

import numpy as np
import torch

try:
    from deep_rl_zoo import greedy_actors, main_loop, run_support
    from deep_rl_zoo.config import RunConfig
    from deep_rl_zoo.networks.value import build_q_network
except ImportError:  # run as a script from a checkout that was not `pip install -e`-ed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deep_rl_zoo import greedy_actors, main_loop, run_support
    from deep_rl_zoo.config import RunConfig
    from deep_rl_zoo.networks.value import build_q_network

ENVIRONMENT = "Pong"
TARGET_RATIO = 0.8


class RandomActor:
    """Uniformly random actions: the environment's own speed, with the same loop around it."""

    def __init__(self, num_actions: int, rng: np.random.Generator):
        self._num_actions = num_actions
        self._rng = rng

    def step(self, timestep) -> int:
        return int(self._rng.integers(self._num_actions))

    def reset(self) -> None:
        pass


def build_contender(agent_name: str, seed: int, epsilon: float | None):
    """(env, actor) of `agent_name`'s evaluation actor, or None if the package is absent."""
    try:
        train = importlib.import_module(f"deep_rl_zoo.{agent_name}.train")
        run_atari = importlib.import_module(f"deep_rl_zoo.{agent_name}.run_atari")
    except ModuleNotFoundError as error:
        print(f"skipping {agent_name}: {error}")
        return None
    config_cls = typing.get_type_hints(train.build_agents)["config"]
    values = {
        **run_atari.DEFAULTS,
        "environment_name": ENVIRONMENT,
        "seed": seed,
        "replay_capacity": 1000,  # the actor never touches the replay; keep its allocation small
        "min_replay_size": 1000,
    }
    field_names = {f.name for f in dataclasses.fields(config_cls)}
    if epsilon is not None and "eval_exploration_epsilon" in field_names:
        values["eval_exploration_epsilon"] = epsilon
    config = config_cls(**values)
    env = run_support.make_environment(config, seed, train=True)
    agents = train.build_agents(config, env, torch.device("cpu"))
    return env, agents.eval_agent


def run_block(env_loop, num_steps: int) -> float:
    """Seconds taken by `num_steps` env steps (resets count towards the time, not the steps)."""
    steps = 0
    start = time.perf_counter()
    for timestep, _ in env_loop:
        if not timestep.first:
            steps += 1
            if steps >= num_steps:
                break
    return time.perf_counter() - start


def time_forward_variants(
    observation: np.ndarray, num_actions: int, num_threads: int, rounds: int = 3
) -> None:
    """Prints the milliseconds of one forward pass (and arg-max) of the Nature CNN, done several ways."""
    device = torch.device("cpu")
    network = build_q_network(observation.shape, num_actions).eval()
    buffer = torch.empty((1, *observation.shape), dtype=torch.uint8)
    channels_last = (
        build_q_network(observation.shape, num_actions).eval().to(memory_format=torch.channels_last)
    )
    with torch.inference_mode():
        traced = torch.jit.freeze(torch.jit.trace(network, buffer, strict=False))

    @torch.inference_mode()
    def preallocated() -> int:
        buffer[0].copy_(torch.from_numpy(observation))
        return int(network(buffer).q_values.argmax(dim=1).item())

    @torch.inference_mode()
    def in_channels_last() -> int:
        x = torch.from_numpy(observation).unsqueeze(0).contiguous(memory_format=torch.channels_last)
        return int(channels_last(x).q_values.argmax(dim=1).item())

    @torch.inference_mode()
    def torchscript() -> int:
        return int(traced(torch.from_numpy(observation).unsqueeze(0))[0].argmax(dim=1).item())

    variants = {
        "greedy_action as is": lambda: greedy_actors.greedy_action(network, observation, device),
        "preallocated input": preallocated,
        "channels_last": in_channels_last,
        "TorchScript trace, frozen": torchscript,
        "greedy_action, 2 threads": lambda: greedy_actors.greedy_action(network, observation, device),
    }
    seconds = dict.fromkeys(variants, 0.0)
    calls = 100
    for round_index in range(rounds + 1):  # round 0 is a warm-up
        for name, forward in variants.items():
            torch.set_num_threads(2 if "2 threads" in name else num_threads)
            start = time.perf_counter()
            for _ in range(calls):
                forward()
            if round_index > 0:
                seconds[name] += time.perf_counter() - start
    torch.set_num_threads(num_threads)
    print(f"\nNature CNN forward of one observation, {rounds * calls} calls each in alternating rounds")
    print("| way | ms per forward |")
    print("|---|---:|")
    for name, elapsed in seconds.items():
        print(f"| {name} | {1000 * elapsed / (rounds * calls):.3f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--agents", default="dqn", help="Comma-separated agent packages, e.g. dqn,rainbow,iqn."
    )
    parser.add_argument("--num_steps", type=int, default=1000, help="Env steps per contender per block.")
    parser.add_argument("--blocks", type=int, default=3, help="Turns each contender takes.")
    parser.add_argument(
        "--num_threads", type=int, default=1, help="torch CPU threads (the actors' default is 1)."
    )
    parser.add_argument(
        "--epsilon", type=float, default=0.0, help="Actors' epsilon: 0 runs a forward pass on every step."
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--forward_variants", action="store_true", help="Also time ways of running the DQN forward pass."
    )
    args = parser.parse_args()
    run_support.seed_everything(args.seed, args.num_threads)

    probe = run_support.make_environment(RunConfig(environment_name=ENVIRONMENT), args.seed, train=True)
    contenders = {"random": (probe, RandomActor(int(probe.action_space.n), np.random.default_rng(args.seed)))}
    for name in args.agents.split(","):
        built = build_contender(name.strip(), args.seed, args.epsilon)
        if built is not None:
            contenders[name.strip()] = built
    loops = {
        name: main_loop.run_env_loop(env, actor, seed=args.seed) for name, (env, actor) in contenders.items()
    }

    for loop in loops.values():  # warm-up: first reset, lazy allocations, first forward passes
        run_block(loop, 50)
    seconds = dict.fromkeys(loops, 0.0)
    for _ in range(args.blocks):
        for name, loop in loops.items():
            seconds[name] += run_block(loop, args.num_steps)

    total_steps = args.blocks * args.num_steps
    random_rate = total_steps / seconds["random"]
    print(
        f"\n{ENVIRONMENT}, {total_steps} env steps each in {args.blocks} alternating blocks, "
        f"{args.num_threads} torch thread(s), actors' epsilon {args.epsilon}"
    )
    print("| actor | env steps/s | ms per step | ratio to random |")
    print("|---|---:|---:|---:|")
    for name, elapsed in seconds.items():
        rate = total_steps / elapsed
        print(f"| {name} | {rate:.0f} | {1000 / rate:.2f} | {rate / random_rate:.2f} |")
    for loop in loops.values():
        loop.close()
    if args.forward_variants:
        observation, _ = probe.reset(seed=args.seed)
        time_forward_variants(observation, int(probe.action_space.n), args.num_threads)
    for env, _ in contenders.values():
        env.close()
    if "dqn" in seconds:
        ratio = (total_steps / seconds["dqn"]) / random_rate
        print(
            f"DQN actor / random = {ratio:.2f} (target >= {TARGET_RATIO}): {'PASS' if ratio >= TARGET_RATIO else 'FAIL'}"
        )
        return 0 if ratio >= TARGET_RATIO else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
