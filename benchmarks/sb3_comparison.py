"""What the `*_vs_sb3.py` benchmarks share: each contender runs in a fresh interpreter, the contenders
alternate over rounds (SB3 then ours, then ours then SB3, ...) so drifting load hits both, and the
verdict is total(ours) / total(SB3) wall time over all rounds against the issues' 0.5 target.

A child script prints one JSON line last: `wall_s` and `final_eval` from both, `train_s` (training
phases only) from ours.
"""

import argparse
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 0.5


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sb3_python", required=True, help="Python of a scratch env with stable-baselines3.")
    parser.add_argument("--rounds", type=int, default=2, help="Rounds of one SB3 and one of our runs.")
    parser.add_argument("--seed", type=int, default=1, help="Seed of round 0; round i uses seed + i.")
    args = parser.parse_args()
    if not os.access(args.sb3_python, os.X_OK):
        raise SystemExit(f"--sb3_python={args.sb3_python} is not an executable (see the script's docstring)")
    return args


def run_child(python: str, code: str, *args: str) -> dict:
    """Runs `code` as a script file (actor processes re-import their main module, so it must be a
    file) with one thread per process; returns the JSON of its last output line."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="vs_sb3_child_") as script:
        script.write(code)
        script.flush()
        completed = subprocess.run(
            [python, script.name, *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT
        )
    if completed.returncode != 0:
        raise SystemExit(f"{python} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def compare(
    args: argparse.Namespace,
    env_steps: int,
    run_sb3: Callable[[int], dict],
    run_ours: Callable[[int], dict],
    describe_ours: Callable[[dict], str],
) -> int:
    """Alternates the contenders for `args.rounds` rounds, prints each run and the verdict; returns the
    exit status (1 when the target is missed)."""
    sb3, ours = [], []
    for round_index in range(args.rounds):
        seed = args.seed + round_index
        order = ("sb3", "ours") if round_index % 2 == 0 else ("ours", "sb3")
        for name in order:
            if name == "sb3":
                result = run_sb3(seed)
                sb3.append(result)
                print(
                    f"round {round_index} SB3 : learn {result['wall_s']:.1f} s, "
                    f"final greedy eval {result['final_eval']:.1f}",
                    flush=True,
                )
            else:
                result = run_ours(seed)
                ours.append(result)
                print(f"round {round_index} ours: {describe_ours(result)}", flush=True)

    sb3_total = sum(r["wall_s"] for r in sb3)
    ours_total = sum(r["wall_s"] for r in ours)
    ours_train_total = sum(r["train_s"] for r in ours)
    print(
        f"\n{env_steps:,} env steps x {args.rounds} rounds: SB3 {sb3_total:.1f} s, ours {ours_total:.1f} s "
        f"(training phases only {ours_train_total:.1f} s)"
    )
    for index, (a, b) in enumerate(zip(ours, sb3, strict=True)):
        print(
            f"round {index}: ours / SB3 = {a['wall_s'] / b['wall_s']:.2f} "
            f"(training phases {a['train_s'] / b['wall_s']:.2f})"
        )
    ratio = ours_total / sb3_total
    print(
        f"wall-time ratio ours / SB3 = {ratio:.2f} (training phases only: {ours_train_total / sb3_total:.2f}); "
        f"target <= {TARGET_RATIO:.2f}: {'PASS' if ratio <= TARGET_RATIO else 'FAIL'}"
    )
    return 0 if ratio <= TARGET_RATIO else 1
