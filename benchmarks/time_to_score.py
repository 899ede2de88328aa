"""Time to a score: how long an agent's training takes until its evaluation reaches a target return.

A run's score counts at an evaluation (one after every `--eval_interval` training env steps) whose mean
over at least `--min_episodes` (10) whole episodes reaches `--target_return`; the first such evaluation
is the run's time to the score. The report gives its training env steps, its wall-clock time with and
without the evaluation phases before it (`wall_seconds` and `eval_seconds` of results.csv, which count
from the start of the iteration loop, a resumed run's earlier parts included), the CPU, and the curve.

Two modes, both writing a results folder (`--out`): `summary.json`, `summary.md` and `curve.csv` (one row
per evaluation):

- `run` trains with `python -m deep_rl_zoo.<script>` as a user would, with `--target_return` (the run
  stops at the first evaluation over at least 10 whole episodes that reaches it), its runs/ and
  checkpoints/ folders and the run's console log (`train.log`) inside `--out`, then reports from the
  run's results.csv; the process's whole wall time (start-up included) is reported as well. Flags after
  `--` go to the run script unchanged. A run stopped by Ctrl-C or SIGTERM is reported as far as it got,
  and the same command with `run --resume` continues it (the wall-clock columns go on from where it
  stopped):

      python benchmarks/time_to_score.py run --script=ppo.run_atari --target_return=18 \\
          --eval_interval=250000 --max_env_steps=10000000 --out=results/ppo_pong -- \\
          --environment_name=Pong --num_eval_steps=30000

- `report` reads an existing run folder's results.csv (any run, also one trained without a target):

      python benchmarks/time_to_score.py report --run_dir=runs/PPO_Pong --target_return=18 \\
          --out=results/ppo_pong_report

- `table` puts several runs (seeds of one configuration, published folders or runs/ ones) in one markdown
  table with the median of each column when all of them reached the target:

      python benchmarks/time_to_score.py table --target_return=18 \\
          --run_dir results/atari/Pong/PPO_Pong_fast_s1 results/atari/Pong/PPO_Pong_fast_s2

A published folder's CPU is read from its command.txt; a runs/ folder's is this machine's. A results.csv
from before the wall-clock columns gives env steps only.
"""

import argparse
import contextlib
import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from deep_rl_zoo.results import export, folders, tables  # noqa: E402

MIN_EPISODES = 10  # whole evaluation episodes an evaluation needs to count (main_loop.SOLVED_MIN_EPISODES)
CURVE_COLUMNS = (
    "iteration",
    "train_env_steps",
    "wall_seconds",
    "wall_seconds_without_eval",
    "eval_mean_episode_return",
    "eval_num_episodes",
)


def _number(row: dict, column: str) -> float | None:
    """A results.csv cell as a float; None when the column is missing (an older file) or empty."""
    text = row.get(column)
    return None if text in (None, "") else float(text)


def evaluation_curve(rows: list[dict]) -> list[dict]:
    """One entry per results.csv row: training env steps, wall seconds with and without evaluation (None
    where results.csv has no wall-clock columns), and the evaluation's mean over whole episodes (None
    where not one finished: results.csv writes NaN, which is no mean)."""
    curve = []
    for row in rows:
        mean, episodes = _number(row, "eval_mean_episode_return"), int(_number(row, "eval_num_episodes") or 0)
        wall, evaluating = _number(row, "wall_seconds"), _number(row, "eval_seconds")
        curve.append(
            {
                "iteration": int(row["iteration"]),
                "train_env_steps": int(row["train_env_steps"]),
                "wall_seconds": wall,
                "wall_seconds_without_eval": None
                if wall is None or evaluating is None
                else wall - evaluating,
                "eval_mean_episode_return": None
                if episodes == 0 or mean is None or math.isnan(mean)
                else mean,
                "eval_num_episodes": episodes,
            }
        )
    return curve


def time_to_score(curve: list[dict], target_return: float, min_episodes: int = MIN_EPISODES) -> dict:
    """The first evaluation of `curve` whose mean over at least `min_episodes` whole episodes reaches
    `target_return`: `{"reached": True, **that entry}`, else `{"reached": False}` with the best mean
    that counted (None if none did). Evaluations reaching the target over fewer episodes are counted
    in `short_evaluations_reaching`: too few games to trust."""
    counted = [
        e
        for e in curve
        if e["eval_mean_episode_return"] is not None and e["eval_num_episodes"] >= min_episodes
    ]
    short = [
        e
        for e in curve
        if e["eval_mean_episode_return"] is not None
        and e["eval_num_episodes"] < min_episodes
        and e["eval_mean_episode_return"] >= target_return
    ]
    summary = {
        "target_return": target_return,
        "min_episodes": min_episodes,
        "evaluations": len(curve),
        "short_evaluations_reaching": len(short),
    }
    for entry in counted:
        if entry["eval_mean_episode_return"] >= target_return:
            return {**summary, "reached": True, **entry}
    best = max((e["eval_mean_episode_return"] for e in counted), default=None)
    return {**summary, "reached": False, "best_counted_mean": best}


def read_results(run_dir: str) -> list[dict]:
    path = os.path.join(run_dir, "results.csv")
    if not os.path.isfile(path):
        raise SystemExit(f"error: no results.csv in {run_dir}")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def cpu_description(run_dir: str | None = None) -> dict:
    """The CPU that trained the run, as published results name it (model, widest vector unit, native
    bfloat16): a published folder's `command.txt` says, else (a run of this machine) this machine's, with
    the cores this process may use (a published folder does not record them: None)."""
    command_txt = os.path.join(run_dir, folders.COMMAND_TXT) if run_dir else ""
    if command_txt and os.path.isfile(command_txt):
        published = folders.read_name_values(command_txt)
        if "cpu_model" in published:
            return {
                "cpu_model": published["cpu_model"],
                "cpu_native_bfloat16": published.get("cpu_native_bfloat16", "unknown"),
                "cpu_cores": None,
            }
    model, bfloat16 = export.cpu_description()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu_model": model, "cpu_native_bfloat16": bfloat16, "cpu_cores": cores}


def _seconds(value: float | None) -> str:
    return "not recorded" if value is None else f"{value:,.1f} s ({value / 3600:.2f} h)"


def write_report(out: str, summary: dict, curve: list[dict]) -> str:
    """`summary.json`, `curve.csv` and a readable `summary.md` in `out`; returns the latter's text."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    with open(os.path.join(out, "curve.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CURVE_COLUMNS)
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in entry.items()} for entry in curve)
    target, episodes = summary["target_return"], summary["min_episodes"]
    lines = [f"# Time to {target} ({summary.get('run_dir', '')})", ""]
    if summary["reached"]:
        lines += [
            f"Reached at iteration {summary['iteration']}: evaluation mean {summary['eval_mean_episode_return']:.2f}"
            f" over {summary['eval_num_episodes']} whole episodes (at least {episodes} count).",
            "",
            f"- training env steps: {summary['train_env_steps']:,}",
            f"- wall-clock: {_seconds(summary['wall_seconds'])}",
            f"- wall-clock without evaluation: {_seconds(summary['wall_seconds_without_eval'])}",
        ]
    else:
        best = summary["best_counted_mean"]
        lines += [
            f"Not reached in {summary['evaluations']} evaluations; best mean over at least {episodes} whole "
            f"episodes: {'none' if best is None else f'{best:.2f}'}."
        ]
    if summary["short_evaluations_reaching"]:
        lines.append(
            f"- {summary['short_evaluations_reaching']} evaluation(s) reached the target over fewer than "
            f"{episodes} whole episodes (not counted)"
        )
    if "process_wall_seconds" in summary:
        whose = "this session's training process" if summary.get("resumed") else "the training process"
        lines.append(f"- {whose}, start-up included: {_seconds(summary['process_wall_seconds'])}")
    if summary.get("interrupted") and not summary["reached"]:
        lines.append(
            "- stopped (Ctrl-C or SIGTERM) before the target: `time_to_score.py run --resume` continues it"
        )
    lines += [
        f"- CPU: {summary['cpu_model']}, {summary['cpu_cores'] or 'unrecorded'} cores, native bfloat16: "
        f"{summary['cpu_native_bfloat16']}",
        "",
    ]
    if "command" in summary:
        lines += ["    " + summary["command"], ""]
    lines += [
        "| iteration | env steps | wall s | wall s without eval | eval mean | whole episodes |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for e in curve:
        cells = [e[c] for c in CURVE_COLUMNS]
        lines.append(
            "| "
            + " | ".join(
                "-" if v is None else f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" for v in cells
            )
            + " |"
        )
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    return text


def report(run_dir: str, target_return: float, min_episodes: int, out: str, **extra) -> dict:
    curve = evaluation_curve(read_results(run_dir))
    summary = {
        **time_to_score(curve, target_return, min_episodes),
        "run_dir": folders.strip_machine_path(run_dir),
        **cpu_description(run_dir),
        **extra,
    }
    text = write_report(out, summary, curve)
    print(text.split("\n| iteration")[0].rstrip())  # the table stays in the file
    print(f"results: {out}")
    return summary


def seeds_table(run_dirs: list[str], target_return: float, min_episodes: int = MIN_EPISODES) -> str:
    """A markdown table of several runs' times to the score (one row per run, as `report` finds it) and,
    when every run reached it, the median of each column: the figure to quote for a configuration."""
    header = [
        f"| run | reached {target_return:g} | env steps | wall-clock | without evaluation | CPU |",
        "|---|---|---:|---:|---:|---|",
    ]
    rows, reached = [], []
    for run_dir in run_dirs:
        found = time_to_score(evaluation_curve(read_results(run_dir)), target_return, min_episodes)
        cpu = cpu_description(run_dir)
        name = os.path.basename(os.path.normpath(run_dir))
        if found["reached"]:
            reached.append(found)
            cells = [
                f"yes, {found['eval_mean_episode_return']:.1f} over {found['eval_num_episodes']} episodes",
                f"{found['train_env_steps']:,}",
                _minutes(found["wall_seconds"]),
                _minutes(found["wall_seconds_without_eval"]),
            ]
        else:
            best = found["best_counted_mean"]
            cells = [f"no (best {'none' if best is None else f'{best:.1f}'})", "-", "-", "-"]
        label = tables.cpu_label(cpu["cpu_model"], cpu["cpu_native_bfloat16"])
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {label} |")
    if reached and len(reached) == len(run_dirs):

        def median(key: str) -> float | None:
            values = [r[key] for r in reached]
            return None if None in values else float(np.median(values))

        steps = median("train_env_steps")
        rows.append(
            f"| median of {len(reached)} | | {steps:,.0f} | {_minutes(median('wall_seconds'))} | "
            f"{_minutes(median('wall_seconds_without_eval'))} | |"
        )
    return "\n".join(header + rows) + "\n"


def _minutes(seconds: float | None) -> str:
    return "not recorded" if seconds is None else f"{seconds / 60:.1f} min"


# Exit codes of a run stopped by Ctrl-C or SIGTERM (128 + the signal): saved where it stood, --resume continues it.
INTERRUPTED = tuple(128 + signum for signum in (signal.SIGINT, signal.SIGTERM))


def _run_folder(out: str) -> Path | None:
    """The one run folder under `out`/runs that has a results.csv, None before the first iteration ends."""
    runs_dir = Path(out, "runs")
    runs = [p for p in runs_dir.iterdir() if (p / "results.csv").is_file()] if runs_dir.is_dir() else []
    if len(runs) > 1:
        raise SystemExit(
            f"error: expected one run folder with a results.csv in {out}/runs, found {len(runs)}"
        )
    return runs[0] if runs else None


@contextlib.contextmanager
def _stop_signals_forwarded_to(process: subprocess.Popen):
    """Ctrl-C and SIGTERM sent to this process go to the training run, which saves where it stood and
    exits (a second Ctrl-C quits it without saving); this process reads its log to the end meanwhile.
    Without this, a SIGTERM (a job scheduler's, a watchdog's) ended only this process, and the run went
    on alone with no one reading its output."""
    # A signal this process ignores (SIGINT under `nohup ... &`) stays ignored, as in the run itself.
    signums = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {
        signum: signal.signal(signum, lambda signum, _: process.send_signal(signum)) for signum in signums
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _reached(run_dir: str, args: argparse.Namespace) -> bool:
    curve = evaluation_curve(read_results(run_dir))
    return time_to_score(curve, args.target_return, args.min_episodes)["reached"]


def run(args: argparse.Namespace, script_flags: list[str]) -> dict:
    """Trains with the run script (its flags plus the time-to-score ones), then reports its run. With
    `args.resume` it continues the run an earlier `run` left in `args.out` (stopped by Ctrl-C, SIGTERM or
    a crash): the script's `--resume` from its newest checkpoint, the console log appended to."""
    if args.resume:
        if not Path(args.out, "checkpoints").is_dir():
            raise SystemExit(
                f"error: --resume: {args.out} holds no checkpoints/ of an earlier run; give its --out"
            )
    elif os.path.isdir(args.out) and os.listdir(args.out):
        raise SystemExit(
            f"error: --out={args.out} is not empty; give a new folder (or --resume to continue it)"
        )
    os.makedirs(args.out, exist_ok=True)
    num_iterations = math.ceil(args.max_env_steps / args.eval_interval)
    command = [
        sys.executable,
        "-m",
        f"deep_rl_zoo.{args.script}",
        *script_flags,
        f"--target_return={args.target_return}",
        f"--num_train_steps={args.eval_interval}",
        f"--num_iterations={num_iterations}",
        f"--runs_dir={os.path.join(args.out, 'runs')}",
        f"--checkpoint_dir={os.path.join(args.out, 'checkpoints')}",
        "--noshow_progress",
        *(["--resume"] if args.resume else []),
    ]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")])),
    }
    summarise = dict(command=" ".join(command[1:]), resumed=args.resume)
    earlier = _run_folder(args.out) if args.resume else None
    if earlier is not None and _reached(str(earlier), args):
        # Stopped after the evaluation that reached the target was written: nothing is left to train.
        print("the run had reached the target before it was stopped: reporting it, not training further")
        return report(str(earlier), args.target_return, args.min_episodes, args.out, **summarise)
    start = time.perf_counter()
    with open(os.path.join(args.out, "train.log"), "a" if args.resume else "w") as log:
        # In a session of its own, so a terminal's Ctrl-C reaches the run once, through this process.
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment,
            start_new_session=True,
        )
        with _stop_signals_forwarded_to(process):
            for line in process.stdout:  # a line at a time: `tail -f train.log` follows a run of hours
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
                log.flush()
            returncode = process.wait()
    process_wall = time.perf_counter() - start
    run_folder = _run_folder(args.out)
    if returncode != 0 and not (returncode in INTERRUPTED and run_folder is not None):
        raise SystemExit(
            f"error: the training run exited with status {returncode} (see {args.out}/train.log)"
        )
    if run_folder is None:
        raise SystemExit(f"error: the training run left no results.csv in {args.out}/runs")
    summary = report(
        str(run_folder),
        args.target_return,
        args.min_episodes,
        args.out,
        **summarise,
        process_wall_seconds=process_wall,
        interrupted=returncode != 0,
    )
    if returncode != 0 and not summary["reached"]:
        print(
            f"the run was stopped (status {returncode}) before the target or --max_env_steps; the same command "
            "with run --resume continues it"
        )
    return summary


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    script_flags = []
    if "--" in argv:
        argv, script_flags = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    for mode in ("run", "report", "table"):
        sub = modes.add_parser(mode)
        sub.add_argument(
            "--target_return", type=float, required=True, help="Return the evaluation mean must reach."
        )
        sub.add_argument(
            "--min_episodes",
            type=int,
            default=MIN_EPISODES,
            help="Whole episodes an evaluation needs to count.",
        )
        if mode != "table":
            sub.add_argument(
                "--out", required=True, help="Results folder (summary.json, summary.md, curve.csv)."
            )
    modes.choices["run"].add_argument(
        "--script", required=True, help="Run script under deep_rl_zoo, e.g. ppo.run_atari."
    )
    modes.choices["run"].add_argument(
        "--eval_interval", type=int, required=True, help="Training env steps between evaluations."
    )
    modes.choices["run"].add_argument(
        "--max_env_steps", type=int, required=True, help="Give up after this many training env steps."
    )
    modes.choices["run"].add_argument(
        "--resume",
        action="store_true",
        help="Continue the stopped run in --out (same flags; after -- they may change, as the script's --resume allows).",
    )
    modes.choices["report"].add_argument("--run_dir", required=True, help="A run folder holding results.csv.")
    modes.choices["table"].add_argument(
        "--run_dir",
        required=True,
        nargs="+",
        help="Run folders (runs/ or published ones) holding results.csv.",
    )
    args = parser.parse_args(argv)
    if script_flags and args.mode != "run":
        parser.error("flags after -- go to the run script: only in run mode")
    return args, script_flags


def main(argv: list[str]) -> int:
    args, script_flags = parse_args(argv)
    if args.mode == "table":
        print(seeds_table(args.run_dir, args.target_return, args.min_episodes), end="")
        return 0
    if args.mode == "report":
        summary = report(args.run_dir, args.target_return, args.min_episodes, args.out)
    else:
        summary = run(args, script_flags)
    return 0 if summary["reached"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
