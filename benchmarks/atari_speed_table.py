"""Every agent's `run_atari` on Pong, as a user types it: env steps/s, learner steps/s, CPU and memory.

For each agent: `python -m deep_rl_zoo.<agent>.run_atari --environment_name=Pong --seed=1` with its
defaults (so the layout of actors, envs and learner threads the run chooses for this machine's cores),
two iterations of `--env_steps` env steps each and no evaluation. The figures are those of iteration 2,
the steady state: start-up (imports, env creation, actors' spawning) and the replay agents' warm-up fall
in iteration 1.

Changed from the defaults only where the defaults would time the warm-up rather than the training:
PPO-RND's random play for its observation normaliser is cut to one update's worth, the replay agents get
a small replay (`--replay_capacity`, which changes memory, not speed) and a short
warm-up, and the epsilon-greedy ones reach their final epsilon at its end
(`--exploration_epsilon_decay_steps=0`), so the actor takes a forward pass for nearly every action, as
for the bulk of a real run. The table prints those flags beside each agent.

Measured from outside the run. From the run's results.csv: iteration 2's env steps/s (the training
phase only, `train_steps_per_second`) and its learner steps over the same seconds (`learner_learner_steps`:
a gradient step for the replay agents, Q and SAC, recurrent or not; an update on one batch for the policy
agents, which for PPO is its epochs x minibatches of gradient steps). From /proc, every quarter of a
second: the CPU time and resident memory of every process of the run (the learner and its actors: the
run's session). CPU seconds per 1,000 env steps are the processes' CPU time between the appearance of
iteration 1's row and of iteration 2's, so they include iteration 1's checkpoint save; cores busy are
those CPU seconds over the wall seconds between the same two samples (2.0 on 2 cores: no core idles, so
overlapping work inside the run has nothing left to fill); memory is the peak of the summed RSS (pages
shared between processes counted in each).

For the distributed agents (actors + learner), a second table says where iteration 2's training phase
went, as the run itself measured it (results.csv's `learner_*_share` and `*cores*` columns; see
`deep_rl_zoo/runtime/loop.py`'s PhaseTimes): the learner's share of the phase waiting for actor messages
(reading them included) and learning, the cores its process kept busy in each, and the actors' shares of their own time
waiting for parameters and sending, with the cores each actor process kept busy while acting.

    python benchmarks/atari_speed_table.py                         # all twenty agents (twenty-one scripts: A2C-grad has its own)
    python benchmarks/atari_speed_table.py --agents=dqn,ppo --env_steps=2000
    python benchmarks/atari_speed_table.py --zoo_flags="--num_threads=2"   # one more flag for every agent

The machine should be otherwise idle: with other work running, every agent's figure drops with the load.
"""

import argparse
import csv
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import sb3_atari  # noqa: E402  (benchmarks/ is not a package)

from deep_rl_zoo.results.export import cpu_description  # noqa: E402

# Flags that move the replay agents' warm-up out of the way; the values fit each family's minimum
# (R2D2's batch is 64 sequences of 121 observations, a new sequence every 40 env steps).
_EPSILON_GREEDY = ("--replay_capacity=20000", "--min_replay_size=1000", "--exploration_epsilon_decay_steps=0")
_REPLAY = ("--replay_capacity=20000", "--min_replay_size=1000")
_RECURRENT = ("--replay_capacity=40000", "--min_replay_size=6000")


@dataclass(frozen=True)
class Agent:
    name: str  # the package under deep_rl_zoo/, or the package and the script's suffix (a2c_grad)
    env_steps: int  # per iteration, by default: about half a minute of training on a 2-core AVX2 CPU
    flags: tuple[str, ...] = field(default=())
    script: str = ""  # the module it runs; default deep_rl_zoo.<name>.run_atari

    @property
    def module(self) -> str:
        return self.script or f"deep_rl_zoo.{self.name}.run_atari"


AGENTS = (
    Agent("dqn", 3000, _EPSILON_GREEDY),
    Agent("double_dqn", 3000, _EPSILON_GREEDY),
    Agent("prioritized_dqn", 3000, _EPSILON_GREEDY),
    Agent("c51_dqn", 3000, _EPSILON_GREEDY),
    Agent("rainbow", 3000, _REPLAY),
    Agent("qr_dqn", 3000, _EPSILON_GREEDY),
    Agent("iqn", 3000, _EPSILON_GREEDY),
    Agent("drqn", 3000, _EPSILON_GREEDY),
    Agent("r2d2", 8000, _RECURRENT),
    Agent("ngu", 8000, _RECURRENT),
    Agent("agent57", 8000, _RECURRENT),
    Agent("reinforce", 8000),
    Agent("reinforce_baseline", 8000),
    Agent("actor_critic", 8000),
    Agent("a2c", 16384),
    Agent("a2c_grad", 16384, script="deep_rl_zoo.a2c.run_atari_grad"),
    Agent("ppo", 16384),
    # PPO-RND's defaults play 51,200 random env steps to set its observation normaliser: one update's worth
    # here, so that iteration 2 learns.
    Agent("ppo_rnd", 16384, ("--observation_warmup_steps=1024",)),
    Agent("ppo_icm", 16384),
    Agent("impala", 16384),
    Agent("sac", 4000, _REPLAY),
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


def run_sampled(
    command: list[str], work: Path, stage, env: dict | None = None
) -> tuple[dict[int, tuple[float, float]], int, str]:
    """Runs `command` in a session of its own, sampling its processes' CPU time and memory every quarter
    of a second until it ends. Returns (stage -> (CPU seconds, wall seconds since the start) when
    `stage()` first returned it, peak summed RSS in bytes, its output); a stage first seen after the
    command ended gets the last sample (a run ends right after writing its last row). A failed command is
    a SystemExit with the output's end."""
    output_path = work / "output.txt"
    with open(output_path, "w") as output:
        child = subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        marks: dict[int, tuple[float, float]] = {}
        peak_rss, start, last = 0, time.perf_counter(), (0.0, 0.0)
        try:
            while child.poll() is None:
                cpu_s, rss = session_usage(child.pid)
                peak_rss = max(peak_rss, rss)
                last = (cpu_s, time.perf_counter() - start)
                marks.setdefault(stage(), last)
                time.sleep(0.25)
        except BaseException:  # Ctrl-C: the run and its actors are in a session of their own
            os.killpg(child.pid, signal.SIGKILL)
            raise
        # A stage the run reached after the last sample (it wrote its last row and ended): that sample.
        marks.setdefault(stage(), last)
    text = output_path.read_text()
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} exited {child.returncode}:\n{text[-2000:]}")
    return marks, peak_rss, text


def _between_stages(marks: dict[int, tuple[float, float]]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) from stage 1 to stage 2; NaN where either was never sampled."""
    if 1 not in marks or 2 not in marks:
        return float("nan"), float("nan")
    (cpu_1, wall_1), (cpu_2, wall_2) = marks[1], marks[2]
    return cpu_2 - cpu_1, wall_2 - wall_1


def _cpu_per_1000(marks: dict[int, tuple[float, float]], env_steps: int) -> float:
    """CPU seconds per 1,000 env steps between stage 1 and stage 2."""
    return 1000 * _between_stages(marks)[0] / env_steps


def _cores_busy(marks: dict[int, tuple[float, float]]) -> float:
    """CPU seconds per wall second between stage 1 and stage 2: how many cores the run kept busy."""
    cpu, wall = _between_stages(marks)
    return cpu / wall if wall > 0 else float("nan")


def measure(agent: Agent, env_steps: int, extra_flags: list[str], python: str = sys.executable) -> dict:
    """Runs the agent's run_atari for two iterations of `env_steps` and returns iteration 2's figures."""
    with tempfile.TemporaryDirectory(prefix=f"speed_table_{agent.name}.") as folder:
        work = Path(folder)
        csv_path = work / "results.csv"
        command = [
            python,
            "-m",
            agent.module,
            "--environment_name=Pong",
            "--seed=1",
            "--num_iterations=2",
            f"--num_train_steps={env_steps}",
            "--num_eval_steps=0",
            *agent.flags,
            *extra_flags,
            f"--checkpoint_dir={work}/checkpoints",
            f"--runs_dir={work}/runs",
            f"--results_csv_path={csv_path}",
            "--nouse_tensorboard",
            "--noshow_progress",
        ]
        marks, peak_rss, output = run_sampled(command, work, lambda: len(_rows(csv_path)))
        rows = _rows(csv_path)
    if len(rows) != 2:
        raise SystemExit(f"{agent.name}: results.csv has {len(rows)} rows, not 2:\n{output[-2000:]}")
    steps = int(rows[1]["train_env_steps"]) - int(rows[0]["train_env_steps"])
    seconds = steps / float(rows[1]["train_steps_per_second"])
    # The learner's step counter is cumulative: iteration 2's steps are the difference of the rows.
    learner_steps = float(rows[1].get("learner_learner_steps") or "nan") - float(
        rows[0].get("learner_learner_steps") or "nan"
    )
    layout = next((line for line in output.splitlines() if line.startswith("layout:")), "")
    # A distributed run's split of iteration 2's training phase (`runtime.loop.PhaseTimes`); none for
    # the single-process agents.
    split = {key: float(rows[1].get(f"learner_{key}") or "nan") for key in SPLIT_KEYS}
    split = {key: value for key, value in split.items() if not math.isnan(value)}
    return {
        "agent": agent.name,
        "flags": " ".join([*agent.flags, *extra_flags]),
        "layout": layout.removeprefix("layout: ").split(" (")[0],
        "env_steps": steps,
        "env_steps_per_s": steps / seconds,
        "learner_steps_per_s": learner_steps / seconds,
        "cpu_s_per_1000": _cpu_per_1000(marks, steps),
        "cores_busy": _cores_busy(marks),
        "peak_rss_gb": peak_rss / 2**30,
        "split": split,
    }


SPLIT_KEYS = (
    "waiting_share",
    "learning_share",
    "cores_while_waiting",
    "cores_while_learning",
    "actor_waiting_share",
    "actor_sending_share",
    "actor_cores_while_acting",
)


# Stable-Baselines3 (and sb3-contrib) where they have the algorithm, set as the zoo's run_atari defaults
# are (and as the measurement changes them: replay 20,000, learning from 1,000 env steps with epsilon at
# its end value from there), with SB3's own Atari wrappers. Each defines `env` and `model`.
_SB3_MODELS = {
    "ppo": """from stable_baselines3 import PPO
env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=8, seed=seed), n_stack=4)
model = PPO("CnnPolicy", env, n_steps=128, n_epochs=4, batch_size=256, learning_rate=2.5e-4, clip_range=0.1,
            ent_coef=0.01, vf_coef=0.5, gamma=0.99, gae_lambda=0.95, max_grad_norm=0.5, seed=seed, device="cpu")
""",
    "a2c": """from stable_baselines3 import A2C
env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=16, seed=seed), n_stack=4)
model = A2C("CnnPolicy", env, n_steps=5, learning_rate=7e-4, ent_coef=0.01, vf_coef=0.5, gamma=0.99,
            gae_lambda=1.0, max_grad_norm=0.5, use_rms_prop=True, rms_prop_eps=1e-5, seed=seed, device="cpu")
""",
    "dqn": """from stable_baselines3 import DQN
env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=1, seed=seed), n_stack=4)
model = DQN("CnnPolicy", env, buffer_size=20_000, learning_starts=1_000, batch_size=32, learning_rate=1e-4,
            train_freq=4, gradient_steps=1, target_update_interval=10_000, gamma=0.99, max_grad_norm=10,
            exploration_final_eps=0.1, exploration_fraction=1_000 / env_steps,
            policy_kwargs=dict(optimizer_kwargs=dict(eps=1.5e-4)), seed=seed, device="cpu")
""",
    "qr_dqn": """from sb3_contrib import QRDQN
env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=1, seed=seed), n_stack=4)
model = QRDQN("CnnPolicy", env, buffer_size=20_000, learning_starts=1_000, batch_size=32, learning_rate=5e-5,
              train_freq=4, gradient_steps=1, target_update_interval=10_000, gamma=0.99, max_grad_norm=10,
              exploration_final_eps=0.01, exploration_fraction=1_000 / env_steps,
              policy_kwargs=dict(n_quantiles=200, optimizer_kwargs=dict(eps=0.01 / 32)), seed=seed, device="cpu")
""",
}

# The SB3 child: learn `env_steps` (start-up and warm-up), then `env_steps` more, timed, as the zoo's
# two iterations; a line in the progress file marks each stage for the parent's CPU sampler.
_SB3_CHILD = """import json, sys, time
import ale_py, gymnasium as gym, torch
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.vec_env import VecFrameStack
gym.register_envs(ale_py)
seed, env_steps, progress = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
{model}
def mark():
    with open(progress, "a") as f:
        f.write("stage\\n")
model.learn(total_timesteps=env_steps)
mark()
first, start = model.num_timesteps, time.perf_counter()
model.learn(total_timesteps=env_steps, reset_num_timesteps=False)
seconds = time.perf_counter() - start
mark()
print(json.dumps({{"env_steps": model.num_timesteps - first, "seconds": seconds, "threads": torch.get_num_threads()}}))
"""


def measure_sb3(name: str, python: str, env_steps: int, threads: int) -> dict:
    """SB3's counterpart of `name`, measured as `measure` measures the zoo."""
    with tempfile.TemporaryDirectory(prefix=f"speed_table_sb3_{name}.") as folder:
        work = Path(folder)
        script, progress = work / "child.py", work / "progress.txt"
        script.write_text(_SB3_CHILD.format(model=_SB3_MODELS[name]))
        env = dict(os.environ)
        env.pop("OMP_NUM_THREADS", None)
        if threads:
            env["OMP_NUM_THREADS"] = str(threads)

        def stage() -> int:
            return len(progress.read_text().splitlines()) if progress.exists() else 0

        command = [python, str(script), "1", str(env_steps), str(progress)]
        marks, peak_rss, text = run_sampled(command, work, stage, env)
    result = json.loads(text.strip().splitlines()[-1])
    return {
        "env_steps_per_s": result["env_steps"] / result["seconds"],
        "cpu_s_per_1000": _cpu_per_1000(marks, result["env_steps"]),
        "cores_busy": _cores_busy(marks),
        "peak_rss_gb": peak_rss / 2**30,
        "threads": result["threads"],
    }


def table(results: list[dict]) -> str:
    lines = [
        "| agent | layout the run chose | flags changed for the measurement | env steps/s | learner steps/s "
        "| CPU s per 1,000 env steps | cores busy | memory, GB (summed RSS) | SB3: env steps/s, CPU s per 1,000 "
        "| zoo / SB3: env steps/s, CPU per env step |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        sb3 = r.get("sb3")
        versus = (
            f"{sb3['env_steps_per_s']:.0f}, {sb3['cpu_s_per_1000']:.1f} | "
            f"{r['env_steps_per_s'] / sb3['env_steps_per_s']:.2f}, {r['cpu_s_per_1000'] / sb3['cpu_s_per_1000']:.2f}"
            if sb3
            else " | "
        )
        lines.append(
            f"| {r['agent']} | {r['layout']} | {r['flags'] or 'none'} | {r['env_steps_per_s']:.0f} "
            f"| {r['learner_steps_per_s']:.2f} | {r['cpu_s_per_1000']:.1f} | {r['cores_busy']:.2f} "
            f"| {r['peak_rss_gb']:.1f} | {versus} |"
        )
    return "\n".join(lines)


def split_table(results: list[dict]) -> str:
    """Where the distributed agents' training phase went (`runtime.loop.PhaseTimes`), one row each."""
    lines = [
        "| agent | learner waiting | learner learning | learner cores while waiting | learner cores while learning "
        "| actors waiting | actors sending | actor cores while acting |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        if len(r["split"]) == len(SPLIT_KEYS):
            split = r["split"]
            lines.append(
                f"| {r['agent']} | {split['waiting_share']:.0%} | {split['learning_share']:.0%} "
                f"| {split['cores_while_waiting']:.2f} | {split['cores_while_learning']:.2f} "
                f"| {split['actor_waiting_share']:.0%} "
                f"| {split['actor_sending_share']:.0%} | {split['actor_cores_while_acting']:.2f} |"
            )
    return "\n".join(lines) if len(lines) > 2 else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="all", help="Comma-separated packages, or all.")
    parser.add_argument(
        "--env_steps", type=int, default=0, help="Env steps per iteration (0: each agent's own, ~30 s each)."
    )
    parser.add_argument("--zoo_flags", default="", help="More run_atari flags for every agent.")
    parser.add_argument(
        "--sb3",
        action="store_true",
        help="Also measure Stable-Baselines3's PPO, A2C, DQN and sb3-contrib's QR-DQN, each after the zoo's.",
    )
    parser.add_argument("--sb3_python", default="", help="Python of a venv with SB3 (default: make one).")
    parser.add_argument(
        "--sb3_threads",
        type=int,
        default=0,
        help="SB3's torch threads; 0 keeps torch's default (every core).",
    )
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
    sb3_python, venv_folder = args.sb3_python, None
    if args.sb3 and not sb3_python and any(name in _SB3_MODELS for name in names):
        sb3_python, venv_folder = sb3_atari.make_sb3_venv()
    results = []
    try:
        for name in names:
            agent = AGENTS_BY_NAME[name]
            env_steps = args.env_steps or agent.env_steps
            result = measure(agent, env_steps, shlex.split(args.zoo_flags))
            print(
                f"{name}: {result['env_steps_per_s']:.0f} env steps/s, {result['learner_steps_per_s']:.2f} "
                f"learner steps/s, {result['cpu_s_per_1000']:.1f} CPU s per 1,000 env steps, "
                f"{result['cores_busy']:.2f} cores busy, {result['peak_rss_gb']:.1f} GB ({result['layout']})",
                flush=True,
            )
            if args.sb3 and name in _SB3_MODELS:
                result["sb3"] = sb3 = measure_sb3(name, sb3_python, env_steps, args.sb3_threads)
                print(
                    f"  SB3 {name}: {sb3['env_steps_per_s']:.0f} env steps/s, {sb3['cpu_s_per_1000']:.1f} CPU s "
                    f"per 1,000 env steps, {sb3['cores_busy']:.2f} cores busy, {sb3['peak_rss_gb']:.1f} GB, "
                    f"{sb3['threads']} torch threads",
                    flush=True,
                )
            results.append(result)
    finally:
        if venv_folder:
            shutil.rmtree(venv_folder, ignore_errors=True)
    print()
    print(table(results))
    split = split_table(results)
    if split:
        print()
        print(split)
    return 0


if __name__ == "__main__":
    sys.exit(main())
