"""PPO-RND and PPO-ICM against plain PPO on MountainCar-v0: greedy evaluation over 500k env steps.

MountainCar-v0 pays -1 per step until the car reaches the flag (at most 200 steps per episode), so a
policy that never gets there sees a constant reward. The issue's target: a greedy evaluation mean of at
least -150 within 500k env steps on each of seeds 1-3, for each curious agent, with plain PPO's result
over the same budget beside it.

    python benchmarks/curiosity_mountaincar.py run --agent=ppo_rnd --seeds=1,2,3 --out=DIR [--set flag=value]
    python benchmarks/curiosity_mountaincar.py plot --out=DIR

`run` calls each agent's own `run_classic` with its defaults (20 iterations x 25k env steps, 2,000 greedy
evaluation steps after each, `--nostop_when_solved` so that every curve covers the whole budget) and
writes `DIR/<agent>[_<tag>]_s<seed>.csv`; `--set` passes extra flags (e.g. `--set intrinsic_coef=0
--tag=no_intrinsic` for an ablation). `plot` prints, per run, the env steps of the first evaluation at or
above -150, the best and the last evaluation mean, and draws one learning-curve PNG per curious agent
(PPO's curves in grey beside it) into screenshots/. Matplotlib draws them (`pip install matplotlib`).
"""

import argparse
import csv
import glob
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = -150.0
ENV = "MountainCar-v0"
LABELS = {"ppo": "PPO", "ppo_rnd": "PPO-RND", "ppo_icm": "PPO-ICM"}


def run(agent: str, seeds: list[int], out: str, tag: str, extra: list[str]) -> None:
    os.makedirs(out, exist_ok=True)
    for seed in seeds:
        name = f"{agent}{'_' + tag if tag else ''}_s{seed}"
        command = [
            sys.executable, "-m", f"deep_rl_zoo.{agent}.run_classic", f"--environment_name={ENV}",
            f"--seed={seed}", "--num_iterations=20", "--num_train_steps=25000", "--num_eval_steps=2000",
            "--nostop_when_solved", "--noshow_progress", f"--checkpoint_dir={out}/checkpoints_{name}",
            f"--runs_dir={out}/runs", f"--results_csv_path={out}/{name}.csv", *[f"--{x}" for x in extra],
        ]  # fmt: skip
        print(" ".join(command[1:]), flush=True)
        subprocess.run(command, check=True, cwd=out, env={**os.environ, "PYTHONPATH": str(ROOT)})


def read_curve(path: str) -> tuple[list[int], list[float]]:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [int(r["train_env_steps"]) for r in rows], [float(r["eval_mean_episode_return"]) for r in rows]


def summary(path: str) -> str:
    steps, returns = read_curve(path)
    with open(path) as f:
        train = [float(r["train_mean_episode_return"]) for r in csv.DictReader(f)]
    first = next((s for s, r in zip(steps, returns, strict=True) if r >= TARGET), None)
    reached = f"at {first / 1000:.0f}k" if first is not None else f"not within {steps[-1] / 1000:.0f}k"
    return (
        f"{os.path.basename(path)}: first greedy mean >= {TARGET:.0f} {reached}; greedy best {max(returns):.1f}, "
        f"last {returns[-1]:.1f}; training episodes' mean return per iteration best {max(train):.1f} "
        f"({steps[-1]} env steps)"
    )


def plot(out: str) -> None:
    paths = sorted(glob.glob(os.path.join(out, "*.csv")))
    for path in paths:
        print(summary(path))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def runs_of(agent: str) -> list[str]:
        return [p for p in paths if re.fullmatch(rf"{agent}_s\d+\.csv", os.path.basename(p))]

    for agent in ("ppo_rnd", "ppo_icm"):
        if not runs_of(agent):
            continue
        figure, axes = plt.subplots(figsize=(7, 4))
        styles = ((agent, "tab:blue", "-", LABELS[agent]), (f"{agent}_no_intrinsic", "tab:orange", ":",
                  f"{LABELS[agent]} without intrinsic reward"), ("ppo", "grey", "--", "PPO"),
                  ("ppo_obsnorm", "tab:green", "-.", "PPO --normalize_observations"))  # fmt: skip
        for name, colour, style, label in styles:
            for path in runs_of(name):
                steps, returns = read_curve(path)
                seed = re.search(r"_s(\d+)\.csv$", path).group(1)
                axes.plot([s / 1000 for s in steps], returns, color=colour, alpha=0.8,
                          label=f"{label}, seed {seed}", linestyle=style)  # fmt: skip
        axes.axhline(TARGET, color="black", linewidth=0.8, linestyle=":", label=f"target {TARGET:.0f}")
        axes.set_xlabel("training env steps (thousands)")
        axes.set_ylabel("greedy evaluation mean return")
        axes.set_ylim(-205, -80)
        axes.set_title(f"{LABELS[agent]} vs PPO on {ENV} (run_classic defaults unless named)")
        axes.legend(fontsize=7, loc="lower right")
        figure.tight_layout()
        target = ROOT / "screenshots" / f"{agent}_mountaincar.png"
        figure.savefig(target, dpi=100)
        print(f"wrote {target}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["run", "plot"])
    parser.add_argument("--agent", choices=sorted(LABELS), default="ppo_rnd")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--out", required=True)
    parser.add_argument("--tag", default="")
    parser.add_argument("--set", action="append", default=[], help="flag=value passed to run_classic")
    args = parser.parse_args()
    if args.command == "run":
        run(
            args.agent, [int(s) for s in args.seeds.split(",")], os.path.abspath(args.out), args.tag, args.set
        )
    else:
        plot(args.out)


if __name__ == "__main__":
    main()
