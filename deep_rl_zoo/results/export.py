"""`python -m deep_rl_zoo.results export`: a run folder (runs/<name>/) made into a published one.

What it writes (see `folders`): the run's `config.txt` (absolute paths cut to their last part) and
`results.csv`; `episodes.csv`, every training episode from the TensorBoard event files, so that those
need not be committed; `learner.csv`, the learner's statistics from those files averaged over at most
200 spans of the run (`folders.learner_text`), where the run logged any; and `command.txt`:

    command=python -m deep_rl_zoo.ppo.run_atari --environment_name=Pong --seed=1
    resume_points=in iteration 3; in iteration 7    (or none; each resume: the command with --resume)
    zoo_version=0.1.0
    cpu_model=AMD EPYC 7B13, AVX2
    cpu_native_bfloat16=no                           (or yes: amx_bf16 avx512_bf16)
    env_steps=10,000,000                             (training env steps)
    env_steps_per_second=812                         (training phases only, over the whole run)
    wall_time_hours=3.42                             (first to last statistic of each session, summed)

Run it on the machine that trained (the CPU is read from /proc/cpuinfo), or pass --cpu_model.
"""

import csv
import io
import os
import platform
import re
import shutil
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.results import folders

EPISODE_TAGS = ("train/episode_return", "train/episode_length")  # one point per training episode
ROOMS_TAG = "train/episode_rooms"  # one point per training episode too, on games that count rooms
LEARNER_PREFIX = "learner/"  # the learner's statistics, logged every learner step (or every few)
BFLOAT16_FLAGS = ("amx_bf16", "avx512_bf16")  # CPU flags of native bfloat16 arithmetic
# Flags a published command may leave out or differ in: where this machine kept the run.
_BOOKKEEPING_FLAGS = frozenset({"runs_dir", "checkpoint_dir", "results_csv_path", "show_progress", "resume"})


class Session(NamedTuple):
    """One process's share of a run (the first, then one per --resume), from its event file."""

    first_step: int  # training env steps of its first statistic
    seconds: float  # from its first to its last statistic


class RunEvents(NamedTuple):
    episodes: folders.Episodes
    sessions: list[Session]
    learner: dict[str, tuple[np.ndarray, np.ndarray]]  # `learner/<name>` -> (env steps, values)


def _event_files(run_dir: str) -> list[str]:
    """The run's event files in the order they were written (`events.out.tfevents.<unix time>.<host>...`)."""
    names = [n for n in os.listdir(run_dir) if n.startswith("events.out.tfevents.")]

    def written_at(name: str) -> tuple[int, str]:
        stamp = name.split(".")[3]
        return (int(stamp) if stamp.isdigit() else 0, name)

    return [os.path.join(run_dir, n) for n in sorted(names, key=written_at)]


def read_run_events(run_dir: str, iteration_steps: Sequence[int] = ()) -> RunEvents:
    """Every training episode (its env step, return and length) and the sessions, from the event files.

    A session that starts at an env step an earlier one had passed was resumed from an iteration's
    checkpoint after a crash: the earlier session's episodes after that checkpoint were lost with it. The
    checkpoint is the last of `iteration_steps` (results.csv's `train_env_steps`) before the session's
    first step. A session that starts past every earlier step continues them (an interrupted checkpoint).

    Raises:
      ConfigError: the run has no event files (it ran with --nouse_tensorboard).
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # slow import

    paths = _event_files(run_dir)
    if not paths:
        raise ConfigError(
            f"{run_dir} has no TensorBoard event files (the run had --nouse_tensorboard), so no per-episode "
            "returns to export"
        )
    steps, returns, lengths = np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)
    rooms: np.ndarray | None = None  # stays None unless every session with episodes counted rooms
    counted_rooms = True
    sessions = []
    learner: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    seen_step = -1  # the last env step of any statistic of the sessions so far
    for path in paths:
        accumulator = EventAccumulator(path, size_guidance={"scalars": 0})  # 0: keep every point
        accumulator.Reload()
        tags = accumulator.Tags().get("scalars", [])
        events = [e for tag in tags for e in accumulator.Scalars(tag)]
        if not events:
            continue  # a session that ended before its first statistic
        first_step = min(e.step for e in events)
        times = [e.wall_time for e in events]
        sessions.append(Session(first_step, max(times) - min(times)))
        # A session starting where an earlier one had been went on from an iteration's checkpoint after a
        # crash: what the earlier sessions logged after that checkpoint was lost with it.
        lost_after = max([s for s in iteration_steps if s < first_step], default=0)
        if first_step > seen_step:
            lost_after = seen_step  # it went on from where they stopped: nothing lost
        seen_step = max(seen_step, max(e.step for e in events))
        for tag in (t for t in tags if t.startswith(LEARNER_PREFIX)):
            old_steps, old_values = learner.get(tag, (np.zeros(0, np.int64), np.zeros(0)))
            kept_points = old_steps <= lost_after
            points = accumulator.Scalars(tag)
            learner[tag] = (
                np.concatenate([old_steps[kept_points], np.array([e.step for e in points], dtype=np.int64)]),
                np.concatenate([old_values[kept_points], np.array([e.value for e in points])]),
            )
        if not set(EPISODE_TAGS) <= set(tags):
            continue
        episode_returns, episode_lengths = (accumulator.Scalars(tag) for tag in EPISODE_TAGS)
        if len(episode_returns) != len(episode_lengths):
            raise ConfigError(
                f"{path}: {len(episode_returns)} episode returns but {len(episode_lengths)} lengths"
            )
        kept = steps <= lost_after
        new_steps = np.array([e.step for e in episode_returns], dtype=np.int64)
        order = np.argsort(new_steps, kind="stable")  # episodes ending on one step keep their order
        steps = np.concatenate([steps[kept], new_steps[order]])
        returns = np.concatenate([returns[kept], np.array([e.value for e in episode_returns])[order]])
        lengths = np.concatenate(
            [lengths[kept], np.array([round(e.value) for e in episode_lengths], dtype=np.int64)[order]]
        )
        counted_rooms = counted_rooms and ROOMS_TAG in tags
        if counted_rooms:
            episode_rooms = accumulator.Scalars(ROOMS_TAG)  # logged with each return: the same order
            if len(episode_rooms) != len(episode_returns):
                raise ConfigError(
                    f"{path}: {len(episode_returns)} episode returns but {len(episode_rooms)} rooms"
                )
            new_rooms = np.array([round(e.value) for e in episode_rooms], dtype=np.int64)[order]
            rooms = new_rooms if rooms is None else np.concatenate([rooms[kept], new_rooms])
    episodes = folders.Episodes(steps, returns, lengths, rooms if counted_rooms else None)
    return RunEvents(episodes, sessions, learner)


def cpu_description(cpuinfo_path: str = "/proc/cpuinfo") -> tuple[str, str]:
    """This machine's CPU model (with its widest vector unit, AVX2 or AVX-512, and AMX where present) and whether it has native bfloat16 (`yes: amx_bf16 avx512_bf16` / `no`)."""
    model, flags = "", set()
    if os.path.isfile(cpuinfo_path):
        with open(cpuinfo_path) as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() == "model name" and not model:
                    model = value.strip()
                elif name.strip() == "flags" and not flags:
                    flags = set(value.split())
    model = re.sub(r"\((R|TM)\)", "", model or platform.processor() or platform.machine() or "unknown")
    # A virtual machine may name only the family ("Intel Xeon Processor"): the widest vector unit, and
    # AMX where present (bfloat16 matrix products in tiles rather than vectors), say which kind it is.
    units = ["AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""]
    units.append("AMX" if "amx_tile" in flags else "")
    model = ", ".join([model] + [unit for unit in units if unit])
    native = [flag for flag in BFLOAT16_FLAGS if flag in flags]
    return model, ("yes: " + " ".join(native)) if native else ("no" if flags else "unknown")


def zoo_version() -> str:
    """The `version` of pyproject.toml beside the package, else the installed package's."""
    pyproject = os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml")
    if os.path.isfile(pyproject):
        with open(pyproject) as f:
            found = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.MULTILINE)
        if found:
            return found.group(1)
    from importlib import metadata

    try:
        return metadata.version("deep-rl-zoo")
    except metadata.PackageNotFoundError:
        return "unknown"


def training_speed(rows: Sequence[dict[str, str]]) -> float | None:
    """Training env steps per second over the whole run, from results.csv's `train_steps_per_second` of
    each iteration (the training phases only: evaluation and checkpoints excluded); None without it."""
    seconds, steps, previous = 0.0, 0, 0
    for row in rows:
        step = int(row["train_env_steps"])
        rate = float(row.get("train_steps_per_second") or "nan")
        if not rate > 0:
            return None
        seconds += (step - previous) / rate
        steps += step - previous
        previous = step
    return steps / seconds if seconds > 0 else None


def resume_points(sessions: Sequence[Session], rows: Sequence[dict[str, str]]) -> str:
    """`in iteration 3; in iteration 7`: the iteration each later session (a --resume) started in."""
    points = []
    for session in sessions[1:]:
        iteration = sum(int(r["train_env_steps"]) < session.first_step for r in rows)
        points.append(f"in iteration {iteration}")
    return "; ".join(points) or "none"


def _command_flags(command: str) -> dict[str, str]:
    """`--seed=1 --noshow_progress` -> {"seed": "1", "show_progress": "False"} (the command's flags)."""
    flags = {}
    for word in command.split():
        if not word.startswith("--"):
            continue
        name, sep, value = word[2:].partition("=")
        if not sep:
            name, value = (name[2:], "False") if name.startswith("no") else (name, "True")
        flags[name] = value.strip("'\"")
    return flags


def _same_value(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a.lower() == b.lower()


def check_command(command: str, config: dict[str, list[str]]) -> None:
    """The published command must be the run's: a zoo module, no path of this machine, and every flag it
    gives as one of the run's sessions had it (`config`: each flag's values in config.txt).

    Raises:
      ConfigError: it is not.
    """
    if "deep_rl_zoo." not in command:
        raise ConfigError(
            f"--command must be the zoo command that trained the run (python -m deep_rl_zoo...); got {command!r}"
        )
    found = folders.machine_paths(command)
    if found:
        raise ConfigError(
            f"--command holds a path of this machine ({found[0]!r}): leave out --runs_dir/--checkpoint_dir, or "
            "give them relative"
        )
    for name, value in _command_flags(command).items():
        if name not in config or name in _BOOKKEEPING_FLAGS:
            continue
        if not any(_same_value(given, value) for given in config[name]):
            raise ConfigError(
                f"--command gives --{name}={value} but the run's config.txt has {name}={config[name][-1]}"
            )


def _results_csv_path(run_dir: str, config: dict[str, str]) -> str:
    path = os.path.join(run_dir, folders.RESULTS_CSV)
    if not os.path.isfile(path) and config.get("results_csv_path"):
        path = config["results_csv_path"]  # the run wrote its CSV elsewhere (relative to its cwd)
    if not os.path.isfile(path):
        raise ConfigError(
            f"{run_dir} has no results.csv yet (a run writes it at the end of its first iteration)"
        )
    return path


def _published_config(config_text: str) -> str:
    """config.txt with every absolute path cut to its last part (`runs_dir=/tmp/x/runs` -> `runs_dir=runs`)."""
    lines = []
    for line in config_text.splitlines():
        name, sep, value = line.partition("=")
        lines.append(f"{name}{sep}{folders.strip_machine_path(value)}" if sep else line)
    return "\n".join(lines) + "\n"


def export_run(
    run_dir: str,
    dest: str,
    command: str,
    resume_points_text: str | None = None,
    cpu_model: str | None = None,
    cpu_bfloat16: str | None = None,
    env_steps_per_second: float | None = None,
    replace: bool = False,
) -> dict[str, str]:
    """Writes the published folder `dest` from the run folder `run_dir`; returns command.txt's fields.

    Raises:
      ConfigError: a bad argument or an incomplete run, before anything is written.
    """
    config_path = os.path.join(run_dir, folders.CONFIG_TXT)
    if not os.path.isfile(config_path):
        raise ConfigError(f"{run_dir} is not a run folder (no config.txt)")
    config = folders.read_name_values(config_path)
    expected = folders.published_name(config)
    if os.path.basename(os.path.normpath(dest)) != expected:
        raise ConfigError(
            f"--dest must end in the run's published name {expected}, e.g. results/<suite>/<game>/{expected}"
        )
    if os.path.isdir(dest) and os.listdir(dest) and not replace:
        raise ConfigError(f"{dest} already holds a published run; pass --replace to write it again")
    check_command(command, folders.read_all_name_values(config_path))
    with open(_results_csv_path(run_dir, config), newline="") as f:
        results_text = f.read()
    rows = [r for r in csv.DictReader(io.StringIO(results_text)) if r.get("train_env_steps")]
    if not rows:
        raise ConfigError(f"{run_dir}'s results.csv has no iteration yet")
    events = read_run_events(run_dir, [int(r["train_env_steps"]) for r in rows])
    speed = env_steps_per_second if env_steps_per_second is not None else training_speed(rows)
    model, bfloat16 = cpu_description()
    fields = {
        "command": command.strip(),
        "resume_points": resume_points_text or resume_points(events.sessions, rows),
        "zoo_version": zoo_version(),
        "cpu_model": cpu_model or model,
        "cpu_native_bfloat16": cpu_bfloat16 or (bfloat16 if cpu_model is None else "unknown"),
        "env_steps": f"{int(rows[-1]['train_env_steps']):,}",
        "env_steps_per_second": f"{speed:.0f}" if speed is not None else "unknown",
        "wall_time_hours": f"{sum(s.seconds for s in events.sessions) / 3600:.3g}",
    }
    with open(config_path) as f:
        config_text = _published_config(f.read())
    texts = {
        folders.CONFIG_TXT: config_text,
        folders.RESULTS_CSV: results_text,
        folders.COMMAND_TXT: "".join(f"{name}={value}\n" for name, value in fields.items()),
        folders.EPISODES_CSV: folders.episodes_text(events.episodes),
    }
    if events.learner:
        texts[folders.LEARNER_CSV] = folders.learner_text(events.learner)
    for name, text in texts.items():
        found = folders.machine_paths(text)
        if found:
            raise ConfigError(
                f"the run's {name} holds a path of this machine ({found[0]!r}); nothing written"
            )
    size = sum(len(text.encode()) for text in texts.values())
    if size > folders.MAX_FOLDER_BYTES:
        raise ConfigError(
            f"{dest} would take {size:,} bytes, over the {folders.MAX_FOLDER_BYTES:,} a published run may"
        )
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    for name, text in texts.items():
        with open(os.path.join(dest, name), "w", newline="") as f:
            f.write(text)
    return fields
