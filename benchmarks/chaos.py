"""Chaos: a distributed run driven through the faults of a week, each of which it must survive and report.

PPO or IMPALA on CartPole with 2 actors (local processes, or Ray actors inside a private loopback-only
network namespace) trains for a fixed number of iterations while this script, at random moments:

    kill    SIGKILLs an actor                    -> "actor i was killed by signal SIGKILL; restarted it ..."
    hang    SIGSTOPs an actor (a deadlock)       -> "actor i showed no sign of life for N s ...; restarted"
and, at planned points of the run (after given iterations, once the last actor fault was reported):

    learner kill   SIGKILLs the learner          -> restarted with --resume from its newest checkpoint
    learner stop   SIGTERM to the learner        -> exit 143 within 10 s, an interrupted checkpoint,
                   then tears that checkpoint    -> "--resume: skipping a damaged checkpoint: ..."
                   in half and restarts it with --resume (which must fall back to the newest intact one).

The run passes when it finishes its iterations; every SIGTERM was obeyed within 10 s (stretched by the
machine's load) with exit 143 and no traceback; every actor fault was reported; every torn checkpoint was
skipped; no learner restart lost more than one iteration's env steps (with the learner step that ends it);
no process, shared-memory file or file descriptor of ours outlived a learner (this script is the child
subreaper of everything it starts); the learner's memory grew by under 10% from the run's first quarter
to its last; and the agent still solved CartPole (an evaluation mean >= 475).

    python benchmarks/chaos.py --agent=impala --minutes=30              # the full version
    python benchmarks/chaos.py --agent=ppo --backend=ray --minutes=30   # Ray in a private namespace
    python benchmarks/chaos.py --short                                  # about 2 minutes: the slow tier

Learner faults wait for iterations and for the actor faults to be reported, not for the clock, so the
short version meets every kind of fault on a fast CPU as on a slow one. Linux only (/proc).
"""

import argparse
import ctypes
import dataclasses
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
ACTOR_TIMEOUT_S = 5  # --actor_timeout of the run: a hang is noticed within seconds, not the default 5 min
STOP_DEADLINE_S = 10  # the bound on obeying SIGTERM, stretched by the load
SOLVED_RETURN = 475.0  # CartPole-v1's solve threshold, as the learning tests use it
FD_SLACK = 8  # a learner's open files may vary by a few (logs, pipes in flight); a leak grows with restarts

# Per agent: its name and flags.
AGENTS = {"impala": ("IMPALA", ["--unroll_length=16"]), "ppo": ("PPO", [])}
# Env steps per iteration (--train_steps overrides). On the 2-core AVX2 development machine, two chaos
# runs side by side, an iteration took about 75 s (PPO) and 120 s (IMPALA) locally; Ray's actors, each
# restart a new process that imports torch, go slower.
TRAIN_STEPS = {"local": 180_000, "ray": 30_000}
SHORT_TRAIN_STEPS = 30_000
PR_SET_CHILD_SUBREAPER = 36


@dataclasses.dataclass
class Life:
    """One learner process, from its start to its end."""

    index: int
    how: str  # what ended it: "killed", "stopped" or "finished"
    returncode: int = 0
    stop_seconds: float = 0.0
    rss_kb: list = dataclasses.field(default_factory=list)  # (monotonic time, VmRSS kB)
    fds: list = dataclasses.field(default_factory=list)  # the learner's open files, sampled with rss_kb
    actor_faults: int = 0
    log: str = ""
    leftovers: list = dataclasses.field(default_factory=list)  # our processes alive after it ended


def load_factor() -> float:
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every live process."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(entry)] = (int(fields[1]), fields[0])
    return table


def descendants(pid: int) -> list[int]:
    table = process_table()
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, state) in table.items():
            if ppid == parent and state not in "ZX":
                found.append(child)
                frontier.append(child)
    return found


def actor_pids(learner_pid: int, backend: str) -> list[int]:
    """Local: the learner's grandchildren (its fork server forks every actor). Ray: the `ray::_ActorBody`
    processes of the learner's network namespace."""
    if backend == "local":
        table = process_table()
        servers = [p for p, (ppid, state) in table.items() if ppid == learner_pid and state not in "ZX"]
        return [p for p, (ppid, state) in table.items() if ppid in servers and state not in "ZX"]
    try:
        namespace = os.readlink(f"/proc/{learner_pid}/ns/net")
    except OSError:
        return []
    found = []
    for pid in descendants(learner_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                actor = f.read().startswith(b"ray::_ActorBody")
            if actor and os.readlink(f"/proc/{pid}/ns/net") == namespace:
                found.append(pid)
        except OSError:
            continue
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


def sample(pid: int, life: Life) -> None:
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
        life.rss_kb.append((time.monotonic(), rss))
        life.fds.append(len(os.listdir(f"/proc/{pid}/fd")))
    except (OSError, AttributeError):
        pass


def shared_memory_in_use() -> set[str]:
    """The /dev/shm files some live process has open or mapped. Ours are all gone when this is asked, so
    a new file held by a process is another program's (a test running beside this one), not a leak."""
    held = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/maps") as f:
                    held.update(re.findall(r"/dev/shm/(\S+)", f.read()))
                for fd in os.listdir(f"/proc/{entry}/fd"):
                    if (target := os.readlink(f"/proc/{entry}/fd/{fd}")).startswith("/dev/shm/"):
                        held.add(target[len("/dev/shm/") :])
            except OSError:
                continue
    return held


def reap_orphans() -> None:
    """As the child subreaper, the orphans of a killed learner become ours: collect the exited ones."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def actor_faults_reported(log: str) -> int:
    """Console lines saying an actor was lost: restarted, or (its death seen as the run ended) not."""
    return len(
        re.findall(
            r"^actor \d+ .*(?:restarted it with seed|as the run ended; not restarted)", log, re.MULTILINE
        )
    )


def into_iteration(log: str, iteration: int) -> int:
    """The env steps of `iteration`'s training its progress bar last showed (0 before it started)."""
    counts = re.findall(rf"iteration {iteration} train:[^\r\n]*?\|\s*(\d+)/", log)
    return int(counts[-1]) if counts else 0


def completed_iterations(log: str) -> list[int]:
    return [int(i) for i in re.findall(r"^iteration (\d+): env steps", log, re.MULTILINE)]


def run_life(args, work: pathlib.Path, index: int, plan: list, rng: random.Random, tally: dict) -> Life:
    """Starts the learner (resuming after the first life) and injects actor faults until it finishes or
    the next planned learner fault is due; returns what happened."""
    agent_name, agent_flags = AGENTS[args.agent]
    command = [sys.executable, "-m", f"deep_rl_zoo.{args.agent}.run_classic", "--num_actors=2", *agent_flags]
    command += [f"--num_iterations={args.iterations}", f"--num_train_steps={args.train_steps}"]
    command += ["--num_eval_steps=2500", "--nostop_when_solved", "--nouse_tensorboard", "--num_threads=1"]
    command += [f"--actor_timeout={ACTOR_TIMEOUT_S}", "--max_actor_restarts=100000", f"--seed={args.seed}"]
    command += [f"--checkpoint_dir={work / 'checkpoints'}", f"--runs_dir={work / 'runs'}"]
    command += [f"--backend={args.backend}"] + (["--resume"] if index > 0 else [])
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
    }
    if args.backend == "ray":  # a namespace with only loopback: the Ray node and its actors stay on it
        command = ["unshare", "-n", "bash", "-c", 'ip link set lo up && exec "$@"', "bash", *command]
    log_path = work / f"life_{index}.log"
    with open(log_path, "w") as log_file:
        learner = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    life = Life(index, "finished")
    fault = plan[0] if plan else None  # (after this many completed iterations, "kill" or "stop")
    fault_share = rng.uniform(0.2, 0.8)
    try:
        start = time.monotonic()
        while len(actor_pids(learner.pid, args.backend)) < 2:  # started: its actors are up
            if learner.poll() is not None or time.monotonic() - start > 180 * load_factor():
                raise RuntimeError(f"life {index} did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        next_actor_fault = None  # the first as soon as it trains: every life meets one, however short
        while learner.poll() is None:
            sample(learner.pid, life)
            log = log_path.read_text(errors="replace")
            if next_actor_fault is None:
                # Not while the actors start: a start that hangs is an error of its own (the cluster full)
                if not re.search(r"train:[^\r\n]*?\|\s*[1-9]\d*/", log):
                    time.sleep(0.2)
                    continue
                next_actor_fault = time.monotonic()
            reported = actor_faults_reported(log) >= life.actor_faults
            done = completed_iterations(log)
            if fault and reported and life.actor_faults and done and done[-1] + 1 >= fault[0]:
                # Mid-iteration, where a learner fault costs most: at a random share of the next one.
                if into_iteration(log, done[-1] + 1) >= fault_share * args.train_steps:
                    break
            if reported and time.monotonic() >= next_actor_fault:
                actors = actor_pids(learner.pid, args.backend)
                if actors:
                    kind = rng.choice(["kill", "hang"])
                    os.kill(rng.choice(actors), signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
                    tally[kind] += 1
                    life.actor_faults += 1
                    next_actor_fault = time.monotonic() + rng.uniform(*args.actor_fault_seconds)
            time.sleep(0.5)
        if learner.poll() is None:
            plan.pop(0)
            life.how = "killed" if fault[1] == "kill" else "stopped"
            learner.send_signal(signal.SIGKILL if fault[1] == "kill" else signal.SIGTERM)
            sent = time.monotonic()
            learner.wait(timeout=120 * load_factor())
            life.stop_seconds = time.monotonic() - sent
    finally:
        if learner.poll() is None:
            learner.kill()
            learner.wait()
    life.returncode = learner.returncode
    life.log = log_path.read_text(errors="replace")
    # What outlived the learner: everything it started is our descendant (we are the subreaper). Ray's
    # per-node agents outlive a SIGKILLed driver that started them by 30-70 s (they try to tell the dead
    # GCS that the raylet died), then exit: only what is still there after two minutes is left behind.
    deadline = time.monotonic() + 120 * load_factor()
    while (left := descendants(os.getpid())) and time.monotonic() < deadline:
        reap_orphans()
        time.sleep(0.5)
    life.leftovers = [f"{pid} {command_line(pid)}" for pid in left]
    for line in life.leftovers:
        print(f"life {index}: left behind: {line}", flush=True)
    for pid in left:  # so the next life starts clean; counted as a failure
        os.kill(pid, signal.SIGKILL)
    reap_orphans()
    return life


def env_steps_at_end(log: str, train_steps: int) -> int:
    """The env steps a learner had reached when it ended: its last completed iteration's count plus the
    last progress count of the iteration it was in."""
    completed = re.findall(r"^iteration (\d+): env steps ([\d,]+)", log, re.MULTILINE)
    stopped = re.search(r"at env step ([\d,]+);", log)
    if stopped:
        return int(stopped.group(1).replace(",", ""))
    base = int(completed[-1][1].replace(",", "")) if completed else None
    current = int(completed[-1][0]) + 1 if completed else None
    progress = re.findall(r"iteration (\d+) train:[^\r\n]*?\|\s*(\d+)/(\d+)", log)
    last = [(int(i), int(c)) for i, c, _ in progress if current is None or int(i) == current]
    if base is None:  # killed in its first iteration: the progress count is absolute
        return last[-1][1] + int(last[-1][0]) * train_steps if last else 0
    return base + (last[-1][1] if last else 0)


def learner_step_env_steps(logs: str) -> int:
    """The env steps of one learner step as the run's note gives them (0 without the note): a training
    phase ends on the learner-step boundary nearest to --num_train_steps, so an iteration, and the work a
    killed learner loses with it, may hold up to one learner step more."""
    sizes = re.findall(r"of about ([\d,]+) env steps each", logs)
    return max((int(size.replace(",", "")) for size in sizes), default=0)


def env_steps_at_resume(log: str, previous_logs: str) -> int:
    """The env step of the checkpoint a life resumed from (0 for the first life)."""
    found = re.search(r"resuming from (\S+)", log)
    if not found:
        return 0
    name = pathlib.Path(found.group(1)).name
    iteration = int(re.search(r"_(\d+)(_interrupted)?\.ckpt", name).group(1))
    if "_interrupted" in name:
        return int(
            re.findall(rf"stopped in iteration {iteration} at env step ([\d,]+)", previous_logs)[-1].replace(
                ",", ""
            )
        )
    return int(
        re.findall(rf"^iteration {iteration}: env steps ([\d,]+)", previous_logs, re.MULTILINE)[-1].replace(
            ",", ""
        )
    )


def newest_checkpoint(folder: pathlib.Path, agent_name: str) -> pathlib.Path | None:
    found = [(p.stat().st_mtime, p) for p in folder.rglob(f"{agent_name}_*.ckpt") if "best" not in p.name]
    return max(found)[1] if found else None


def quarter_median(values: list) -> float:
    values = sorted(values)
    return values[len(values) // 2] if values else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agent", choices=sorted(AGENTS), default="impala")
    parser.add_argument("--backend", choices=["local", "ray"], default="local")
    parser.add_argument(
        "--minutes",
        type=float,
        default=30.0,
        help="The number of iterations: roughly the minutes the run takes (see TRAIN_STEPS).",
    )
    parser.add_argument(
        "--train_steps", type=int, default=0, help="Env steps per iteration (0: the agent's)."
    )
    parser.add_argument("--short", action="store_true", help="6 short iterations: each fault once or twice.")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--work_dir", default="", help="Keep the run's logs here (default: a temporary folder)."
    )
    args = parser.parse_args()
    if args.backend == "ray" and (shutil.which("unshare") is None or shutil.which("ip") is None):
        parser.error("--backend=ray runs the learner in a private network namespace: needs unshare and ip")
    agent_name, _ = AGENTS[args.agent]
    if args.short:
        args.iterations, args.train_steps = 6, args.train_steps or SHORT_TRAIN_STEPS
        args.actor_fault_seconds = (4.0, 8.0)
    else:
        args.iterations = max(8, round(args.minutes))
        args.train_steps = args.train_steps or TRAIN_STEPS[args.backend]
        args.actor_fault_seconds = (20.0, 60.0)
    n = args.iterations
    # The learner's faults: (once this many iterations are done, what). The stop tears its checkpoint.
    plan = (
        [(1, "stop"), (3, "kill")]
        if args.short
        else [(n // 4, "kill"), (n // 2, "kill"), (3 * n // 4, "stop")]
    )
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    rng = random.Random(args.seed)
    tally = {"kill": 0, "hang": 0, "tears": 0}
    shm_before = set(os.listdir("/dev/shm"))
    fds_before = len(os.listdir("/proc/self/fd"))
    lives: list[Life] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="chaos-") as temporary:
        work = pathlib.Path(args.work_dir or temporary)
        work.mkdir(parents=True, exist_ok=True)
        while True:
            life = run_life(args, work, len(lives), plan, rng, tally)
            lives.append(life)
            done = completed_iterations(life.log)
            print(
                f"life {life.index}: {life.how} (exit {life.returncode}) after iteration "
                f"{done[-1] if done else '-'}; {life.actor_faults} actor faults; "
                f"RSS {life.rss_kb[-1][1] / 1024 if life.rss_kb else 0:.0f} MB; leftovers {len(life.leftovers)}",
                flush=True,
            )
            if life.how == "finished" or life.returncode not in (-signal.SIGKILL, 128 + signal.SIGTERM):
                break
            if life.how == "stopped" and (newest := newest_checkpoint(work / "checkpoints", agent_name)):
                data = newest.read_bytes()
                newest.write_bytes(
                    data[: len(data) // 2]
                )  # a torn file, as a crash without atomic rename leaves
                tally["tears"] += 1
    minutes = (time.monotonic() - started) / 60
    shm_left = sorted(set(os.listdir("/dev/shm")) - shm_before - shared_memory_in_use())
    fds_left = len(os.listdir("/proc/self/fd")) - fds_before
    logs = [life.log for life in lives]
    everything = "\n".join(logs)
    lost = []
    for i in range(1, len(lives)):
        at_end = env_steps_at_end(logs[i - 1], args.train_steps)
        lost.append(at_end - env_steps_at_resume(logs[i], "\n".join(logs[:i])))
    stops = [life for life in lives if life.how == "stopped"]
    samples = [(t, kb) for life in lives for t, kb in life.rss_kb]
    quarter = (samples[-1][0] - samples[0][0]) / 4 if samples else 0
    first = quarter_median([kb for t, kb in samples if t <= samples[0][0] + quarter])
    last = quarter_median([kb for t, kb in samples if t >= samples[-1][0] - quarter])
    fd_growth = max(
        (
            max(life.fds[len(life.fds) * 3 // 4 :]) - max(life.fds[: max(1, len(life.fds) // 4)])
            for life in lives
            if life.fds
        ),
        default=0,
    )
    evaluations = [float(x) for x in re.findall(r"eval return (-?[\d.]+) over", everything)]
    iterations = completed_iterations(everything)
    tears_skipped = len(re.findall(r"--resume: skipping a damaged checkpoint", everything))
    print(
        f"\n{agent_name} on CartPole-v1, backend {args.backend}: {len(lives)} learner lives, {minutes:.1f} min"
    )
    print(
        f"actor faults: {tally['kill']} SIGKILL, {tally['hang']} SIGSTOP; reported {actor_faults_reported(everything)}"
        f" ({len(re.findall(r'restarted it with seed', everything))} restarted, of which"
        f" {len(re.findall(r'showed no sign of life', everything))} as hung;"
        f" {len(re.findall(r'as the run ended; not restarted', everything))} as the run ended)"
    )
    print(
        f"learner restarts: {len(lives) - 1}; env steps lost at each: {lost} (an iteration is {args.train_steps:,})"
    )
    print(
        f"SIGTERM obeyed in: {[round(life.stop_seconds, 1) for life in stops]} s; torn checkpoints {tally['tears']}, skipped {tears_skipped}"
    )
    print(
        f"learner RSS: first quarter {first / 1024:.0f} MB, last quarter {last / 1024:.0f} MB; open files grew by {fd_growth} at most"
    )
    print(
        f"left behind: {sum(len(life.leftovers) for life in lives)} processes, shared memory {shm_left}, {fds_left} files here"
    )
    print(
        f"evaluations: best {max(evaluations, default=float('nan')):.1f}, last {evaluations[-1] if evaluations else float('nan'):.1f}"
    )
    checks = {
        f"the run finished its {n} iterations": lives[-1].how == "finished"
        and lives[-1].returncode == 0
        and iterations[-1:] == [n - 1],
        f"every SIGTERM obeyed with exit 143 within {STOP_DEADLINE_S} s x load, no traceback": all(
            life.returncode == 128 + signal.SIGTERM and life.stop_seconds <= STOP_DEADLINE_S * load_factor()
            for life in stops
        )
        and bool(stops)
        and "Traceback" not in everything,
        "every actor fault reported": actor_faults_reported(everything) >= tally["kill"] + tally["hang"] > 0,
        "every torn checkpoint skipped by --resume": tears_skipped >= tally["tears"] > 0,
        "no learner restart lost more than one iteration": bool(lost)
        and all(0 <= x <= args.train_steps + learner_step_env_steps(everything) for x in lost),
        "the iterations only went forward": iterations == sorted(iterations),
        "nothing left behind (processes, shared memory, files)": not any(life.leftovers for life in lives)
        and not shm_left
        and fds_left <= 0,
        f"the learner's open files did not grow (by more than {FD_SLACK})": fd_growth <= FD_SLACK,
    }
    if not args.short:  # a fresh learner's memory still grows in its first minutes; 6 short iterations
        # may not solve CartPole (IMPALA needs 120k-180k env steps)
        checks["the learner's RSS grew under 10% from the first quarter to the last"] = last < 1.10 * first
        checks[f"CartPole still solved (an evaluation >= {SOLVED_RETURN:.0f})"] = (
            max(evaluations, default=0) >= SOLVED_RETURN
        )
    for name, passed in checks.items():
        print(f"{'PASS' if passed else 'FAIL'}: {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
