"""Env steps per second of acting on wrapped Pong: one env per actor as before, and `--num_envs` envs on
ale-py's C++ vector env with one batched forward per round, against the bound of its two parts.

Single env (what an actor did before `--num_envs`): every contender drives its own copy of the
training environment (`environments.make_environment` with the agent's `run_atari` defaults: Nature-DQN
preprocessing, frame stack of 4, life loss and reward clipping) through `main_loop.run_env_loop`:

- `random`: a uniformly random action (no network): the single env's own speed.
- `dqn`, `rainbow`, `iqn`: the agent's evaluation actor from `<agent>.train.build_agents(config, env,
  device)`, a forward pass of its freshly initialised network on every step (epsilon 0 unless
  `--epsilon` says otherwise; the speed of a forward does not depend on the weights).

Vector envs (`--num_envs=N`, 0 skips them), the same preprocessing on `vector_env.AtariVectorEnvironment`:

- `vector env alone`: one round = `env.step(N random actions)`, with the Python layer (stacks,
  statistics, life loss) included: what the loop cannot avoid.
- `batched forward alone`: DQN's Nature CNN on a batch of N observations, arg-max included.
- `vector loop (dqn)`: `main_loop.run_vector_env_loop` with DQN's evaluation actor
  (`EpsilonGreedyActor.step_batch`: one forward for all N envs per round).
- `vector loop (dqn, learning side)`: the same with DQN's training agent during its replay warm-up:
  its actions plus every env's transition into the replay (per-env streams), without gradient steps.

bound = N / (seconds of one env round + seconds of one batched forward): a loop that runs env and
forward one after the other cannot beat it. Targets: the vector loop >= 2x the single-env
DQN actor's env steps/s, and >= 90% of the bound.

`--forward_variants` also times one forward pass of DQN's Nature CNN on one observation in ways the
actor could run it (as `greedy_actors.greedy_action` does it now, into a preallocated input tensor,
with channels_last memory format, as a frozen TorchScript trace, and with two torch threads).

The contenders take turns in `--blocks` blocks of `--num_steps` env steps each, so a change in the load
of a shared machine hits all of them alike; the load average is printed before and after.

    python benchmarks/atari_acting_speed.py [--agents=dqn,rainbow,iqn] [--num_envs=8] [--env_threads=2]
        [--num_steps=1000] [--blocks=3] [--num_threads=1] [--epsilon=0.0] [--forward_variants]
"""

import argparse
import dataclasses
import importlib
import os
import sys
import time
import typing
from pathlib import Path

import numpy as np
import torch

try:
    from deep_rl_zoo import environments, greedy_actors, main_loop, process_setup, vector_env
    from deep_rl_zoo.config import RunConfig
    from deep_rl_zoo.networks.value import build_q_network
except ImportError:  # run as a script from a checkout that was not `pip install -e`-ed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deep_rl_zoo import environments, greedy_actors, main_loop, process_setup, vector_env
    from deep_rl_zoo.config import RunConfig
    from deep_rl_zoo.networks.value import build_q_network

ENVIRONMENT = "Pong"
TARGET_SPEED_UP = 2.0  # vector loop / single-env DQN actor
TARGET_OF_BOUND = 0.9  # vector loop / (env alone + forward alone)


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
    env = environments.make_environment(config, seed, train=True)
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


class VectorContenders:
    """The vector-env contenders; each `run_*(num_steps)` returns (seconds, env steps) of about
    `num_steps` env steps (whole rounds of N)."""

    def __init__(
        self,
        num_envs: int,
        env_threads: int,
        seed: int,
        epsilon: float,
        num_steps_total: int,
        device: torch.device,
    ):
        from deep_rl_zoo.dqn import run_atari as dqn_run_atari
        from deep_rl_zoo.dqn import train as dqn_train

        self.num_envs = num_envs
        self._rng = np.random.default_rng(seed)

        def vector(offset: int) -> vector_env.AtariVectorEnvironment:
            return vector_env.AtariVectorEnvironment(
                ENVIRONMENT,
                num_envs,
                terminal_on_life_loss=True,
                clip_reward=True,
                num_threads=env_threads,
            )

        self._alone_env = vector(0)
        self._alone_env.reset(seed=seed)
        self._num_actions = int(self._alone_env.single_action_space.n)
        capacity = num_steps_total + 100 * num_envs + 1000  # the warm-up never ends: no gradient step
        config = dqn_train.DqnConfig(
            **{
                **dqn_run_atari.DEFAULTS,
                "environment_name": ENVIRONMENT,
                "seed": seed,
                "num_envs": num_envs,
                "replay_capacity": capacity,
                "min_replay_size": capacity,
                "eval_exploration_epsilon": epsilon,
                "exploration_epsilon_begin_value": epsilon,  # a forward on every step, as the eval actor
                "exploration_epsilon_end_value": epsilon,
            }
        )
        self._loop_env = vector(1)
        agents = dqn_train.build_agents(config, self._loop_env, device)
        self._device = device
        self.network = agents.eval_agent._network
        self._loop = main_loop.run_vector_env_loop(self._loop_env, agents.eval_agent, seed=seed)
        self._learning_env = vector(2)
        self._learning_loop = main_loop.run_vector_env_loop(self._learning_env, agents.train_agent, seed=seed)
        self._batch = np.stack([t.observation for t in self._alone_env.step(self._actions())])

    def _actions(self) -> np.ndarray:
        return self._rng.integers(self._num_actions, size=self.num_envs)

    def _rounds(self, num_steps: int) -> int:
        return max(1, -(-num_steps // self.num_envs))

    def run_env_alone(self, num_steps: int) -> tuple[float, int]:
        rounds = self._rounds(num_steps)
        actions = [self._actions() for _ in range(rounds)]
        start = time.perf_counter()
        for round_actions in actions:
            self._alone_env.step(round_actions)
        return time.perf_counter() - start, rounds * self.num_envs

    def run_forward_alone(self, num_steps: int) -> tuple[float, int]:
        rounds = self._rounds(num_steps)
        start = time.perf_counter()
        for _ in range(rounds):
            greedy_actors.greedy_actions(self.network, self._batch, self._device)
        return time.perf_counter() - start, rounds * self.num_envs

    def run_loop(self, num_steps: int) -> tuple[float, int]:
        return run_block(self._loop, num_steps), num_steps

    def run_learning_loop(self, num_steps: int) -> tuple[float, int]:
        return run_block(self._learning_loop, num_steps), num_steps

    def close(self) -> None:
        self._loop.close()
        self._learning_loop.close()
        for env in (self._alone_env, self._loop_env, self._learning_env):
            env.close()


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
    parser.add_argument(
        "--num_envs", type=int, default=8, help="Envs of the vector contenders; 0 skips them."
    )
    parser.add_argument(
        "--env_threads",
        type=int,
        default=0,
        help="C++ threads of the vector env; 0: min(num_envs, CPU cores).",
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
        "--device", default="cpu", help="Device of the vector contenders' network (cuda on a GPU machine)."
    )
    parser.add_argument(
        "--forward_variants", action="store_true", help="Also time ways of running the DQN forward pass."
    )
    args = parser.parse_args()
    if args.num_envs < 0 or args.num_steps < 1 or args.blocks < 1:
        print("error: --num_envs must be >= 0, --num_steps and --blocks >= 1", file=sys.stderr)
        return 2
    process_setup.seed_everything(args.seed, args.num_threads)
    load_before = os.getloadavg()

    probe = environments.make_environment(RunConfig(environment_name=ENVIRONMENT), args.seed, train=True)
    contenders = {"random": (probe, RandomActor(int(probe.action_space.n), np.random.default_rng(args.seed)))}
    for name in args.agents.split(","):
        built = build_contender(name.strip(), args.seed, args.epsilon)
        if built is not None:
            contenders[name.strip()] = built
    loops = {
        name: main_loop.run_env_loop(env, actor, seed=args.seed) for name, (env, actor) in contenders.items()
    }
    runners = {
        name: (lambda num_steps, loop=loop: (run_block(loop, num_steps), num_steps))
        for name, loop in loops.items()
    }
    vector = None
    if args.num_envs > 0:
        env_threads = args.env_threads or min(args.num_envs, os.cpu_count() or 1)
        vector = VectorContenders(
            args.num_envs,
            env_threads,
            args.seed,
            args.epsilon,
            (args.blocks + 1) * args.num_steps,
            process_setup.resolve_device(args.device),
        )
        runners.update(
            {
                "vector env alone": vector.run_env_alone,
                "batched forward alone": vector.run_forward_alone,
                "vector loop (dqn)": vector.run_loop,
                "vector loop (dqn, learning side)": vector.run_learning_loop,
            }
        )

    for run in runners.values():  # warm-up: first reset, lazy allocations, first forward passes
        run(50)
    seconds = dict.fromkeys(runners, 0.0)
    steps = dict.fromkeys(runners, 0)
    for _ in range(args.blocks):
        for name, run in runners.items():
            elapsed, taken = run(args.num_steps)
            seconds[name] += elapsed
            steps[name] += taken
    load_after = os.getloadavg()

    rates = {name: steps[name] / seconds[name] for name in runners}
    print(
        f"\n{ENVIRONMENT}, about {args.blocks * args.num_steps} env steps each in {args.blocks} alternating "
        f"blocks, {args.num_threads} torch thread(s), actors' epsilon {args.epsilon}"
        + (f", {args.num_envs} vector envs on {env_threads} C++ thread(s)" if vector else "")
        + f"; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after ({os.cpu_count()} cores)"
    )
    print("| contender | env steps/s | ms per env step | ratio to single-env random |")
    print("|---|---:|---:|---:|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:.0f} | {1000 / rate:.3f} | {rate / rates['random']:.2f} |")
    for loop in loops.values():
        loop.close()
    if args.forward_variants:
        observation, _ = probe.reset(seed=args.seed)
        time_forward_variants(observation, int(probe.action_space.n), args.num_threads)
    for env, _ in contenders.values():
        env.close()
    if vector is None or "dqn" not in rates:
        if vector is not None:
            vector.close()
        return 0
    n = args.num_envs
    env_round = n / rates["vector env alone"]  # seconds per round
    forward = n / rates["batched forward alone"]
    bound = n / (env_round + forward)
    loop_rate = rates["vector loop (dqn)"]
    speed_up, of_bound = loop_rate / rates["dqn"], loop_rate / bound
    print(
        f"bound = {n} / ({1000 * env_round:.2f} ms env round + {1000 * forward:.2f} ms forward) = {bound:.0f} "
        "env steps/s"
    )
    print(
        f"vector loop / single-env DQN actor = {speed_up:.2f} (target >= {TARGET_SPEED_UP}): "
        f"{'PASS' if speed_up >= TARGET_SPEED_UP else 'FAIL'}"
    )
    print(
        f"vector loop / bound = {of_bound:.2f} (target >= {TARGET_OF_BOUND}): "
        f"{'PASS' if of_bound >= TARGET_OF_BOUND else 'FAIL'}"
    )
    print(
        f"vector loop / vector env alone = {loop_rate / rates['vector env alone']:.2f} (the GPU target, where "
        "the forward is nearly free: >= 0.8)"
    )
    vector.close()
    return 0 if speed_up >= TARGET_SPEED_UP and of_bound >= TARGET_OF_BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
