"""Chaos: a distributed run driven through the faults of a week, each of which it must survive and report.

IMPALA on CartPole with 2 local actor processes runs in rounds. In each round, at random moments:

    kill    an actor gets SIGKILL                -> "actor i was killed by signal SIGKILL; restarted it ..."
    hang    an actor gets SIGSTOP (a deadlock)   -> "actor i showed no sign of life for N s ...; restarted"
    stop    the learner gets SIGTERM             -> exit 143 within 10 s, an interrupted checkpoint
    tear    (after a stop, sometimes) the newest -> "--resume: skipping a damaged checkpoint: ..."
            checkpoint is cut in half
and every round but the first starts with --resume. The run passes when every stop was obeyed within
10 s (stretched by the machine's load) with exit 143 and no traceback, every kill and hang was reported,
every torn checkpoint was skipped, and the run's iteration count only went forward.

    python benchmarks/chaos.py --minutes=30     # the full version (not part of the tests)
    python benchmarks/chaos.py --short          # 2 rounds, about 3 minutes; the slow test tier runs it

Linux only (finds the actors in /proc: the learner's fork server's children).
"""

import argparse
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
ACTOR_TIMEOUT_S = 5  # --actor_timeout of the run: a hang is noticed within seconds, not the default 5 min
STOP_DEADLINE_S = 10  # the bound on obeying SIGTERM, stretched by the load


def load_factor() -> float:
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] not in "ZX":
                found.append(int(entry))
    return found


def actor_pids(learner_pid: int) -> list[int]:
    """The learner's grandchildren: the fork server (its child) forks every actor."""
    return [actor for child in children(learner_pid) for actor in children(child)]


def newest_checkpoint(folder: pathlib.Path) -> pathlib.Path | None:
    found = [
        (p.stat().st_mtime, p) for p in folder.rglob("IMPALA_CartPole-v1_*.ckpt") if "best" not in p.name
    ]
    return max(found)[1] if found else None


def run_round(
    work: pathlib.Path,
    round_index: int,
    last: bool,
    seconds: float,
    tear: float,
    rng: random.Random,
    tally: dict,
) -> None:
    """One round: start (or resume) the run, inject actor faults for `seconds`, stop it with SIGTERM, and
    tear the newest checkpoint with probability `tear` (never after the last round: no resume meets it)."""
    command = [sys.executable, "-m", "deep_rl_zoo.impala.run_classic", "--num_actors=2", "--unroll_length=16"]
    command += ["--num_iterations=100000", "--num_train_steps=2000", "--num_eval_steps=100"]
    command += [f"--actor_timeout={ACTOR_TIMEOUT_S}", "--max_actor_restarts=100000", "--nostop_when_solved"]
    command += [
        f"--checkpoint_dir={work / 'checkpoints'}",
        f"--runs_dir={work / 'runs'}",
        "--nouse_tensorboard",
    ]
    command += ["--noshow_progress"] + (["--resume"] if round_index > 0 else [])
    log_path = work / f"round_{round_index}.log"
    with open(log_path, "w") as log:
        learner = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        )
    try:
        start = time.monotonic()
        while len(actor_pids(learner.pid)) < 2:  # started: its actors are up
            if learner.poll() is not None or time.monotonic() - start > 120 * load_factor():
                raise RuntimeError(f"round {round_index} did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.3, 0.5) * seconds / 2)
            actors = actor_pids(learner.pid)
            if not actors or learner.poll() is not None:
                break
            fault = rng.choice(["kill", "hang"])
            os.kill(rng.choice(actors), signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
            tally[fault] += 1
            time.sleep((ACTOR_TIMEOUT_S + 3) * load_factor())  # let the learner notice before the next fault
        learner.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        learner.wait(timeout=120 * load_factor())
        took = time.monotonic() - sent
    finally:
        if learner.poll() is None:
            learner.kill()
    output = log_path.read_text()
    tally["stops"] += 1
    tally["stops_obeyed"] += int(learner.returncode == 128 + signal.SIGTERM and "Traceback" not in output)
    tally["slowest_stop_s"] = max(tally["slowest_stop_s"], took)
    tally["stops_in_time"] += int(took <= STOP_DEADLINE_S * load_factor())
    tally["kills_reported"] += len(re.findall(r"was killed by signal SIGKILL", output))
    tally["hangs_reported"] += len(re.findall(r"showed no sign of life", output))
    tally["tears_skipped"] += len(re.findall(r"--resume: skipping a damaged checkpoint", output))
    iterations = [int(i) for i in re.findall(r"^iteration (\d+):", output, re.MULTILINE)]
    tally["iterations"] += iterations
    if not last and rng.random() < tear and (newest := newest_checkpoint(work / "checkpoints")) is not None:
        data = newest.read_bytes()
        newest.write_bytes(data[: len(data) // 2])  # a torn file, as a crash without atomic rename leaves
        tally["tears"] += 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="Total time of the rounds.")
    parser.add_argument("--round_seconds", type=float, default=60.0, help="Faults phase of one round.")
    parser.add_argument(
        "--short", action="store_true", help="2 rounds of 25 s of faults, a tear between them."
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    num_rounds = 2 if args.short else max(2, int(args.minutes * 60 / args.round_seconds))
    round_seconds = 25.0 if args.short else args.round_seconds
    rng = random.Random(args.seed)
    tally = dict.fromkeys(
        ["kill", "hang", "stops", "stops_obeyed", "stops_in_time", "kills_reported", "hangs_reported"], 0
    )
    tally.update(tears=0, tears_skipped=0, slowest_stop_s=0.0, iterations=[])
    with tempfile.TemporaryDirectory(prefix="chaos-") as work:
        for round_index in range(num_rounds):
            last = round_index == num_rounds - 1
            tear = 1.0 if args.short else 0.5  # the short version meets every kind of fault
            run_round(pathlib.Path(work), round_index, last, round_seconds, tear, rng, tally)
            print(
                f"round {round_index}: { ({k: v for k, v in tally.items() if k != 'iterations'}) }",
                flush=True,
            )
    checks = {
        "every SIGTERM obeyed (exit 143, no traceback)": tally["stops_obeyed"] == tally["stops"],
        f"every SIGTERM within {STOP_DEADLINE_S} s x load": tally["stops_in_time"] == tally["stops"],
        "every killed actor reported": tally["kills_reported"] >= tally["kill"],
        "every hung actor reported": tally["hangs_reported"] >= tally["hang"],
        "every torn checkpoint met by --resume skipped": tally["tears_skipped"] >= tally["tears"],
        "the iterations only went forward": tally["iterations"] == sorted(tally["iterations"]),
    }
    for name, passed in checks.items():
        print(f"{'PASS' if passed else 'FAIL'}: {name}")
    print(f"slowest stop: {tally['slowest_stop_s']:.1f} s; iterations done: {len(tally['iterations'])}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
