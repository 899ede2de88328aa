"""Checkpoints: written atomically, loaded without unpickling arbitrary objects.

A checkpoint is one `torch.save` file holding only tensors, numbers, strings and containers of those:

    {"format": FORMAT, "agent_name": "DQN", "environment_name": "CartPole-v1",
     "iteration": 3, "agent": <agent.state_dict()>, "loop": <main-loop state for --resume>,
     "config": <the run's flags>}

It is loaded with `torch.load(weights_only=True)`, which refuses any pickled object that is not plain
data, so a file carrying a code payload is rejected before anything in it runs.
"""

import os
import pickle
import re
import shutil
import tempfile
import zipfile
from typing import Any

import numpy as np
import torch

from deep_rl_zoo.errors import CheckpointError

FORMAT = "deep_rl_zoo.checkpoint/1"
SUFFIX = ".ckpt"
REPLAY_SUFFIX = ".replay.npz"
DISK_MARGIN_BYTES = 256 * 2**20  # left free after writing a replay file, for logs and checkpoints


def file_stem(agent_name: str, environment_name: str) -> str:
    """`DQN`, `ALE/Breakout-v5` -> `DQN_ALE-Breakout-v5` (a name safe for any file system)."""
    return f"{agent_name}_{re.sub(r'[^A-Za-z0-9.-]+', '-', environment_name)}"


def checkpoint_path(checkpoint_dir: str, agent_name: str, environment_name: str, iteration: int) -> str:
    return os.path.join(checkpoint_dir, f"{file_stem(agent_name, environment_name)}_{iteration}{SUFFIX}")


def find_latest_checkpoint(checkpoint_dir: str, agent_name: str, environment_name: str) -> str | None:
    """The checkpoint with the highest iteration number for this agent and environment, if any."""
    if not os.path.isdir(checkpoint_dir):
        return None
    pattern = re.compile(
        re.escape(file_stem(agent_name, environment_name)) + r"_(\d+)" + re.escape(SUFFIX) + "$"
    )
    found = [(int(m.group(1)), name) for name in os.listdir(checkpoint_dir) if (m := pattern.match(name))]
    if not found:
        return None
    return os.path.join(checkpoint_dir, max(found)[1])


def save_checkpoint(
    path: str,
    agent_name: str,
    environment_name: str,
    iteration: int,
    agent_state: dict,
    loop_state: dict,
    config: dict | None = None,
) -> None:
    """Writes to a temporary file in the same folder, then renames it over `path`.

    The rename is atomic on POSIX and Windows, so a crash or Ctrl-C leaves either the old file or the
    complete new one, never half a file.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    payload = {
        "format": FORMAT,
        "agent_name": agent_name,
        "environment_name": environment_name,
        "iteration": iteration,
        "agent": agent_state,
        "loop": loop_state,
        "config": config or {},  # the run's flags: evaluation rebuilds the same network from them
    }
    fd, tmp_path = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def load_checkpoint(path: str, agent_name: str, environment_name: str) -> dict[str, Any]:
    """Loads and validates a checkpoint; raises CheckpointError with a one-line reason otherwise.

    Args:
      path: the checkpoint file.
      agent_name: the agent that will load it, e.g. "DQN".
      environment_name: the canonical environment id it must have been trained on.
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"no checkpoint file at {path}")
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
        raise CheckpointError(f"{path} was written by agent {payload.get('agent_name')}, not {agent_name}")
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
      CheckpointError: not enough free space in the folder (with how much is needed), or an array
        of Python objects.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    for name, array in arrays.items():
        if np.asarray(array).dtype.hasobject:
            raise CheckpointError(f"cannot save {name!r} to {path}: it holds Python objects")
    needed = sum(np.asarray(array).nbytes for array in arrays.values()) + DISK_MARGIN_BYTES
    free = shutil.disk_usage(directory).free
    if free < needed:
        raise CheckpointError(
            f"not enough disk space to save the replay to {path}: it needs {needed / 2**30:.2f} GiB "
            f"(with a {DISK_MARGIN_BYTES / 2**20:.0f} MiB margin), {free / 2**30:.2f} GiB are free; free "
            "some space, or train without --checkpoint_replay"
        )
    fd, tmp_path = tempfile.mkstemp(prefix=".tmp-", suffix=REPLAY_SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def load_arrays(path: str) -> dict[str, np.ndarray]:
    """Reads a file `save_arrays` wrote; refuses pickled (object) arrays without running them.

    Raises:
      CheckpointError: no such file, a damaged file, or one holding pickled objects.
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"no replay file at {path}")
    if not zipfile.is_zipfile(path):  # numpy would take any other bytes for a pickle
        raise CheckpointError(f"{path} is truncated or not a replay file")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except ValueError as e:  # numpy's refusal of an object array
        raise CheckpointError(f"refused to load {path}: it holds pickled objects ({e})") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise CheckpointError(f"{path} is truncated or not a replay file ({type(e).__name__})") from None
