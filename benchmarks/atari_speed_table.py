"""Every agent's `run_atari` on Pong, as a user types it: env steps/s, learner steps/s, CPU and memory.

For each agent: `python -m deep_rl_zoo.<agent>.run_atari --environment_name=Pong --seed=1` with its
defaults (so the layout of actors, envs and learner threads the run chooses for this machine's cores),
two iterations of `--env_steps` env steps each and no evaluation. The figures are those of iteration 2,
the steady state: start-up (imports, env creation, actors' spawning) and the replay agents' warm-up fall
in iteration 1.

Changed from the defaults only where the defaults would time the warm-up rather than the training: the
replay agents get a small replay (`--replay_capacity`, which changes memory, not speed) and a short
warm-up, and the epsilon-greedy ones reach their final epsilon at its end
(`--exploration_epsilon_decay_steps=0`), so the actor takes a forward pass for nearly every action, as
for the bulk of a real run. The table prints those flags beside each agent.

Measured from outside the run. From the run's results.csv: iteration 2's env steps/s (the training
phase only, `train_steps_per_second`) and its learner steps over the same seconds (`learner_learner_steps`:
a gradient step for the replay agents, Q and SAC, recurrent or not; an update on one batch for the policy
agents, which for PPO is its epochs x minibatches of gradient steps). From /proc, every quarter of a
second: the CPU time and resident memory of every process of the run (the learner and its actors: the
run's session). CPU seconds per 1,000 env steps are the processes' CPU time between the appearance of
iteration 1's row and of iteration 2's, so they include iteration 1's checkpoint save; memory is the peak
of the summed RSS (pages shared between processes counted in each).

    python benchmarks/atari_speed_table.py                         # all twenty agents
    python benchmarks/atari_speed_table.py --agents=dqn,ppo --env_steps=2000
    python benchmarks/atari_speed_table.py --zoo_flags="--num_threads=2"   # one more flag for every agent

The machine should be otherwise idle: with other work running, every agent's figure drops with the load.
"""

import argparse
import csv
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deep_rl_zoo.results.export import cpu_description  # noqa: E402

# Flags that move the replay agents' warm-up out of the way; the values fit each family's minimum
# (R2D2's batch is 64 sequences of 121 observations, a new sequence every 40 env steps).
_EPSILON_GREEDY = ("--replay_capacity=20000", "--min_replay_size=1000", "--exploration_epsilon_decay_steps=0")
_REPLAY = ("--replay_capacity=20000", "--min_replay_size=1000")
_RECURRENT = ("--replay_capacity=40000", "--min_replay_size=6000")


@dataclass(frozen=True)
class Agent:
    name: str  # the package under deep_rl_zoo/
    family: str
    env_steps: int  # per iteration, by default: about half a minute of training on a 2-core AVX2 CPU
    flags: tuple[str, ...] = field(default=())


AGENTS = (
    Agent("dqn", "replay Q", 3000, _EPSILON_GREEDY),
    Agent("double_dqn", "replay Q", 3000, _EPSILON_GREEDY),
    Agent("prioritized_dqn", "replay Q", 3000, _EPSILON_GREEDY),
    Agent("c51_dqn", "replay Q", 3000, _EPSILON_GREEDY),
    Agent("rainbow", "replay Q", 3000, _REPLAY),
    Agent("qr_dqn", "replay Q", 3000, _EPSILON_GREEDY),
    Agent("iqn", "replay Q", 3000, _EPSILON_GREEDY),
    Agent("drqn", "replay Q", 3000, _EPSILON_GREEDY),
    Agent("r2d2", "recurrent", 8000, _RECURRENT),
    Agent("ngu", "recurrent", 8000, _RECURRENT),
    Agent("agent57", "recurrent", 8000, _RECURRENT),
    Agent("reinforce", "policy", 8000),
    Agent("reinforce_baseline", "policy", 8000),
    Agent("actor_critic", "policy", 8000),
    Agent("a2c", "policy", 16384),
    Agent("ppo", "policy", 16384),
    Agent("ppo_rnd", "policy", 16384),
    Agent("ppo_icm", "policy", 16384),
    Agent("impala", "policy", 16384),
    Agent("sac", "replay policy", 4000, _REPLAY),
)
AGENTS_BY_NAME = {agent.name: agent for agent in AGENTS}

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def session_usage(session: int) -> tuple[float, int]:
    """(CPU seconds, resident bytes) summed over the processes of `session`, CPU time of their reaped
    children included (an actor that exits counts until its parent's own entry goes)."""
    cpu_ticks, rss_pages = 0, 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:  # exited while we looked
            continue
        # Fields after the command name (which may hold spaces) start at field 3 (state).
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) != session:  # field 6: session id
            continue
        cpu_ticks += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
        rss_pages += int(fields[21])  # field 24: rss
    return cpu_ticks / _CLOCK_TICKS, rss_pages * _PAGE_BYTES


def _rows(csv_path: Path) -> list[dict]:
    try:
        with open(csv_path) as f:
            return list(csv.DictReader(f))
    except (FileNotFoundError, csv.Error):
        return []


def measure(agent: Agent, env_steps: int, extra_flags: list[str], python: str = sys.executable) -> dict:
    """Runs the agent's run_atari for two iterations of `env_steps` and returns iteration 2's figures."""
    with tempfile.TemporaryDirectory(prefix=f"speed_table_{agent.name}.") as work:
        csv_path = Path(work) / "results.csv"
        flags = [
            "--environment_name=Pong",
            "--seed=1",
            "--num_iterations=2",
            f"--num_train_steps={env_steps}",
            "--num_eval_steps=0",
            *agent.flags,
            *extra_flags,
        ]
        command = [python, "-m", f"deep_rl_zoo.{agent.name}.run_atari", *flags]
        command += [
            f"--checkpoint_dir={work}/checkpoints",
            f"--runs_dir={work}/runs",
            f"--results_csv_path={csv_path}",
            "--nouse_tensorboard",
            "--noshow_progress",
        ]
        with open(Path(work) / "output.txt", "w") as output:
            child = subprocess.Popen(
                command, cwd=REPO_ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
            marks: dict[int, float] = {}  # rows in results.csv -> the tree's CPU seconds when first seen
            peak_rss = 0
            while child.poll() is None:
                cpu_s, rss = session_usage(child.pid)
                peak_rss = max(peak_rss, rss)
                marks.setdefault(len(_rows(csv_path)), cpu_s)
                time.sleep(0.25)
        rows = _rows(csv_path)
        if child.returncode != 0 or len(rows) != 2:
            tail = (Path(work) / "output.txt").read_text()[-2000:]
            raise SystemExit(f"{agent.name}: run_atari exited {child.returncode}:\n{tail}")
        # The last sample before the process ended stands for the end of iteration 2 when the sampler did
        # not see row 2 (the run ends right after writing it).
        end_cpu = marks.get(2, max(marks.values()))
        row = rows[1]
        steps = int(row["train_env_steps"]) - int(rows[0]["train_env_steps"])
        seconds = steps / float(row["train_steps_per_second"])
        # The learner's step counter is cumulative: iteration 2's steps are the difference of the rows.
        learner_steps = float(row.get("learner_learner_steps") or "nan") - float(
            rows[0].get("learner_learner_steps") or "nan"
        )
        layout = next(
            (
                line
                for line in (Path(work) / "output.txt").read_text().splitlines()
                if line.startswith("layout:")
            ),
            "",
        )
        return {
            "agent": agent.name,
            "flags": " ".join([*agent.flags, *extra_flags]),
            "layout": layout.removeprefix("layout: ").split(" (")[0],
            "env_steps": steps,
            "env_steps_per_s": steps / seconds,
            "learner_steps_per_s": learner_steps / seconds,
            "cpu_s_per_1000": 1000 * (end_cpu - marks[1]) / steps if 1 in marks else float("nan"),
            "peak_rss_gb": peak_rss / 2**30,
        }


def table(results: list[dict]) -> str:
    lines = [
        "| agent | layout the run chose | flags changed for the measurement | env steps/s | learner steps/s "
        "| CPU s per 1,000 env steps | memory, GB (summed RSS) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r['agent']} | {r['layout']} | {r['flags'] or 'none'} | {r['env_steps_per_s']:.0f} "
            f"| {r['learner_steps_per_s']:.2f} | {r['cpu_s_per_1000']:.1f} | {r['peak_rss_gb']:.1f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="all", help="Comma-separated packages, or all.")
    parser.add_argument(
        "--env_steps", type=int, default=0, help="Env steps per iteration (0: each agent's own, ~30 s each)."
    )
    parser.add_argument("--zoo_flags", default="", help="More run_atari flags for every agent.")
    args = parser.parse_args()
    names = [agent.name for agent in AGENTS] if args.agents == "all" else args.agents.split(",")
    unknown = [name for name in names if name not in AGENTS_BY_NAME]
    if unknown:
        raise SystemExit(f"--agents: unknown {', '.join(unknown)}; known: {', '.join(AGENTS_BY_NAME)}")
    if args.env_steps < 0:
        raise SystemExit(f"--env_steps must be >= 0, got {args.env_steps}")
    model, bfloat16 = cpu_description()
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(
        f"CPU: {model}, native bfloat16: {bfloat16}, {os.cpu_count()} cores; load average before: {load}",
        flush=True,
    )
    results = []
    for name in names:
        agent = AGENTS_BY_NAME[name]
        result = measure(agent, args.env_steps or agent.env_steps, shlex.split(args.zoo_flags))
        results.append(result)
        print(
            f"{name}: {result['env_steps_per_s']:.0f} env steps/s, {result['learner_steps_per_s']:.2f} "
            f"learner steps/s, {result['cpu_s_per_1000']:.1f} CPU s per 1,000 env steps, "
            f"{result['peak_rss_gb']:.1f} GB ({result['layout']})",
            flush=True,
        )
    print()
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
