"""Checkpoints: one folder per run, written atomically, loaded without unpickling arbitrary objects.

Layout (the checkpoint folder is named like the run's TensorBoard folder under ./runs):

    checkpoints/DQN_CartPole-v1/              first untagged run
        DQN_CartPole-v1_0.ckpt, _1.ckpt, ...  one per iteration
        DQN_CartPole-v1_2_interrupted.ckpt    iteration 2 stopped part-way (Ctrl-C, SIGTERM): --resume
                                              continues it; the end of iteration 2 deletes it
        DQN_CartPole-v1_best.ckpt             the best greedy evaluation so far
    checkpoints/DQN_CartPole-v1-2/            the next untagged run
    checkpoints/DQN_CartPole-v1_LR0.001/      --tag=LR0.001

A checkpoint is one `torch.save` file holding only tensors, numbers, strings and containers of those:

    {"format": FORMAT, "agent_name": "DQN", "environment_name": "CartPole-v1",
     "iteration": 3, "agent": <agent.state_dict()>, "loop": <main-loop state for --resume>,
     "config": <the run's flags>}

It is loaded with `torch.load(weights_only=True)`, which refuses any pickled object that is not plain
data, so a file carrying a code payload is rejected before anything in it runs.

Damage is caught before loading: both kinds of file are zip archives (`torch.save`'s format and `.npz`)
whose every member carries a CRC-32 of its bytes, which `check_intact` verifies. `torch.load` itself does
not: a flipped bit inside a tensor loads as a wrong weight. A truncated or zeroed file has no zip
directory at its end. `--resume` skips a damaged checkpoint for the newest intact one of the run
(`load_newest_intact`), saying which file it skipped and why.
"""

import errno
import io
import os
import pickle
import re
import shutil
import tempfile
import zipfile
from typing import Any

import numpy as np
import torch

from deep_rl_zoo.errors import CheckpointError, DamagedFileError, DiskFullError, ForeignCheckpointError

FORMAT = "deep_rl_zoo.checkpoint/1"
SUFFIX = ".ckpt"
REPLAY_SUFFIX = ".replay.npz"
DISK_MARGIN_BYTES = 256 * 2**20  # left free after writing a replay file, for logs and checkpoints
BEST = "best"  # `<stem>_best.ckpt`; also the --load_checkpoint_file value that picks it
LATEST = "latest"  # the --load_checkpoint_file value that picks the newest iteration checkpoint
INTERRUPTED = "_interrupted"  # `<stem>_<i>_interrupted.ckpt`: iteration i stopped part-way
# The errors of a write that found no room: a full disk, a full quota, a file-size limit (ulimit -f).
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _write_atomically(path: str, suffix: str, write) -> None:
    """Runs `write(file)` on a temporary file in `path`'s folder, syncs it, then renames it over `path`.

    The rename is atomic on POSIX and Windows, so a crash, Ctrl-C or a full disk leaves either the old
    file or the complete new one, never half a file, and no temporary file behind.

    Raises:
      DiskFullError: no room for the file (naming it and the OS's reason), the old file untouched.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except OSError as e:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        if e.errno in DISK_FULL_ERRNOS:
            raise DiskFullError(f"no room to write {path}: {e.strerror}") from None
        raise
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def file_stem(agent_name: str, environment_name: str) -> str:
    """`DQN`, `ALE/Breakout-v5` -> `DQN_ALE-Breakout-v5` (a name safe for any file system)."""
    return f"{agent_name}_{re.sub(r'[^A-Za-z0-9.-]+', '-', environment_name)}"


def run_name(agent_name: str, environment_name: str, tag: str = "") -> str:
    """`DQN`, `CartPole-v1`, `LSTM LR` -> `DQN_CartPole-v1_LSTM-LR`: the run's folder name before any `-N`."""
    stem = file_stem(agent_name, environment_name)
    return f"{stem}_{re.sub(r'[^A-Za-z0-9._-]+', '-', tag)}" if tag else stem


def checkpoint_path(checkpoint_dir: str, agent_name: str, environment_name: str, iteration: int) -> str:
    return os.path.join(checkpoint_dir, f"{file_stem(agent_name, environment_name)}_{iteration}{SUFFIX}")


def interrupted_checkpoint_path(
    checkpoint_dir: str, agent_name: str, environment_name: str, iteration: int
) -> str:
    """Where a single-process run stopped part-way through `iteration` saves itself."""
    stem = file_stem(agent_name, environment_name)
    return os.path.join(checkpoint_dir, f"{stem}_{iteration}{INTERRUPTED}{SUFFIX}")


def best_checkpoint_path(checkpoint_dir: str, agent_name: str, environment_name: str) -> str:
    return os.path.join(checkpoint_dir, f"{file_stem(agent_name, environment_name)}_{BEST}{SUFFIX}")


def new_run_name(roots: list[str], name: str) -> str:
    """Reserves `name`, or `name-2`, `name-3`... free under every root, by creating that folder in each.

    A run's TensorBoard folder and its checkpoint folder thus always share one name, and two runs
    started at the same moment never get the same one (`os.mkdir` fails for the second).
    """
    index = 1
    while True:
        candidate = name if index == 1 else f"{name}-{index}"
        index += 1
        created = []
        try:
            for root in roots:
                os.makedirs(root, exist_ok=True)
                os.mkdir(os.path.join(root, candidate))
                created.append(os.path.join(root, candidate))
        except FileExistsError:
            for path in created:
                os.rmdir(path)  # empty: just made
            continue
        return candidate


def find_run_checkpoint(
    checkpoint_dir: str, agent_name: str, environment_name: str, which: str = LATEST, tag: str | None = None
) -> str | None:
    """The `latest` (highest iteration) or `best` checkpoint of the newest matching run, if any.

    Runs are the folders under `checkpoint_dir` named `run_name(agent, env, tag)` with an optional
    `-N`; `tag=None` matches every tag. The newest run is the one whose latest checkpoint was written
    last. Checkpoints directly in `checkpoint_dir` (older flat layout) count as one more run.
    """
    stem = file_stem(agent_name, environment_name)
    if tag is None:
        pattern = re.compile(re.escape(stem) + r"(_.+)?(-\d+)?$")
    else:
        pattern = re.compile(re.escape(run_name(agent_name, environment_name, tag)) + r"(-\d+)?$")
    if not os.path.isdir(checkpoint_dir):
        return None
    folders = [os.path.join(checkpoint_dir, n) for n in os.listdir(checkpoint_dir) if pattern.match(n)]
    if not tag:
        folders.append(checkpoint_dir)
    found = []
    for folder in folders:
        latest = find_latest_checkpoint(folder, agent_name, environment_name)
        if latest is None:
            continue
        path = latest if which == LATEST else best_checkpoint_path(folder, agent_name, environment_name)
        if os.path.isfile(path):
            found.append((os.path.getmtime(latest), latest, path))
    return max(found)[2] if found else None


def find_latest_checkpoint(checkpoint_dir: str, agent_name: str, environment_name: str) -> str | None:
    """The newest checkpoint in this one folder for this agent and env, if any: the highest iteration,
    where iteration i stopped part-way (`_i_interrupted`) comes after iteration i - 1 and before i."""
    found = checkpoints_newest_first(checkpoint_dir, agent_name, environment_name)
    return found[0] if found else None


def checkpoints_newest_first(checkpoint_dir: str, agent_name: str, environment_name: str) -> list[str]:
    """Every iteration checkpoint in this one folder for this agent and env, newest first (the order of
    `find_latest_checkpoint`, whose answer is the first)."""
    if not os.path.isdir(checkpoint_dir):
        return []
    pattern = re.compile(
        re.escape(file_stem(agent_name, environment_name))
        + r"_(\d+)("
        + re.escape(INTERRUPTED)
        + ")?"
        + re.escape(SUFFIX)
        + "$"
    )
    found = [
        (2 * int(m.group(1)) + (1 if m.group(2) else 2), name)
        for name in os.listdir(checkpoint_dir)
        if (m := pattern.match(name))
    ]
    return [os.path.join(checkpoint_dir, name) for _, name in sorted(found, reverse=True)]


def load_newest_intact(
    checkpoint_dir: str, agent_name: str, environment_name: str, file_environment_name: str | None = None
) -> tuple[str, dict[str, Any], list[str]]:
    """The newest checkpoint of this folder that is not damaged, for --resume.

    `environment_name` is the env id the checkpoints must hold (`PongNoFrameskip-v4`); the files are
    named after `file_environment_name`, the name the run was given (`Pong`), when that differs.

    Returns (path, payload, skipped): `skipped` holds one line per newer damaged checkpoint passed over.

    Raises:
      CheckpointError: no checkpoint at all, every one damaged (naming the newest), or the newest intact
        one refused for another reason (another agent or environment, pickled code): that is not damage
        an older file would repair.
    """
    skipped = []
    for path in checkpoints_newest_first(
        checkpoint_dir, agent_name, file_environment_name or environment_name
    ):
        try:
            return path, load_checkpoint(path, agent_name, environment_name), skipped
        except DamagedFileError as e:
            skipped.append(str(e))
    if skipped:
        raise CheckpointError(f"every checkpoint in {checkpoint_dir} is damaged; the newest: {skipped[0]}")
    raise CheckpointError(f"no {agent_name} checkpoint for {environment_name} in {checkpoint_dir}")


def check_intact(path: str, what: str = "checkpoint") -> None:
    """Raises DamagedFileError unless `path` is a whole zip archive whose members match their CRC-32s.

    Reads the whole file once (about as long as loading it). `what`: "checkpoint" or "replay", for the
    message.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            bad_member = archive.testzip()
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError) as e:
        reason = "it is empty" if os.path.getsize(path) == 0 else f"no whole zip archive: {type(e).__name__}"
        raise DamagedFileError(f"{path} is truncated or not a {what} file ({reason})") from None
    if bad_member is not None:
        raise DamagedFileError(
            f"{path} is damaged: the bytes of its member {bad_member} fail their CRC-32 check "
            "(flipped bits, a bad disk, or a copy that went wrong)"
        )


def copy_checkpoint(source: str, destination: str) -> None:
    """Copies a checkpoint file atomically (temporary file in the destination's folder, then rename)."""

    def write(f) -> None:
        with open(source, "rb") as src:
            shutil.copyfileobj(src, f)

    _write_atomically(destination, SUFFIX, write)


def save_checkpoint(
    path: str,
    agent_name: str,
    environment_name: str,
    iteration: int,
    agent_state: dict,
    loop_state: dict,
    config: dict | None = None,
) -> None:
    """Writes to a temporary file in the same folder, then renames it over `path` (`_write_atomically`).

    Raises:
      DiskFullError: no room for the file; `path`'s previous content is intact.
    """
    payload = {
        "format": FORMAT,
        "agent_name": agent_name,
        "environment_name": environment_name,
        "iteration": iteration,
        "agent": agent_state,
        "loop": loop_state,
        "config": config or {},  # the run's flags: evaluation rebuilds the same network from them
    }
    # Serialised in memory first: torch.save writing to a file turns a full disk into an obscure
    # RuntimeError ("unexpected pos"), where a plain write raises OSError(ENOSPC) that says what happened.
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    _write_atomically(path, SUFFIX, lambda f: f.write(buffer.getbuffer()))


def load_checkpoint(path: str, agent_name: str, environment_name: str) -> dict[str, Any]:
    """Loads and validates a checkpoint; raises CheckpointError with a one-line reason otherwise.

    Args:
      path: the checkpoint file.
      agent_name: the agent that will load it, e.g. "DQN".
      environment_name: the canonical environment id it must have been trained on.
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"no checkpoint file at {path}")
    check_intact(path, "checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CheckpointError(
            f"refused to load {path}: it holds pickled objects that are not plain data "
            f"(possibly code), which are never executed ({first_line[:120]})"
        ) from None
    except Exception as e:  # torch raises many kinds (RuntimeError, EOFError, KeyError...) on bad bytes
        raise CheckpointError(f"{path} is truncated or not a checkpoint ({type(e).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a Deep RL Zoo checkpoint")
    if payload.get("agent_name") != agent_name:
        written_by = payload.get("agent_name")
        raise ForeignCheckpointError(
            f"{path} was written by agent {written_by}, not {agent_name}", written_by
        )
    if payload.get("environment_name") != environment_name:
        raise CheckpointError(
            f"{path} was trained on {payload.get('environment_name')}, not {environment_name}"
        )
    return payload


def replay_path(checkpoint_file: str) -> str:
    """`.../DQN_Pong_3.ckpt` -> `.../DQN_Pong_3.replay.npz`: an agent's replay, beside its checkpoint."""
    return (
        checkpoint_file[: -len(SUFFIX)] + REPLAY_SUFFIX
        if checkpoint_file.endswith(SUFFIX)
        else (checkpoint_file + REPLAY_SUFFIX)
    )


def save_arrays(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Writes numpy arrays to one uncompressed `.npz` file, atomically (temporary file, then rename).

    Only plain-dtype arrays are written (no object arrays), so `load_arrays` reads them back without
    unpickling anything. The free disk space is checked first: a replay of Atari frames takes GBs.

    Raises:
      DiskFullError: not enough free space in the folder (with how much is needed), or no room found
        while writing (the previous file intact).
      CheckpointError: an array of Python objects.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    for name, array in arrays.items():
        if np.asarray(array).dtype.hasobject:
            raise CheckpointError(f"cannot save {name!r} to {path}: it holds Python objects")
    needed = sum(np.asarray(array).nbytes for array in arrays.values()) + DISK_MARGIN_BYTES
    free = shutil.disk_usage(directory).free
    if free < needed:
        raise DiskFullError(
            f"not enough disk space to save the replay to {path}: it needs {needed / 2**30:.2f} GiB "
            f"(with a {DISK_MARGIN_BYTES / 2**20:.0f} MiB margin), {free / 2**30:.2f} GiB are free; free "
            "some space, or train without --checkpoint_replay"
        )
    _write_atomically(path, REPLAY_SUFFIX, lambda f: np.savez(f, **arrays))


def load_arrays(path: str) -> dict[str, np.ndarray]:
    """Reads a file `save_arrays` wrote; refuses pickled (object) arrays without running them.

    Raises:
      CheckpointError: no such file, a damaged file, or one holding pickled objects.
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"no replay file at {path}")
    check_intact(path, "replay")  # also before numpy, which would take bytes other than a zip for a pickle
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except ValueError as e:  # numpy's refusal of an object array
        raise CheckpointError(f"refused to load {path}: it holds pickled objects ({e})") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise DamagedFileError(f"{path} is truncated or not a replay file ({type(e).__name__})") from None
