"""Learning curves from run folders, as a PNG:

    python -m deep_rl_zoo.plot runs/DQN_CartPole-v1 runs/DQN_CartPole-v1-2 --output=curve.png
    python -m deep_rl_zoo.plot runs/ --metric=learner/loss          # every run under runs/

What it reads is what every run writes into its folder: `results.csv` (one row per iteration) and, unless
the run had `--nouse_tensorboard`, TensorBoard event files (every training episode, learner statistics).
A published run under `results/` has `episodes.csv` (every training episode) and, where the run logged
learner statistics, `learner.csv` (them, averaged over spans of the run) instead of event files:

    python -m deep_rl_zoo.plot results/atari/Pong --output=docs/images/pong.png   # every run below it

A game's folder may hold `references.txt` (`random play=-20.7  # source`): its scores are drawn as lines,
like `--reference`.
A metric is a TensorBoard tag (`eval/mean_episode_return`, `train/episode_return`, `learner/loss`); the
CSV's columns count too, under the same names (`learner_loss` -> `learner/loss`), so runs without
TensorBoard can still be drawn. The x-axis is always training env steps.

Runs whose `config.txt` differ only by seed (or by bookkeeping flags such as folders and `--tag`) form
one curve: the mean over the runs, with a band from the lowest to the highest run (`--band=std`: mean
+- one standard deviation). A run that stopped early (solved, or interrupted) leaves the mean where it
ends; from there the curve is dashed, as fewer runs make it up.
"""

import argparse
import csv
import math
import os
import sys
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from deep_rl_zoo.errors import ConfigError, exit_on_error
from deep_rl_zoo.results import folders

DEFAULT_METRICS = ("eval/mean_episode_return", "train/episode_return")
# A metric a run may lack, and what stands in for it: without TensorBoard only the CSV's per-iteration
# training mean exists.
FALLBACK_METRICS = {"train/episode_return": "train/mean_episode_return"}
# Flags that do not change what is learned: runs differing only in these are seeds of one experiment.
NOT_EXPERIMENT_FLAGS = frozenset(
    {
        "seed",
        "tag",
        "num_iterations",
        "resume",
        "stop_when_solved",
        "target_return",
        "checkpoint_dir",
        "results_csv_path",
        "use_tensorboard",
        "runs_dir",
        "debug_screenshots_interval",
        "device",
        "num_threads",
        "show_progress",
        "actors_on_gpu",
        # How actors are kept alive and where they run: the same learning whatever their values.
        "checkpoint_replay",
        "max_actor_restarts",
        "actor_timeout",
        "backend",
        "ray_address",
        "ray_actor_resource",
    }
)
MAX_RUNS_DRAWN = 5  # groups of up to this many runs also show each run as a thin line
_TITLES = {
    "eval/mean_episode_return": "evaluation return (mean per iteration)",
    "train/episode_return": "training return (per episode)",
    "train/mean_episode_return": "training return (mean per iteration)",
    "train/episode_rooms": "rooms visited (per training episode)",
    "train/episode_length": "episode length, env steps (per training episode)",
}


class Series(NamedTuple):
    steps: np.ndarray  # [N] training env steps, increasing
    values: np.ndarray  # [N]


class Run(NamedTuple):
    path: str
    name: str  # the folder's name, e.g. DQN_CartPole-v1-2
    agent_name: str
    config: dict[str, str]  # flag -> value as written in config.txt (the last value after resumes)
    metrics: dict[str, Series]


class Curve(NamedTuple):
    """One line of a panel: the mean over the runs of a group, the band around it, and the runs."""

    label: str  # the group and, where more than one run is averaged, their count
    group: str  # the group alone: its colour, the same in every panel whatever the count there
    run_names: list[str]
    steps: np.ndarray  # [N]
    mean: np.ndarray  # [N]
    low: np.ndarray  # [N] lower edge of the band (the mean itself for a single run)
    high: np.ndarray  # [N]
    count: np.ndarray  # [N] int, runs that have data at each step
    runs: list[Series]  # each run's series as averaged (smoothed if per-episode)
    # A single run's evaluation means: its lowest and highest evaluation episode at each step, if logged
    episode_spread: tuple[np.ndarray, np.ndarray] | None = None


class Panel(NamedTuple):
    metric: str
    title: str
    curves: list[Curve]


# --- Reading run folders ---


def read_config(run_dir: str) -> dict[str, str]:
    """`config.txt`'s `name=value` lines; a resumed run appended them again, so the last value wins."""
    config: dict[str, str] = {}
    path = os.path.join(run_dir, "config.txt")
    if os.path.isfile(path):
        with open(path) as f:
            for line in f:
                name, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    config[name] = value
    return config


def _csv_metric_name(column: str) -> str:
    """`eval_mean_episode_return` -> `eval/mean_episode_return`, `learner_loss` -> `learner/loss`."""
    prefix, _, rest = column.partition("_")
    return f"{prefix}/{rest}" if rest else column


def _to_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def read_results_csv(path: str) -> dict[str, Series]:
    """Every numeric column of a results CSV, against its `train_env_steps` column."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    rows = [r for r in rows if r.get("train_env_steps")]
    if not rows:
        return {}
    rows.sort(key=lambda r: int(r["train_env_steps"]))
    steps = np.array([int(r["train_env_steps"]) for r in rows], dtype=np.int64)
    metrics = {}
    for column in rows[0]:
        if column in ("iteration", "train_env_steps"):
            continue
        values = np.array([_to_float(r.get(column) or "") for r in rows])
        if not np.all(np.isnan(values)):
            metrics[_csv_metric_name(column)] = Series(steps, values)
    return metrics


def _has_event_files(run_dir: str) -> bool:
    return any(name.startswith("events.out.tfevents") for name in os.listdir(run_dir))


def read_tensorboard(run_dir: str) -> dict[str, Series]:
    """Every scalar tag of the run's TensorBoard event files (all of them, after resumes), in step order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # slow import

    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0})  # 0: keep every point
    accumulator.Reload()
    metrics = {}
    for tag in accumulator.Tags().get("scalars", []):
        events = accumulator.Scalars(tag)
        steps = np.array([e.step for e in events], dtype=np.int64)
        order = np.argsort(steps, kind="stable")
        metrics[tag] = Series(steps[order], np.array([e.value for e in events], dtype=np.float64)[order])
    return metrics


def read_run(run_dir: str) -> Run:
    """Reads one run folder: TensorBoard scalars and results.csv columns (TensorBoard wins on a name).

    Raises:
      ConfigError: the folder does not exist or holds no logs yet.
    """
    if not os.path.isdir(run_dir):
        raise ConfigError(f"{run_dir} is not a folder")
    config = read_config(run_dir)
    csv_path = os.path.join(run_dir, "results.csv")
    if not os.path.isfile(csv_path) and config.get("results_csv_path"):
        csv_path = config["results_csv_path"]  # the run wrote its CSV elsewhere (relative to its cwd)
    metrics = read_results_csv(csv_path) if os.path.isfile(csv_path) else {}
    if _has_event_files(run_dir):
        metrics.update(read_tensorboard(run_dir))
    elif os.path.isfile(os.path.join(run_dir, folders.EPISODES_CSV)):  # a published run (results/)
        episodes = folders.read_episodes(os.path.join(run_dir, folders.EPISODES_CSV))
        metrics["train/episode_return"] = Series(episodes.steps, episodes.returns)
        metrics["train/episode_length"] = Series(episodes.steps, episodes.lengths.astype(np.float64))
        if episodes.rooms is not None:
            metrics["train/episode_rooms"] = Series(episodes.steps, episodes.rooms.astype(np.float64))
        learner_path = os.path.join(run_dir, folders.LEARNER_CSV)
        if os.path.isfile(learner_path):  # between iterations too, where results.csv has their last steps
            for name, series in read_results_csv(learner_path).items():
                present = ~np.isnan(series.values)  # an empty cell: no point of it in that span
                metrics[name] = Series(series.steps[present], series.values[present])
    if not metrics:
        raise ConfigError(
            f"{run_dir} holds no results.csv row and no TensorBoard scalar yet (a run writes them at the end "
            "of its first iteration)"
        )
    name = os.path.basename(os.path.normpath(run_dir))
    agent_name = config.get("agent_name") or name.split("_", 1)[0]  # folders are <AGENT>_<env>[_<tag>]
    return Run(run_dir, name, agent_name, config, metrics)


def _is_run_folder(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "results.csv")) or os.path.isfile(
        os.path.join(path, "config.txt")
    )


def expand_run_folders(paths: Sequence[str]) -> list[str]:
    """Run folders as given; any other folder (`runs/`, `results/atari/`) stands for every run folder below
    it, at any depth."""
    expanded = []
    for path in paths:
        if os.path.isdir(path) and not _is_run_folder(path):
            below = sorted(
                directory
                for directory, _, _ in os.walk(path)
                if directory != path and _is_run_folder(directory)
            )
            if below:
                expanded.extend(below)
                continue
        expanded.append(path)
    return expanded


def folder_references(
    runs: Sequence[Run], given: Sequence[tuple[str, float]] = ()
) -> list[tuple[str, float]]:
    """The scores of `references.txt` in the folders holding the runs (a published game's folder), once
    each, then the `given` ones (--reference), which replace a file's score of the same label.

    Raises:
      ConfigError: more lines than `REFERENCE_STYLES` can draw.
    """
    labels = {label for label, _ in given}
    references: list[tuple[str, float]] = []
    for game_dir in dict.fromkeys(os.path.dirname(os.path.abspath(run.path)) for run in runs):
        references += [
            r for r in folders.read_references(game_dir) if r not in references and r[0] not in labels
        ]
    references += given
    if len(references) > len(REFERENCE_STYLES):
        raise ConfigError(
            f"at most {len(REFERENCE_STYLES)} reference lines, got {len(references)} (--reference and the runs' "
            "references.txt)"
        )
    return references


# --- Grouping seeds and averaging ---


def experiment_key(run: Run) -> tuple:
    """What a run's curve is grouped by: its agent and every flag that changes what is learned."""
    flags = tuple(
        sorted((k, v) for k, v in run.config.items() if k not in NOT_EXPERIMENT_FLAGS | {"agent_name"})
    )
    return (run.agent_name, flags)


def group_runs(runs: Sequence[Run]) -> list[list[Run]]:
    """Runs that differ only by seed (and bookkeeping flags), in the order their first run was given."""
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault(experiment_key(run), []).append(run)
    return list(groups.values())


def group_labels(groups: Sequence[Sequence[Run]], max_flags: int = 3) -> list[str]:
    """`DQN CartPole-v1`, plus the flags in which it differs from the other groups of the same agent and
    environment (`learning_rate=0.00045`); at most `max_flags` of them, then `...`."""
    keys = [dict(experiment_key(g[0])[1]) for g in groups]
    titles = [
        f"{g[0].agent_name} {k.get('environment_name', '')}".strip()
        for g, k in zip(groups, keys, strict=True)
    ]
    labels = []
    for title, key in zip(titles, keys, strict=True):
        siblings = [other for other, other_title in zip(keys, titles, strict=True) if other_title == title]
        differing = sorted(
            name for name in set().union(*siblings) if len({sibling.get(name) for sibling in siblings}) > 1
        )
        flags = [f"{name}={key.get(name, '-')}" for name in differing[:max_flags]]
        if len(differing) > max_flags:
            flags.append("...")
        labels.append(f"{title} ({', '.join(flags)})" if flags else title)
    return labels


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of each value and the `window - 1` before it (fewer at the start): [1, 2, 3, 4], 2 -> [1, 1.5, 2.5, 3.5]."""
    if window <= 1 or len(values) == 0:
        return values
    sums = np.concatenate([[0.0], np.cumsum(values)])
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def average_runs(series: Sequence[Series], band: str) -> tuple[np.ndarray, ...]:
    """Mean, band and count of several runs' series on the union of their steps.

    Each run is linearly interpolated between its own points and counts only inside its own range, so a
    run that stopped early does not drag the mean to its last value.

    Returns:
      steps [N], mean [N], low [N], high [N], count [N] (runs with data at each step).
    """
    steps = np.unique(np.concatenate([s.steps for s in series]))
    table = np.full((len(series), len(steps)), np.nan)
    for row, s in enumerate(series):
        finite = ~np.isnan(s.values)
        if not finite.any():
            continue
        xs, ys = s.steps[finite], s.values[finite]
        inside = (steps >= xs[0]) & (steps <= xs[-1])
        table[row, inside] = np.interp(steps[inside], xs, ys)
    count = np.sum(~np.isnan(table), axis=0)
    keep = count > 0
    table, steps, count = table[:, keep], steps[keep], count[keep]
    mean = np.nanmean(table, axis=0)
    if band == "std":
        std = np.nanstd(table, axis=0)  # population std of the runs at each step
        low, high = mean - std, mean + std
    else:
        low, high = np.nanmin(table, axis=0), np.nanmax(table, axis=0)
    return steps, mean, low, high, count


def resolve_metric(metric: str, runs: Sequence[Run]) -> str:
    """The name as logged: `learner/loss`, also when typed as the CSV column `learner_loss`."""
    if any(metric in run.metrics for run in runs):
        return metric
    alternative = _csv_metric_name(metric) if "/" not in metric else metric
    if any(alternative in run.metrics for run in runs) or any(
        FALLBACK_METRICS.get(alternative) in run.metrics for run in runs
    ):
        return alternative
    available = sorted(set().union(*(run.metrics for run in runs)))
    shown = ", ".join(available[:25]) + (", ..." if len(available) > 25 else "")
    raise ConfigError(f"no run logged the metric {metric!r}; logged: {shown}")


def build_panels(
    runs: Sequence[Run], metrics: Sequence[str], band: str = "minmax", smooth: int = 20, group: bool = True
) -> list[Panel]:
    """One panel per metric, one curve per group of seeds (or per run with `group=False`).

    Per-episode series (`train/episode_return`, ...) are smoothed by a moving average over `smooth`
    episodes before averaging; means per iteration and learner statistics are drawn as logged.
    """
    groups = group_runs(runs) if group else [[run] for run in runs]
    labels = group_labels(groups) if group else [run.name for run in runs]
    panels = []
    for requested in metrics:
        metric = resolve_metric(requested, runs)
        curves = []
        used_names = set()
        for label, members in zip(labels, groups, strict=True):
            series = []
            names = []
            for run in members:
                name = metric if metric in run.metrics else FALLBACK_METRICS.get(metric)
                if name not in run.metrics:
                    continue
                used_names.add(name)
                s = run.metrics[name]
                finite = np.isfinite(s.values)  # e.g. the loss before learning starts
                s = Series(s.steps[finite], s.values[finite])
                if len(s.steps) == 0:
                    continue
                if _is_per_episode(name):
                    s = Series(s.steps, moving_average(s.values, smooth))
                series.append(s)
                names.append(run.name)
            if not series:
                continue
            steps, mean, low, high, count = average_runs(series, band)
            runs_text = f", {len(series)} runs" if len(series) > 1 else ""
            spread = _episode_spread(members[0], metric, steps) if len(series) == 1 else None
            curves.append(
                Curve(label + runs_text, label, names, steps, mean, low, high, count, series, spread)
            )
        title = " / ".join(_title(name, smooth) for name in sorted(used_names))
        panels.append(Panel(metric, title, curves))
    return panels


def _episode_spread(run: Run, metric: str, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """For `<phase>/mean_episode_return` of one run: its lowest and highest episode return at each of
    `steps` (`<phase>/min_episode_return`, `<phase>/max_episode_return`), or None where not logged (runs
    written before the spread was)."""
    phase, _, name = metric.rpartition("/")
    if name != "mean_episode_return":
        return None
    edges = [run.metrics.get(f"{phase}/{edge}_episode_return") for edge in ("min", "max")]
    if any(edge is None for edge in edges):
        return None
    low, high = (dict(zip(edge.steps.tolist(), edge.values.tolist(), strict=True)) for edge in edges)
    return (
        np.array([low.get(step, math.nan) for step in steps.tolist()]),
        np.array([high.get(step, math.nan) for step in steps.tolist()]),
    )


def _is_per_episode(name: str) -> bool:
    """One point per training episode (`train/episode_return`, `actor_3/episode_length`): noisy enough to
    smooth. Means per iteration and learner statistics (a schedule such as epsilon would be bent) are not."""
    return not name.startswith("eval/") and name.rsplit("/", 1)[-1] in (
        "episode_return",
        "episode_length",
        "episode_rooms",
    )


def _title(name: str, smooth: int) -> str:
    title = _TITLES.get(name, name)
    if smooth > 1 and _is_per_episode(name):
        title += f", moving average of {smooth}"
    return title


# --- Drawing ---


def _reward_threshold(runs: Sequence[Run]) -> float | None:
    """The environment's "solved" return if all runs share one environment that has it (CartPole-v1: 475)."""
    names = {run.config.get("environment_name") for run in runs}
    if len(names) != 1 or None in names:
        return None
    try:
        import gymnasium as gym

        return gym.spec(names.pop()).reward_threshold
    except Exception:  # an Atari short name or a renamed id: no line, nothing else lost
        return None


REFERENCE_STYLES = ("--", "-.", ":")  # one line style per --reference, so at most three


def parse_references(values: Sequence[str]) -> list[tuple[str, float]]:
    """`--reference LABEL=VALUE` flags as (label, value) pairs, e.g. "random play=1.7" (a published
    baseline score to compare a curve against)."""
    if len(values) > len(REFERENCE_STYLES):
        raise ConfigError(f"at most {len(REFERENCE_STYLES)} --reference lines, got {len(values)}")
    references = []
    for text in values:
        label, sep, value = text.rpartition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not label.strip() or not math.isfinite(number):
            raise ConfigError(f'--reference must be LABEL=NUMBER, e.g. "random play=1.7"; got {text!r}')
        references.append((label.strip(), number))
    return references


def draw(
    panels: Sequence[Panel],
    output: str,
    band: str,
    threshold: float | None = None,
    references: Sequence[tuple[str, float]] = (),
) -> None:
    """Writes the panels side by side into `output` (PNG, SVG or PDF, by its extension); `references`
    are dashed horizontal lines on every episode-return panel."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    figure, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.4), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color_of: dict[str, str] = {}
    any_band, any_partial, any_episode_band = False, False, False
    for axis, panel in zip(axes[0], panels, strict=True):
        for curve in panel.curves:
            color = color_of.setdefault(curve.group, colors[len(color_of) % len(colors)])
            full = curve.count == curve.count.max()
            # Solid where every run of the group has data, dashed where fewer do (the others stopped).
            # A dot at each evaluation: a mean per iteration may have a single point.
            marker = "o" if panel.metric.endswith("/mean_episode_return") else None
            axis.plot(
                curve.steps,
                np.where(full, curve.mean, np.nan),
                color=color,
                label=curve.label,
                lw=1.8,
                marker=marker,
                ms=3.5,
            )
            if curve.episode_spread is not None:
                any_episode_band = True
                low, high = curve.episode_spread  # a bar per evaluation: one evaluation is a point
                axis.vlines(curve.steps, low, high, color=color, lw=1.0, alpha=0.6)
                axis.plot(curve.steps, low, color=color, ls="none", marker="_", ms=8, alpha=0.8)
                axis.plot(curve.steps, high, color=color, ls="none", marker="_", ms=8, alpha=0.8)
            if not full.all():
                any_partial = True
                partial = ~full
                partial[:-1] |= ~full[1:]  # join the dashed part to the solid one
                axis.plot(curve.steps, np.where(partial, curve.mean, np.nan), color=color, ls="--", lw=1.2)
            if len(curve.run_names) > 1:
                any_band = True
                axis.fill_between(curve.steps, curve.low, curve.high, color=color, alpha=0.15, lw=0)
                if len(curve.runs) <= MAX_RUNS_DRAWN:
                    for run in curve.runs:  # thin: where each run went, and where it stopped
                        axis.plot(run.steps, run.values, color=color, lw=0.6, alpha=0.5)
        if panel.metric.endswith("episode_return"):
            if threshold is not None:
                axis.axhline(threshold, color="grey", ls=":", lw=1.2, label=f"solved: {threshold:g}")
            for (label, value), style in zip(references, REFERENCE_STYLES, strict=False):
                axis.axhline(value, color="black", ls=style, lw=1.0, alpha=0.7, label=f"{label}: {value:g}")
        axis.set_title(panel.title, fontsize=10)
        axis.set_xlabel("training env steps")
        axis.xaxis.set_major_formatter(FuncFormatter(_thousands))
        axis.grid(alpha=0.3)
    notes = []
    if any_band:
        notes.append(
            "thick line: mean over runs; band: "
            + ("mean +- std" if band == "std" else "lowest to highest run")
            + f"; thin lines: single runs (groups of up to {MAX_RUNS_DRAWN})"
        )
    if any_episode_band:
        notes.append("bars on a single run's evaluations: its lowest to highest episode")
    if any_partial:
        notes.append("dashed: after some runs stopped (solved or ended)")
    # The legend goes under the panels, not on one: with a few long labels, loc="best" still covers curves.
    handles, labels = axes[0][0].get_legend_handles_labels()
    notes_inches = 0.25 if notes else 0.0
    legend_inches = 0.2 * len(labels) + 0.1
    height = figure.get_figheight() + legend_inches + notes_inches
    figure.set_figheight(height)
    figure.legend(
        handles,
        labels,
        fontsize=8,
        loc="lower center",
        bbox_to_anchor=(0.5, notes_inches / height),
        frameon=False,
    )
    if notes:
        figure.text(0.5, 0.005, "; ".join(notes), ha="center", va="bottom", fontsize=8, color="dimgrey")
    figure.tight_layout(rect=(0, (legend_inches + notes_inches) / height, 1, 1))
    directory = os.path.dirname(os.path.abspath(output))
    os.makedirs(directory, exist_ok=True)
    figure.savefig(output, dpi=110)
    plt.close(figure)


def _thousands(x: float, _position: int) -> str:
    if abs(x) >= 1e6:
        return f"{x / 1e6:g}M"
    if abs(x) >= 1e3:
        return f"{x / 1e3:g}k"
    return f"{x:g}"


# --- Command line ---


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m deep_rl_zoo.plot",
        description="Draws learning curves (against training env steps) from run folders into an image.",
    )
    parser.add_argument("run_dirs", nargs="+", help="run folders, e.g. runs/DQN_CartPole-v1; runs/ means all")
    parser.add_argument("--output", default="curves.png", help="image to write (.png, .svg or .pdf)")
    parser.add_argument(
        "--metric",
        action="append",
        help="a logged statistic to draw (repeat or comma-separate for several panels), e.g. learner/loss; "
        f"default: {', '.join(DEFAULT_METRICS)}",
    )
    parser.add_argument(
        "--band", choices=("minmax", "std"), default="minmax", help="band around a mean over seeds"
    )
    parser.add_argument("--smooth", type=int, default=20, help="moving average of per-episode curves; 1: off")
    parser.add_argument(
        "--nogroup", action="store_true", help="one curve per run instead of per group of seeds"
    )
    parser.add_argument(
        "--reference",
        action="append",
        default=[],
        help="a score to draw as a dashed line on the return panels, LABEL=NUMBER (repeatable, up to 3), "
        'e.g. "random play=1.7"; a published game\'s references.txt adds its own (a flag with the same '
        "label wins)",
    )
    return parser.parse_args(argv)


@exit_on_error
def main(argv: Sequence[str] | None = None) -> list[Panel]:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.smooth < 1:
        raise ConfigError(f"--smooth must be >= 1, got {args.smooth}")
    references = parse_references(args.reference)
    metrics = [m.strip() for value in (args.metric or DEFAULT_METRICS) for m in value.split(",") if m.strip()]
    runs = [read_run(path) for path in expand_run_folders(args.run_dirs)]
    references = folder_references(runs, references)
    panels = build_panels(runs, metrics, band=args.band, smooth=args.smooth, group=not args.nogroup)
    draw(panels, args.output, args.band, threshold=_reward_threshold(runs), references=references)
    curves = sum(len(p.curves) for p in panels)  # a metric only some runs have draws fewer in its panel
    print(f"wrote {args.output}: {len(panels)} panel(s), {curves} curve(s) in all from {len(runs)} run(s)")
    return panels


if __name__ == "__main__":
    main()
