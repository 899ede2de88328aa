"""What `atari_ppo_vs_sb3.py` and `atari_dqn_vs_sb3.py` share: a scratch venv with Stable-Baselines3,
children run in fresh interpreters (the end of the SB3 child, the whole zoo child), alternating rounds,
and the verdict on env steps per second.

Stable-Baselines3 is not a dependency of the zoo. Without `--sb3_python`, the benchmark makes a venv in a
fresh `mktemp -d` folder (removed afterwards unless `--keep_venv`) and installs into it, with pip:
torch==2.13.0 (the CPU wheel the zoo uses; pip takes it from its cache or index), stable-baselines3,
sb3-contrib (QR-DQN, for `atari_speed_table.py`), gymnasium, ale-py and opencv-python-headless (SB3's
Atari wrappers resize with cv2).

Each child prints one JSON line last, with `env_steps`, `seconds` (the training phase being compared),
`wall_s` (the whole child) and `profile` (seconds per part, printed as shares of `seconds`). The parent
adds `cpu_s`: CPU seconds of the child and all its descendants (start-up included), which a loaded
machine distorts less than wall time.

The speed of these shared machines moves by up to 2x from one quarter of an hour to the next, so before
each run the parent also times this CPU's float32 matrix product on every core
(`atari_learner_speed.matmul_rate`). With the arithmetic both sides must do per env step (counted by
the calling script), that gives the arithmetic bound of the moment: env steps/s that the matrix-product
rate would allow with free env steps and free Python. A 2x target is out of reach where twice SB3's
share of that bound is above 1.
"""

import argparse
import json
import os
import resource
import shutil
import string
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from atari_learner_speed import matmul_rate  # a sibling script: its caller puts benchmarks/ on sys.path

REPO_ROOT = Path(__file__).resolve().parents[1]
TARGET_SPEEDUP = 2.0
SB3_PACKAGES = [
    "torch==2.13.0",
    "stable-baselines3",
    "sb3-contrib",
    "gymnasium",
    "ale-py",
    "opencv-python-headless",
]


# The end of both SB3 child scripts (`atari_*_vs_sb3.py`): times SB3's rollout collection, its env's
# step_wait and its train into `profile` under the keys REST, ENV, TRAIN the script defines, runs
# `model.learn(total_timesteps=env_steps)` and prints the JSON line `run_child` reads.
SB3_TIMED_LEARN = """
def timed(owner, name, key):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            profile[key] += time.perf_counter() - start
    setattr(owner, name, wrapper)
timed(model, "collect_rollouts", REST)
timed(model.env, "step_wait", ENV)
timed(model, "train", TRAIN)
start = time.perf_counter()
model.learn(total_timesteps=env_steps)
seconds = time.perf_counter() - start
profile[REST] -= profile[ENV]
print(json.dumps({"env_steps": model.num_timesteps, "seconds": seconds, "wall_s": seconds,
                  "threads": torch.get_num_threads(), "profile": profile}))
"""


# The zoo's child script of both benchmarks: `python -m deep_rl_zoo.<package>.run_atari` on Pong, one
# iteration of env_steps training steps, no evaluation, in a temporary folder (argv: seed, env_steps, then
# more run_atari flags), with `agent.<timed method>` timed; prints the JSON line `run_child` reads, the
# rate from the run's results.csv and the time split into the timed method and the rest.
_ZOO_CHILD = string.Template(
    """
import csv, json, os, runpy, sys, tempfile, time
from deep_rl_zoo.${package} import agent

if __name__ == "__main__":
    seed, env_steps, extra = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    timed_s = [0.0]
    inner = agent.${method}
    def timed(*args):
        start = time.perf_counter()
        inner(*args)
        timed_s[0] += time.perf_counter() - start
    agent.${method} = timed
    with tempfile.TemporaryDirectory(prefix="atari_${package}_vs_sb3_") as work:
        csv_path = os.path.join(work, "results.csv")
        sys.argv = ["deep_rl_zoo.${package}.run_atari", "--environment_name=Pong", f"--seed={seed}",
                    "--num_iterations=1", f"--num_train_steps={env_steps}", "--num_eval_steps=0",
                    f"--checkpoint_dir={work}/checkpoints", f"--runs_dir={work}/runs",
                    f"--results_csv_path={csv_path}", "--nouse_tensorboard", "--noshow_progress", *extra]
        start = time.perf_counter()
        try:
            runpy.run_module("deep_rl_zoo.${package}.run_atari", run_name="__main__")
        except SystemExit as e:
            if e.code:
                raise
        wall_s = time.perf_counter() - start
        with open(csv_path) as f:
            row = list(csv.DictReader(f))[-1]
    steps = int(row["train_env_steps"])
    seconds = steps / float(row["train_steps_per_second"])
    profile = {"${timed_part}": timed_s[0], "${rest_part}": seconds - timed_s[0]}
    print(json.dumps({"env_steps": steps, "seconds": seconds, "wall_s": wall_s, "profile": profile}))
"""
)


def zoo_child(package: str, method: str, timed_part: str, rest_part: str) -> str:
    """The zoo's child script for `deep_rl_zoo.<package>.run_atari`, timing `agent.<method>` (e.g.
    `Dqn._learn`) as `timed_part` of the profile and the rest of the training phase as `rest_part`."""
    return _ZOO_CHILD.substitute(package=package, method=method, timed_part=timed_part, rest_part=rest_part)


def run_zoo(child: str, seed: int, env_steps: int, flags: list[str]) -> dict:
    """Runs the zoo's child script (`zoo_child`) for `env_steps` env steps with extra run_atari `flags`."""
    return run_child(sys.executable, child, [str(seed), str(env_steps), *flags], 0)


def parse_args(description: str, default_env_steps: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sb3_python", default="", help="Python of a venv with SB3 (default: make one).")
    parser.add_argument("--keep_venv", action="store_true", help="Keep the venv this run makes; print where.")
    parser.add_argument("--rounds", type=int, default=2, help="Rounds of one SB3 and one zoo run.")
    parser.add_argument("--seed", type=int, default=1, help="Seed of round 0; round i uses seed + i.")
    parser.add_argument("--env_steps", type=int, default=default_env_steps, help="Env steps per run.")
    parser.add_argument(
        "--sb3_threads",
        type=int,
        default=0,
        help="torch threads of the SB3 process; 0 keeps torch's default (every core), as a user gets it.",
    )
    parser.add_argument(
        "--zoo_flags", default="", help="Extra flags for the zoo's run_atari (space-separated)."
    )
    args = parser.parse_args()
    if args.sb3_python and not os.access(args.sb3_python, os.X_OK):
        raise SystemExit(f"--sb3_python={args.sb3_python} is not an executable")
    if args.rounds < 1 or args.env_steps < 1 or args.sb3_threads < 0:
        raise SystemExit("--rounds and --env_steps must be >= 1, --sb3_threads >= 0")
    return args


def make_sb3_venv() -> tuple[str, str]:
    """A fresh venv with SB3 in a `mktemp -d` folder: (its python, the folder)."""
    folder = tempfile.mkdtemp(prefix="sb3_atari_venv.")
    print(f"installing {' '.join(SB3_PACKAGES)} into a scratch venv in {folder} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", os.path.join(folder, "venv")], check=True)
    python = os.path.join(folder, "venv", "bin", "python")
    completed = subprocess.run(
        [python, "-m", "pip", "install", "-q", *SB3_PACKAGES], capture_output=True, text=True
    )
    if completed.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise SystemExit(f"pip install into the scratch venv failed:\n{completed.stderr[-2000:]}")
    return python, folder


def run_child(python: str, code: str, args: list[str], threads: int) -> dict:
    """Runs `code` as a script file (the zoo's actors re-import their main module, so it must be one);
    `threads` > 0 sets OMP_NUM_THREADS, 0 leaves the process to its library's default."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("OMP_NUM_THREADS", None)
    if threads > 0:
        env["OMP_NUM_THREADS"] = str(threads)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="atari_vs_sb3_child_") as script:
        script.write(code)
        script.flush()
        completed = subprocess.run(
            [python, script.name, *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise SystemExit(f"{python} failed:\n{completed.stdout[-2000:]}\n{completed.stderr[-3000:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    # CPU seconds of the child and every process under it (the zoo's actors), start-up included.
    result["cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return result


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _describe(result: dict) -> str:
    rate = result["env_steps"] / result["seconds"]
    shares = ", ".join(f"{name} {s / result['seconds']:.0%}" for name, s in result["profile"].items())
    return (
        f"{result['env_steps']:,} env steps in {result['seconds']:.1f} s = {rate:.1f} env steps/s "
        f"(whole process {result['wall_s']:.1f} s, {result['cpu_s']:.1f} CPU s with its children); "
        f"time: {shares}"
    )


def compare(
    args: argparse.Namespace,
    run_sb3: Callable[[str, int], dict],
    run_zoo: Callable[[int], dict],
    flops_per_env_step: float,
) -> int:
    """Alternates SB3 and the zoo for `args.rounds` rounds, prints each run (rate, profile, the CPU's
    matrix-product rate just before it) and the verdict on total env steps / total seconds, with each
    side's share of the arithmetic bound (`flops_per_env_step` at the mean matrix-product rate);
    returns 1 when the speed-up target is missed."""
    folder = None
    gemm_rates = []
    python = args.sb3_python
    if not python:
        python, folder = make_sb3_venv()
    try:
        totals = {"sb3": [0, 0.0, 0.0], "zoo": [0, 0.0, 0.0]}
        for round_index in range(args.rounds):
            seed = args.seed + round_index
            order = ("sb3", "zoo") if round_index % 2 == 0 else ("zoo", "sb3")
            for name in order:
                load_before = _load()
                gemm_rates.append(matmul_rate(rounds=2))
                result = run_sb3(python, seed) if name == "sb3" else run_zoo(seed)
                totals[name][0] += result["env_steps"]
                totals[name][1] += result["seconds"]
                totals[name][2] += result["cpu_s"]
                print(
                    f"round {round_index} {name}: {_describe(result)}; load {load_before} -> {_load()}; "
                    f"matrix product before it {gemm_rates[-1] / 1e9:.1f} GFLOP/s",
                    flush=True,
                )
    finally:
        if folder and not args.keep_venv:
            shutil.rmtree(folder, ignore_errors=True)
        elif folder:
            print(f"the venv is kept: --sb3_python={python}")
    sb3_rate = totals["sb3"][0] / totals["sb3"][1]
    zoo_rate = totals["zoo"][0] / totals["zoo"][1]
    speedup = zoo_rate / sb3_rate
    verdict = "PASS" if speedup >= TARGET_SPEEDUP else "FAIL"
    print(
        f"\nover {args.rounds} round(s): SB3 {sb3_rate:.1f} env steps/s, zoo {zoo_rate:.1f} env steps/s: "
        f"zoo / SB3 = {speedup:.2f}, target >= {TARGET_SPEEDUP:.1f}: {verdict}"
    )
    print(
        "CPU seconds per 1,000 env steps (whole processes, start-up included): "
        f"SB3 {1000 * totals['sb3'][2] / totals['sb3'][0]:.1f}, zoo {1000 * totals['zoo'][2] / totals['zoo'][0]:.1f}"
    )
    gemm = sum(gemm_rates) / len(gemm_rates)
    bound = gemm / flops_per_env_step
    print(
        f"arithmetic bound: {flops_per_env_step / 1e6:.0f} MFLOP per env step at the mean matrix-product rate "
        f"{gemm / 1e9:.1f} GFLOP/s (runs' range {min(gemm_rates) / 1e9:.1f}-{max(gemm_rates) / 1e9:.1f}) = "
        f"{bound:.0f} env steps/s; SB3 at {sb3_rate / bound:.2f} of it, the zoo at {zoo_rate / bound:.2f}, "
        f"2x SB3 would be {2 * sb3_rate / bound:.2f} of it"
    )
    return 0 if verdict == "PASS" else 1
