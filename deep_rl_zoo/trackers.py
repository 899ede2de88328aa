"""Statistics of a run: per-phase episode statistics, TensorBoard, CSV results and screenshots.

Episode statistics come only from `info["episode"]`, which `gym_env` adds when a whole game ends, so
a lost life never counts as an episode and returns are the raw (unclipped) game scores. It comes with
the game's last timestep, or, on the vector Atari path, with the next game's `first` timestep when the
game ended on a step no agent took (`vector_env`, item 3): `finished_game` reads both. Every x-axis
is the number of training env steps taken so far.
"""

import csv
import math
import os
import sys
import time
from collections.abc import Callable, Mapping

import numpy as np

from deep_rl_zoo.types_ import TimeStep


def finished_game(timestep: TimeStep) -> dict | None:
    """The whole game this timestep reports as ended (`info["episode"]`: raw return and length in env
    steps), as `{"episode_return", "episode_length"}` and, on games that count them
    (`gym_env.RoomsVisited`), `"episode_rooms"`; or None."""
    episode = timestep.info.get("episode")
    if episode is None:
        return None
    game = {
        "episode_return": float(np.asarray(episode["r"])),
        "episode_length": int(np.asarray(episode["l"])),
    }
    if "rooms" in episode:
        game["episode_rooms"] = int(episode["rooms"])
    return game


class PhaseStats:
    """Counts env steps and whole episodes during one phase (training or evaluation) of an iteration."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.num_steps = 0
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []
        self.current_return = 0.0  # raw return so far of the episode still running
        self.current_length = 0  # env steps so far of the episode still running
        self._start_time = time.perf_counter()

    def step(self, timestep: TimeStep) -> dict | None:
        """Records one timestep: an env step unless it is `first` (a reset), and the whole game it
        reports as ended, if any (`finished_game`); returns that game's summary or None."""
        if not timestep.first:
            self.num_steps += 1
            self.current_return += float(timestep.reward)
            self.current_length += 1
        game = finished_game(timestep)
        if game is None:
            return None
        self.episode_returns.append(game["episode_return"])
        self.episode_lengths.append(game["episode_length"])
        if not timestep.first:  # else the next game has started: nothing of it is counted yet
            self.current_return, self.current_length = 0.0, 0
        return game

    @property
    def steps_per_second(self) -> float:
        return self.num_steps / max(time.perf_counter() - self._start_time, 1e-9)

    def summary(self) -> dict[str, float]:
        """Means over the whole episodes of this phase, and the spread of their returns (the lowest, the
        highest and the population standard deviation): NaN if none ended."""
        returns = self.episode_returns
        return {
            "num_episodes": len(returns),
            "mean_episode_return": float(np.mean(returns)) if returns else math.nan,
            "min_episode_return": float(np.min(returns)) if returns else math.nan,
            "max_episode_return": float(np.max(returns)) if returns else math.nan,
            "std_episode_return": float(np.std(returns)) if returns else math.nan,
            "mean_episode_length": float(np.mean(self.episode_lengths)) if returns else math.nan,
            "steps_per_second": self.steps_per_second,
            "num_steps": self.num_steps,
        }


# `main(config, on_log=...)`'s callback: (namespace, scalars, env step), e.g. ("train", {"episode_return":
# 200.0, "episode_length": 312}, 41000), every time the run logs scalars (docs/python_api.md lists them).
LogCallback = Callable[[str, dict[str, float], int], None]


class RunLogger:
    """Writes TensorBoard scalars and images, the CSV results file and debug screenshots of one run, and
    hands every group of scalars to `on_log` (a notebook's live plots), whether TensorBoard is on or not."""

    def __init__(
        self,
        run_dir: str,
        use_tensorboard: bool,
        results_csv_path: str,
        debug_screenshots_interval: int = 0,
        screenshot_dir: str | None = None,
        on_log: LogCallback | None = None,
    ):
        """
        Args:
          on_log: called as `on_log(prefix, values, step)` by every `scalars` call, with a copy of the values.
          screenshot_dir: where debug screenshots go; default `<run_dir>/screenshots`, next to the run's
            other logs.
        """
        self.run_dir = run_dir
        self.results_csv_path = results_csv_path
        self.debug_screenshots_interval = debug_screenshots_interval
        self.screenshot_dir = screenshot_dir or os.path.join(run_dir, "screenshots")
        self._csv_columns: list[str] | None = None  # the header of results_csv_path, once known
        self._csv_dropped: set[str] = set()  # keys already warned about
        self._on_log = on_log
        self._writer = None
        if use_tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # imported lazily: it is slow to import

            os.makedirs(run_dir, exist_ok=True)
            self._writer = SummaryWriter(log_dir=run_dir)

    def scalars(self, prefix: str, values: Mapping[str, float], step: int) -> None:
        if self._on_log is not None:
            self._on_log(prefix, dict(values), step)
        if self._writer is None:
            return
        for key, value in values.items():
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                self._writer.add_scalar(f"{prefix}/{key}", float(value), step)

    def screenshot(self, prefix: str, frame: np.ndarray, step: int, episode_index: int) -> None:
        """Adds the terminal frame of an episode to TensorBoard and saves it as a PNG."""
        frame = np.asarray(frame)
        if frame.ndim == 3 and frame.shape[0] not in (1, 3) and frame.shape[-1] not in (1, 3):
            frame = frame[-1]  # a stack of grayscale frames: show the newest
        if self._writer is not None:
            self._writer.add_image(
                f"{prefix}/terminal_frame", frame, step, dataformats="HWC" if frame.ndim == 3 else "HW"
            )
        os.makedirs(self.screenshot_dir, exist_ok=True)
        name = f"{os.path.basename(self.run_dir)}_{prefix}_episode{episode_index}.png"
        try:
            from PIL import Image

            Image.fromarray(frame.astype(np.uint8)).save(os.path.join(self.screenshot_dir, name))
        except ImportError:  # pillow comes with tensorboard/matplotlib; without it only TensorBoard gets it
            pass

    def csv_row(self, row: Mapping[str, float | int | str]) -> None:
        """Appends one row to the results CSV, writing the header when the file is new.

        The columns are fixed by the file's header (its first row, or the file already there when a run
        resumes), so that every row has the header's fields: a value a later row lacks is left empty,
        and a key the header lacks is left out, with a warning on stderr the first time.
        """
        directory = os.path.dirname(os.path.abspath(self.results_csv_path))
        os.makedirs(directory, exist_ok=True)
        is_new = not os.path.exists(self.results_csv_path) or os.path.getsize(self.results_csv_path) == 0
        if is_new:
            self._csv_columns = list(row.keys())
        elif self._csv_columns is None:
            with open(self.results_csv_path, newline="") as f:
                self._csv_columns = next(csv.reader(f))
        unknown = [key for key in row if key not in self._csv_columns and key not in self._csv_dropped]
        if unknown:
            self._csv_dropped.update(unknown)
            print(
                f"warning: {self.results_csv_path} has no column for {', '.join(unknown)}; "
                "those values are left out of it (TensorBoard still gets them)",
                file=sys.stderr,
            )
        with open(self.results_csv_path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self._csv_columns, restval="", extrasaction="ignore")
            if is_new:
                writer.writeheader()
            writer.writerow(row)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
