"""Where a recurrent learner's gradient step goes on Atari shapes: R2D2, NGU and Agent57, part by part.

    python benchmarks/recurrent_learner_breakdown.py --agents=r2d2,ngu,agent57 --steps=3
    python benchmarks/recurrent_learner_breakdown.py --agents=ngu --steps=3 --bfloat16=both
    python benchmarks/recurrent_learner_breakdown.py --agents=ngu --batch_size=4 --steps=2   # a quick look

Each agent's learner is built from its `run_atari` defaults (64 sequences of 40 burn-in + 80 learned + 1
steps, Nature CNN + LSTM 512, 18 actions) on a replay filled with synthetic Atari blocks (random frames,
episodes of geometric length, mean 500 steps), and takes `--steps` gradient steps after one untimed step.
The learner's own code runs unchanged: the benchmark wraps the functions it calls (the replay's `sample`,
`unroll` of each network, the target computation, NGU's `auxiliary_losses`, `optimization.gradient_step`
and `apply_gradients`, the priority update) with timers, so the parts add up to the whole step and "rest"
is what no timer covers. Backward is `gradient_step` less `apply_gradients` (clipping and Adam).

    python benchmarks/recurrent_learner_breakdown.py --agents=ngu --baseline=HEAD~1 --rounds=2

`--baseline=REV`: the package at git revision REV against this tree, alternating rounds of fresh processes
(`revisions.py`), the medians of each part's CPU seconds side by side. `--set=NAME=VALUE` changes a field
of the config from run_atari's default in the trees whose config has it (`--set=auxiliary_steps=0`: NGU
learning the embedding and RND on every learned step, as before that was a flag).

After the timed steps, one more batch splits backward by network: the Q loss's backward and the embedding
and RND losses' backward timed apart (they share no parameters, so their sum is the joint backward).

`--bfloat16=on|off|both`: the run's `--bfloat16` (Nature-CNN torsos in bfloat16 autocast), `both`
measuring off then on in this process. Threads: `--num_threads` (default: every core, as the learners
of these agents take when the flag is unset). Wall and CPU (process) seconds per part; name the CPU
(`lscpu`) beside any figure, and compare parts within one run.
"""

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from gymnasium import spaces

from deep_rl_zoo import optimization
from deep_rl_zoo.agent57 import agent as agent57_agent
from deep_rl_zoo.agent57 import run_atari as agent57_run_atari
from deep_rl_zoo.agent57 import train as agent57_train
from deep_rl_zoo.networks import common
from deep_rl_zoo.ngu import agent as ngu_agent
from deep_rl_zoo.ngu import run_atari as ngu_run_atari
from deep_rl_zoo.ngu import train as ngu_train
from deep_rl_zoo.r2d2 import agent as r2d2_agent
from deep_rl_zoo.r2d2 import run_atari as r2d2_run_atari
from deep_rl_zoo.r2d2 import train as r2d2_train
from deep_rl_zoo.sequence_replay import SequenceBlock

sys.path.insert(0, str(Path(__file__).resolve().parent))
import revisions  # noqa: E402  (benchmarks/ is not a package)

AGENTS = {
    "r2d2": (r2d2_train.R2d2Config, r2d2_run_atari.DEFAULTS, r2d2_train.build_learner),
    "ngu": (ngu_train.NguConfig, ngu_run_atari.DEFAULTS, ngu_train.build_learner),
    "agent57": (agent57_train.Agent57Config, agent57_run_atari.DEFAULTS, agent57_train.build_learner),
}
NUM_ACTIONS = 18
FRAME = (84, 84)


class AtariSpaces:
    """What `build_learner` reads of an Atari env: 4 stacked 84x84 frames, the full action set."""

    observation_space = spaces.Box(0, 255, (4, *FRAME), np.uint8)
    action_space = spaces.Discrete(NUM_ACTIONS)


def fill(learner, config, rng: np.random.Generator, mean_episode_length: float = 500.0) -> None:
    """Blocks of random frames from 4 actors until a batch can be sampled many times over."""
    period, replay = config.replay_period, learner._replay
    state_size = learner._network.initial_state(1)[0].shape[-1]  # Agent57: both networks' states
    num_blocks = max(config.batch_size * 4, config.sequence_length // period + 8) + 8
    for j in range(num_blocks):
        first = rng.random(period) < 1.0 / mean_episode_length
        replay.add_block(
            SequenceBlock(
                actor_index=j % 4,
                observation=rng.integers(0, 256, (period, *FRAME), dtype=np.uint8),
                action=rng.integers(NUM_ACTIONS, size=period).astype(np.int64),
                reward=rng.choice([0.0, 1.0], p=[0.99, 0.01], size=period).astype(np.float32),
                terminated=np.roll(first, -1),
                truncated=np.zeros(period, bool),
                first=first,
                core_state=tuple(rng.standard_normal(state_size).astype(np.float32) for _ in range(2)),
                extras={
                    "previous_action": rng.integers(NUM_ACTIONS, size=period).astype(np.int64),
                    "policy_index": np.full(period, j % getattr(config, "num_policies", 1), np.int64),
                    "intrinsic_reward": rng.random(period).astype(np.float32),
                    "behaviour_probability": rng.uniform(0.05, 1.0, period).astype(np.float32),
                },
            )
        )


class Timers:
    """Wall and CPU seconds per named part, added up over calls."""

    def __init__(self):
        self.wall, self.cpu = defaultdict(float), defaultdict(float)

    @contextlib.contextmanager
    def part(self, name: str):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall[name] += time.perf_counter() - wall
            self.cpu[name] += time.process_time() - cpu

    def wrap(self, function, name):
        def timed(*args, **kwargs):
            label = name(*args, **kwargs) if callable(name) else name
            with self.part(label):
                return function(*args, **kwargs)

        return timed


@contextlib.contextmanager
def patched(target, attribute: str, replacement):
    original = getattr(target, attribute)
    setattr(target, attribute, replacement)
    try:
        yield
    finally:
        setattr(target, attribute, original)


def unroll_label(learner):
    def label(network, observation, state, first):
        if network is learner._target_network:
            return "target net: burn-in + learned steps (no grad)"
        if torch.is_grad_enabled():
            return "online net: learned steps (forward)"
        return "online net: burn-in (no grad)"

    return label


def instrumented(learner, timers: Timers):
    """Every function of the step this benchmark times, wrapped (restored when the block ends)."""
    stack = contextlib.ExitStack()
    replay = learner._replay
    stack.enter_context(patched(replay, "sample", timers.wrap(replay.sample, "replay: sample")))
    stack.enter_context(
        patched(replay, "update_priorities", timers.wrap(replay.update_priorities, "replay: priorities"))
    )
    stack.enter_context(patched(r2d2_agent, "unroll", timers.wrap(r2d2_agent.unroll, unroll_label(learner))))
    targets = "targets (n-step double Q or Retrace), forward"
    stack.enter_context(
        patched(r2d2_agent, "r2d2_td_errors", timers.wrap(r2d2_agent.r2d2_td_errors, targets))
    )
    stack.enter_context(
        patched(ngu_agent, "retrace_td_errors", timers.wrap(ngu_agent.retrace_td_errors, targets))
    )
    stack.enter_context(
        patched(agent57_agent, "agent57_td_errors", timers.wrap(agent57_agent.agent57_td_errors, targets))
    )
    stack.enter_context(
        patched(ngu_agent, "sequence_tensors", timers.wrap(ngu_agent.sequence_tensors, "batch to tensors"))
    )
    stack.enter_context(
        patched(
            ngu_agent,
            "auxiliary_losses",
            timers.wrap(ngu_agent.auxiliary_losses, "embedding + RND losses (forward)"),
        )
    )
    stack.enter_context(
        patched(
            optimization, "gradient_step", timers.wrap(optimization.gradient_step, "backward + optimizer")
        )
    )
    stack.enter_context(
        patched(
            optimization,
            "apply_gradients",
            timers.wrap(optimization.apply_gradients, "optimizer: clip + Adam"),
        )
    )
    return stack


def backward_by_network(learner) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds of the Q loss's backward and of the auxiliary losses' backward, one fresh batch."""
    batch = learner._replay.sample(learner._batch_size, learner._importance_sampling_exponent)
    data = ngu_agent.sequence_tensors(batch, learner._device)
    per_sequence, _, _, _ = learner.q_loss(data)
    q_loss = (data.weights * per_sequence).mean()
    if hasattr(learner, "embedding_and_rnd_losses"):  # the learner's own choice of transitions
        inverse_loss, rnd_loss = learner.embedding_and_rnd_losses(data)
    else:  # a tree from before --auxiliary_steps: every learned transition
        b = learner._burn_in
        inverse_loss, rnd_loss = ngu_agent.auxiliary_losses(
            learner.networks, data.inputs.observation[b:], data.action[b:-1], ~data.first[b + 1 :]
        )
    learner._optimizer.zero_grad(set_to_none=True)
    timers = Timers()
    with timers.part("Q loss backward"):
        q_loss.backward()
    with timers.part("embedding + RND backward"):
        (inverse_loss + rnd_loss).backward()
    learner._optimizer.zero_grad(set_to_none=True)
    return {name: (timers.wall[name], timers.cpu[name]) for name in timers.wall}


def measure(name: str, args, bfloat16: bool) -> dict:
    config_class, defaults, build_learner = AGENTS[name]
    fields = {f.name for f in dataclasses.fields(config_class)}
    values = {k: v for k, v in defaults.items() if k in fields}
    overrides = dict(item.split("=", 1) for item in args.set)
    values.update(
        {k: int(v) if v.lstrip("-").isdigit() else float(v) for k, v in overrides.items() if k in fields}
    )
    values.update(
        use_tensorboard=False,
        batch_size=args.batch_size,
        replay_capacity=args.replay_capacity,
        min_replay_size=1,
        num_threads=args.num_threads,
        bfloat16=bfloat16,
    )
    config = config_class(**values)
    common.set_torso_bfloat16(bfloat16)
    torch.manual_seed(0)
    learner = build_learner(config, AtariSpaces(), torch.device("cpu")).learner
    fill(learner, config, np.random.default_rng(0))
    learner.gradient_step()  # untimed: first-call allocations
    timers = Timers()
    wall, cpu = time.perf_counter(), time.process_time()
    with instrumented(learner, timers):
        for _ in range(args.steps):
            learner.gradient_step()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu

    # backward = gradient_step - apply_gradients; the rest = the step less every timed part
    parts_wall, parts_cpu = dict(timers.wall), dict(timers.cpu)
    outer = "backward + optimizer"
    inner = "optimizer: clip + Adam"
    parts_wall["backward (all networks)"] = parts_wall.pop(outer) - parts_wall[inner]
    parts_cpu["backward (all networks)"] = parts_cpu.pop(outer) - parts_cpu[inner]
    parts_wall["rest (Python, statistics, target copy)"] = wall - sum(parts_wall.values())
    parts_cpu["rest (Python, statistics, target copy)"] = cpu - sum(parts_cpu.values())

    steps = args.steps
    result = {
        "title": (
            f"{name} ({'bfloat16' if bfloat16 else 'float32'}, {args.num_threads} thread(s), batch "
            f"{config.batch_size} x {config.sequence_length} steps, burn-in {config.burn_in}), {steps} steps"
        ),
        "wall": wall / steps,
        "cpu": cpu / steps,
        "parts_wall": {part: value / steps for part, value in parts_wall.items()},
        "parts_cpu": {part: value / steps for part, value in parts_cpu.items()},
    }
    if isinstance(learner, ngu_agent.Ngu):
        result["backward_by_network"] = backward_by_network(learner)
    return result


def report(result: dict) -> None:
    wall, cpu = result["wall"], result["cpu"]
    print(f"\n{result['title']}: {wall:.2f} s per gradient step ({cpu:.2f} CPU s)")
    print(f"  {'part':<48} {'s/step':>7} {'share':>6} {'CPU s':>7} {'share':>6}")
    parts_wall, parts_cpu = result["parts_wall"], result["parts_cpu"]
    for part in sorted(parts_wall, key=parts_wall.get, reverse=True):
        print(
            f"  {part:<48} {parts_wall[part]:7.3f} {parts_wall[part] / wall:6.1%} "
            f"{parts_cpu[part]:7.3f} {parts_cpu[part] / cpu:6.1%}"
        )
    if "backward_by_network" in result:
        print(
            "  backward by network (one more batch): "
            + ", ".join(
                f"{k} {w:.2f} s ({c:.2f} CPU s)" for k, (w, c) in result["backward_by_network"].items()
            )
        )


def baseline_compare(args, names, precisions) -> None:
    """Alternating rounds of the tree at --baseline and this one, a fresh process each; medians per tree."""
    here = str(revisions.REPO_ROOT)
    with tempfile.TemporaryDirectory() as folder:
        trees = {f"baseline {args.baseline}": revisions.extract(args.baseline, folder), "this tree": here}
        for name in names:
            for bfloat16 in precisions:
                arguments = [
                    f"--agents={name}",
                    f"--bfloat16={'on' if bfloat16 else 'off'}",
                    f"--steps={args.steps}",
                    f"--batch_size={args.batch_size}",
                    f"--replay_capacity={args.replay_capacity}",
                    f"--num_threads={args.num_threads}",
                    *(f"--set={item}" for item in args.set),
                ]
                rounds = {tree: [] for tree in trees}
                for _ in range(args.rounds):
                    for tree, path in trees.items():
                        rounds[tree].append(revisions.json_round(__file__, path, arguments))
                medians = {}
                for tree, results in rounds.items():
                    parts = results[0]["parts_cpu"]
                    medians[tree] = {
                        "wall": statistics.median(r["wall"] for r in results),
                        "cpu": statistics.median(r["cpu"] for r in results),
                        "parts_cpu": {
                            p: statistics.median(r["parts_cpu"][p] for r in results) for p in parts
                        },
                    }
                (old, new) = (medians[tree] for tree in trees)
                print(
                    f"\n{results[0]['title']}, medians of {args.rounds} alternating rounds: CPU "
                    f"{old['cpu']:.2f} -> {new['cpu']:.2f} s per gradient step ({new['cpu'] / old['cpu']:.2f}x), "
                    f"wall {old['wall']:.2f} -> {new['wall']:.2f} s ({new['wall'] / old['wall']:.2f}x)"
                )
                for part in sorted(new["parts_cpu"], key=new["parts_cpu"].get, reverse=True):
                    before, after = old["parts_cpu"].get(part, float("nan")), new["parts_cpu"][part]
                    print(f"  {part:<48} CPU {before:7.3f} -> {after:7.3f} s ({after / before:.2f}x)")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", default="r2d2,ngu,agent57")
    parser.add_argument(
        "--steps", type=int, default=3, help="timed gradient steps per agent (after 1 untimed)"
    )
    parser.add_argument("--bfloat16", choices=("off", "on", "both"), default="off")
    parser.add_argument("--batch_size", type=int, default=64, help="sequences per batch (run_atari: 64)")
    parser.add_argument("--replay_capacity", type=int, default=40_000, help="env steps the replay holds")
    parser.add_argument("--num_threads", type=int, default=os.cpu_count())
    parser.add_argument("--baseline", help="git revision to compare this tree with (alternating rounds)")
    parser.add_argument("--rounds", type=int, default=2, help="with --baseline: rounds per tree")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a config field over run_atari's default, where the tree's config has it (int or float)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.agents.split(",")
    unknown = [n for n in names if n not in AGENTS]
    if unknown or args.steps < 1 or args.batch_size < 1 or args.num_threads < 1:
        parser.error(
            f"--agents from {', '.join(AGENTS)} (got {unknown}); --steps, --batch_size, --num_threads >= 1"
        )
    torch.set_num_threads(args.num_threads)
    precisions = {"off": [False], "on": [True], "both": [False, True]}[args.bfloat16]
    if True in precisions and not args.worker and not common.native_bfloat16(torch.device("cpu")):
        print("note: this CPU has no native bfloat16; expect --bfloat16 to be slower")
    if args.worker:  # one agent, one precision, for --baseline: the result as JSON
        print(json.dumps(measure(names[0], args, precisions[0])))
        return
    load = open("/proc/loadavg").read().split()[:3]
    if args.baseline:
        baseline_compare(args, names, precisions)
    else:
        for name in names:
            for bfloat16 in precisions:
                report(measure(name, args, bfloat16))
    print("\nload average before", load, "after", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
