"""Env steps and wall time DQN's default `run_classic` flags need to solve CartPole-v1, over several seeds.

Each seed runs `dqn.train.main` in this process with `DqnConfig`'s defaults (10 iterations of 5,000
training env steps then 5,000 greedy evaluation env steps, stop once solved). A seed's steps-to-threshold
is the training env-step count of the first iteration whose greedy evaluation mean over at least 10
whole episodes reaches the threshold (by default the env's reward_threshold: 475 for CartPole-v1);
evaluations happen every 5,000 env steps, so the figure is a multiple of 5,000. Wall time covers the
whole run, evaluations included; the 1-minute load average before and after is printed with it, since
the wall time depends on what else the machine runs.

Prints one row per seed and a verdict against the target "at least 4 of 5 seeds within 50,000 env
steps" (in general: at least 80% of the seeds); exits with status 1 when it is missed.

    python benchmarks/dqn_cartpole.py [--seeds=1,2,3,4,5] [--set learning_rate=5e-4 --set batch_size=128]

`--agent` runs any other agent's `train.main` (value-based, or actors + learner) the same way (its
config's defaults plus the `--set` overrides), e.g. QR-DQN over 100,000 env steps:

    python benchmarks/dqn_cartpole.py --agent=qr_dqn --max_env_steps=100000 --set num_iterations=20

`--environment_name` measures another task; the budget flags then go through `--set`, e.g. LunarLander-v3
(threshold 200) with an evaluation of 10,000 env steps every 10,000 training env steps, up to 500,000:

    python benchmarks/dqn_cartpole.py --environment_name=LunarLander-v3 --seeds=1,2 --max_env_steps=500000 \
        --set num_iterations=50 --set num_train_steps=10000 --set num_eval_steps=10000

The run itself stops at the env's own reward_threshold (`stop_when_solved`); a higher `--threshold` needs
`--set stop_when_solved=false` as well.

One evaluation that reaches the threshold can be luck (LunarLander's greedy returns swing by 100 or more
from one evaluation to the next). `--confirm_episodes=N` then plays the solving checkpoint (the run's last)
greedily for N more episodes from other seeds, with the agent's `eval_agent`, and prints their mean.
"""

import argparse
import contextlib
import csv
import dataclasses
import importlib
import math
import os
import sys
import tempfile
import time
import typing
from pathlib import Path

import gymnasium as gym
import numpy as np

try:
    from deep_rl_zoo.dqn import train
except ImportError:  # run as a script from a checkout that was not `pip install -e`-ed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deep_rl_zoo.dqn import train

MIN_EVAL_EPISODES = 10
MAX_ENV_STEPS = 50_000
REQUIRED_FRACTION = 0.8  # 4 of 5 seeds


def parse_overrides(items: list[str], config_class: type = train.DqnConfig) -> dict:
    """`name=value` strings -> config field values of the right type (for tuning experiments)."""
    hints = typing.get_type_hints(config_class)
    overrides = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in hints:
            raise SystemExit(f"--set: {config_class.__name__} has no field {name!r}")
        hint = hints[name]
        if typing.get_origin(hint) is tuple:
            overrides[name] = tuple(int(x) for x in value.split(",") if x)  # "" is the empty tuple
        elif hint is bool:
            overrides[name] = value.lower() in ("1", "true", "yes")
        else:
            overrides[name] = hint(value)
    return overrides


def evaluation_means(rows: list[dict]) -> list[float | None]:
    """Each evaluation's greedy mean over whole episodes; None where not one episode finished (its mean
    is NaN in results.csv: an unfinished episode's return is no mean, and `round` would fail on NaN)."""
    means = []
    for row in rows:
        mean = float(row["eval_mean_episode_return"])
        means.append(None if int(row["eval_num_episodes"]) == 0 or math.isnan(mean) else mean)
    return means


def run_seed(seed: int, overrides: dict, work_dir: str, train_module=train, threshold: float = 475.0) -> dict:
    """Trains one seed with the defaults (plus `overrides`); returns its steps-to-threshold and wall time."""
    csv_path = os.path.join(work_dir, f"seed{seed}.csv")
    config_class = typing.get_type_hints(train_module.main)["config"]
    config = config_class(
        **{
            "seed": seed,
            "checkpoint_dir": os.path.join(work_dir, f"checkpoints{seed}"),
            "runs_dir": os.path.join(work_dir, "runs"),
            "results_csv_path": csv_path,
            "use_tensorboard": False,
            "show_progress": False,
            **overrides,
        }
    )
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    state = train_module.main(config)
    wall_s = time.perf_counter() - start
    load_after = os.getloadavg()[0]
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    means = evaluation_means(rows)
    steps_to_threshold = None
    for row, mean in zip(rows, means, strict=True):
        if mean is not None and mean >= threshold and int(row["eval_num_episodes"]) >= MIN_EVAL_EPISODES:
            steps_to_threshold = int(row["train_env_steps"])
            break
    return {
        "seed": seed,
        "steps_to_threshold": steps_to_threshold,
        "env_steps": state.train_env_steps,
        "wall_s": wall_s,
        "load": (load_before, load_after),
        "best_eval": max((m for m in means if m is not None), default=None),  # None: no episode finished
        "evals": ["unfinished" if m is None else round(m) for m in means],
    }


def confirm_solved(agent: str, environment_name: str, seed: int, work_dir: str, num_episodes: int) -> float:
    """Mean greedy return of the seed's last checkpoint over `num_episodes` episodes it was not evaluated on."""
    eval_module = importlib.import_module(f"deep_rl_zoo.{agent}.eval_agent")
    eval_config_class = typing.get_type_hints(eval_module.main)["config"]  # e.g. A2C's has agent_name
    config = eval_config_class(
        environment_name=environment_name,
        seed=10_000 + seed,  # the training run's evaluations are seeded from `seed` + 7919
        num_episodes=num_episodes,
        load_checkpoint_file="latest",
        checkpoint_dir=os.path.join(work_dir, f"checkpoints{seed}"),
        recording_video_dir="",
    )
    with contextlib.redirect_stdout(None):  # eval_agent prints one line per episode
        returns = eval_module.main(config)
    return float(np.mean(returns))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4,5", help="Comma-separated seeds.")
    parser.add_argument("--agent", default="dqn", help="Package under deep_rl_zoo whose train.main runs.")
    parser.add_argument("--environment_name", default="CartPole-v1", help="Gymnasium id of the task.")
    parser.add_argument(
        "--threshold", type=float, default=None, help="Solved evaluation mean; default: the env's own."
    )
    parser.add_argument(
        "--max_env_steps", type=int, default=MAX_ENV_STEPS, help="A seed counts as solved within this."
    )
    parser.add_argument(
        "--confirm_episodes", type=int, default=0, help="Replay a solving checkpoint for this many episodes."
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="Override a config default."
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    train_module = importlib.import_module(f"deep_rl_zoo.{args.agent}.train")
    config_class = typing.get_type_hints(train_module.main)["config"]
    overrides = {"environment_name": args.environment_name, **parse_overrides(args.set, config_class)}
    environment_name = overrides["environment_name"]  # `--set environment_name=...` also works
    threshold = args.threshold
    if threshold is None:
        threshold = gym.spec(environment_name).reward_threshold
        if threshold is None:
            raise SystemExit(f"{environment_name} has no reward_threshold: pass --threshold")
    defaults = config_class(**overrides)
    shown = {f.name: getattr(defaults, f.name) for f in dataclasses.fields(config_class)}
    print("config:", {k: v for k, v in shown.items() if k not in ("checkpoint_dir", "runs_dir", "tag")})

    results = []
    with tempfile.TemporaryDirectory(prefix=f"{args.agent}_{environment_name}_") as work_dir:
        for seed in seeds:
            result = run_seed(seed, overrides, work_dir, train_module, threshold)
            if args.confirm_episodes > 0 and result["steps_to_threshold"] is not None:
                result["confirm_mean"] = confirm_solved(
                    args.agent, environment_name, seed, work_dir, args.confirm_episodes
                )
            results.append(result)
            print(
                f"seed {seed}: steps to {threshold:.0f} {result['steps_to_threshold'] or '-'}, "
                f"wall {result['wall_s']:.1f} s (load {result['load'][0]:.1f} -> {result['load'][1]:.1f}), "
                f"evals {result['evals']}"
                + (
                    f", {args.confirm_episodes} more episodes: mean {result['confirm_mean']:.1f}"
                    if "confirm_mean" in result
                    else ""
                ),
                flush=True,
            )

    print()
    print(f"{args.agent} on {environment_name}")
    confirm_header = f" mean of {args.confirm_episodes} more episodes |" if args.confirm_episodes else ""
    print(
        f"| seed | env steps to eval mean >= {threshold:.0f} | env steps run | wall time (s) | load before/after "
        f"| best eval |{confirm_header}"
    )
    print("|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.confirm_episodes else ""))
    for r in results:
        steps = r["steps_to_threshold"]
        best = "no episode finished" if r["best_eval"] is None else f"{r['best_eval']:.1f}"
        confirm = ""
        if args.confirm_episodes:
            confirm = f" {r['confirm_mean']:.1f} |" if "confirm_mean" in r else " - |"
        print(
            f"| {r['seed']} | {steps if steps is not None else 'not reached'} | {r['env_steps']} "
            f"| {r['wall_s']:.1f} | {r['load'][0]:.1f} / {r['load'][1]:.1f} | {best} |{confirm}"
        )
    solved = [
        r
        for r in results
        if r["steps_to_threshold"] is not None and r["steps_to_threshold"] <= args.max_env_steps
    ]
    required = math.ceil(REQUIRED_FRACTION * len(seeds))
    ok = len(solved) >= required
    print(
        f"\n{len(solved)} of {len(seeds)} seeds reached {threshold:.0f} within {args.max_env_steps:,} env steps "
        f"(target: at least {required}): {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
