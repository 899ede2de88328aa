"""One published run folder under `results/`: its files, their formats, and what makes it publishable."""

import csv
import io
import os
import re
from typing import NamedTuple

import numpy as np

from deep_rl_zoo.errors import ConfigError

CONFIG_TXT = "config.txt"
RESULTS_CSV = "results.csv"
EPISODES_CSV = "episodes.csv"
COMMAND_TXT = "command.txt"
FILES = (CONFIG_TXT, RESULTS_CSV, EPISODES_CSV, COMMAND_TXT)
REFERENCES_TXT = "references.txt"  # in the game's folder, beside its runs: scores to compare against
EPISODES_COLUMNS = ("train_env_steps", "episode_return", "episode_length")
MAX_FOLDER_BYTES = 1_000_000
# A path of this machine: `/home/...`, `/tmp/x/`, `~/...`, `C:\...`, at the start of a value or after a
# separator (`ALE/Pong-v5` is no path: its slash follows a letter).
_MACHINE_PATH = re.compile(r"""(?:^|[\s=:'"(,])(/[\w.+-]+/|/[\w.+-]+$|~/|[A-Za-z]:\\)""", re.MULTILINE)


class Episodes(NamedTuple):
    """Every whole training episode of a run, in the order they ended."""

    steps: np.ndarray  # [N] int, training env steps when the episode ended
    returns: np.ndarray  # [N] raw (unclipped) game score
    lengths: np.ndarray  # [N] int, env steps
    rooms: np.ndarray | None = None  # [N] int, rooms visited, on games that count them (Montezuma)


ROOMS_COLUMN = "episode_rooms"  # a fourth column of episodes.csv where the run counted rooms
LEARNER_CSV = "learner.csv"  # optional: the learner's statistics between iterations (`learner_text`)
LEARNER_ROWS = 200  # at most: a run's learner steps are averaged over this many spans of env steps


def learner_text(learner: dict[str, tuple[np.ndarray, np.ndarray]], rows: int = LEARNER_ROWS) -> str:
    """`learner.csv`: the learner's TensorBoard scalars (`learner/<name>`, logged every learner step or
    every few), each averaged over `rows` equal spans of training env steps, so that a published run
    redraws how they moved within an iteration without its event files (results.csv holds one value per
    iteration: the last learner step's). Columns `train_env_steps` (each span's end, the run's last step
    for the last) and `learner_<name>`; a cell is empty where a statistic had no point in the span.
    """
    if not learner:
        return ""
    last = max(int(steps.max()) for steps, _ in learner.values() if len(steps))
    width = max(1, -(-last // rows))  # ceil: every step up to `last` falls in one of `rows` spans
    spans = -(-last // width) or 1
    names = sorted(learner)
    means = {}
    for name in names:
        steps, values = learner[name]
        index = np.clip((np.asarray(steps) - 1) // width, 0, spans - 1)  # span k holds steps (k w, (k + 1) w]
        totals = np.bincount(index, weights=np.asarray(values, dtype=np.float64), minlength=spans)
        counts = np.bincount(index, minlength=spans)
        means[name] = np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["train_env_steps"] + [f"learner_{name.removeprefix('learner/')}" for name in names])
    for k in range(spans):
        cells = [means[name][k] for name in names]
        if all(np.isnan(cells)):
            continue
        writer.writerow([min((k + 1) * width, last)] + ["" if np.isnan(v) else f"{v:.6g}" for v in cells])
    return out.getvalue()


def episodes_text(episodes: Episodes) -> str:
    """`episodes.csv`: a header of `EPISODES_COLUMNS` (and `ROOMS_COLUMN` where rooms were counted), then
    one line per episode."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    columns = [episodes.steps.tolist(), episodes.returns.tolist(), episodes.lengths.tolist()]
    header = list(EPISODES_COLUMNS)
    if episodes.rooms is not None:
        columns.append(episodes.rooms.tolist())
        header.append(ROOMS_COLUMN)
    writer.writerow(header)
    for step, value, *counts in zip(*columns, strict=True):
        writer.writerow([step, f"{value:g}", *counts])
    return out.getvalue()


def read_episodes(path: str) -> Episodes:
    """`episodes.csv` as `episodes_text` writes it.

    Raises:
      ConfigError: the file lacks one of `EPISODES_COLUMNS`.
    """
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in EPISODES_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(
                f"{path} has no column {', '.join(missing)} (expected {','.join(EPISODES_COLUMNS)})"
            )
        has_rooms = ROOMS_COLUMN in (reader.fieldnames or [])
        rows = list(reader)
    return Episodes(
        np.array([int(r["train_env_steps"]) for r in rows], dtype=np.int64),
        np.array([float(r["episode_return"]) for r in rows], dtype=np.float64),
        np.array([int(r["episode_length"]) for r in rows], dtype=np.int64),
        np.array([int(r[ROOMS_COLUMN]) for r in rows], dtype=np.int64) if has_rooms else None,
    )


def read_name_values(path: str) -> dict[str, str]:
    """`name=value` lines (config.txt, command.txt); a name written again (a resume) takes the last value."""
    return {name: values[-1] for name, values in read_all_name_values(path).items()}


def read_all_name_values(path: str) -> dict[str, list[str]]:
    """`name=value` lines, each name with every value it was given (config.txt: once per session)."""
    values: dict[str, list[str]] = {}
    with open(path) as f:
        for line in f:
            name, sep, value = line.rstrip("\n").partition("=")
            if sep:
                values.setdefault(name, []).append(value)
    return values


def read_references(game_dir: str) -> list[tuple[str, float]]:
    """`references.txt` of a game's folder: `LABEL=NUMBER` lines, each with its source after `#`, e.g.
    `random play=-20.7  # Mnih et al. 2015, Extended Data Table 2`; [] without the file.

    Raises:
      ConfigError: a line is not `LABEL=NUMBER`.
    """
    path = os.path.join(game_dir, REFERENCES_TXT)
    if not os.path.isfile(path):
        return []
    references = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            label, sep, value = text.rpartition("=")
            try:
                references.append((label.strip(), float(value)))
            except ValueError:
                sep = ""
            if not sep or not label.strip():
                raise ConfigError(
                    f'{path}:{number}: expected LABEL=NUMBER, e.g. "random play=-20.7"; got {text!r}'
                )
    return references


def published_name(config: dict[str, str]) -> str:
    """A published run's folder name, `<AGENT>_<env>[_<tag>]_s<seed>`, from its `config.txt`."""
    from deep_rl_zoo import checkpoint  # imports torch: only when a name is needed, not for plotting

    name = checkpoint.run_name(config["agent_name"], config["environment_name"], config.get("tag", ""))
    return f"{name}_s{config['seed']}"


def find_published(results_root: str) -> list[str]:
    """Every folder under `results_root` (at any depth) holding one of a published run's files, sorted."""
    found = []
    for directory, subdirectories, names in os.walk(results_root):
        subdirectories.sort()
        if any(name in FILES for name in names):
            found.append(directory)
    return sorted(found)


def machine_paths(text: str) -> list[str]:
    """The paths of some machine in `text` (`/tmp/x/runs`, `~/runs`), as found."""
    return [m.group(1) for m in _MACHINE_PATH.finditer(text)]


def strip_machine_path(value: str) -> str:
    """An absolute path cut to its last part (`/tmp/x/runs` -> `runs`); any other value unchanged."""
    if value.startswith(("/", "~")) or re.match(r"[A-Za-z]:\\", value):
        return os.path.basename(os.path.normpath(value.replace("\\", "/"))) or "."
    return value


def folder_problems(folder: str) -> list[str]:
    """Why `folder` is not a publishable run folder (missing files, too big, a machine path): [] if it is."""
    problems = [f"{folder}: no {name}" for name in FILES if not os.path.isfile(os.path.join(folder, name))]
    size = 0
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        size += os.path.getsize(path)
        with open(path, errors="replace") as f:
            found = machine_paths(f.read())
        if found:
            problems.append(f"{path}: a path of some machine ({found[0]!r}); publish relative paths only")
    if size > MAX_FOLDER_BYTES:
        problems.append(f"{folder}: {size:,} bytes, over the {MAX_FOLDER_BYTES:,} a published run may take")
    config_path = os.path.join(folder, CONFIG_TXT)
    if os.path.isfile(config_path):
        config = read_name_values(config_path)
        if {"agent_name", "environment_name", "seed"} <= config.keys():
            expected = published_name(config)
            if os.path.basename(os.path.normpath(folder)) != expected:
                problems.append(f"{folder}: its config.txt says the folder is named {expected}")
    return problems
