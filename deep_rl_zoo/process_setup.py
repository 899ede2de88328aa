"""This process's device, seeds, torch thread count and learner precision, set once at the start of a run."""

import random
from typing import Any

import numpy as np
import torch

from deep_rl_zoo.config import available_cpu_cores, is_atari_name
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.networks import common


def resolve_device(name: str) -> torch.device:
    """`auto` -> CUDA when available else CPU; an unavailable CUDA device is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device={name} but no CUDA device is visible")
    return device


def seed_everything(seed: int, num_threads: int) -> None:
    """Seeds the global generators that libraries may touch and fixes torch's thread count.

    Our own code draws from explicit `np.random.Generator`s; this covers torch's default generator
    (network initialisation) and anything third-party.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - third-party code may still use the global RNG
    torch.manual_seed(seed)
    torch.set_num_threads(num_threads)


def set_learner_precision(config: Any, device: torch.device, saved_config: dict | None = None) -> None:
    """`--bfloat16` for this (the learner's) process: Nature-CNN torsos compute in bfloat16 autocast.

    Unset, it is decided here and written back into `config` (so config.txt and checkpoints record what
    ran): a resumed run keeps the precision it was saved with (`saved_config`, its checkpoint's flags);
    otherwise an Atari run uses bfloat16 where `device` multiplies it natively, and float32 elsewhere.
    Three paired seeds of tuned PPO on Pong took no more env steps to a score in bfloat16 than in float32
    (docs/findings.md), and a learner step costs about 0.6x. Other environments keep float32: only the
    Atari torso reads the setting. Asked for (or resumed in) where the device has no native bfloat16,
    the run still does it, with a one-line warning: it is then slower, not faster (benchmarks/README.md).
    """
    native = common.native_bfloat16(device)
    if config.bfloat16 is None:
        saved = (saved_config or {}).get("bfloat16")
        chosen = is_atari_name(config.environment_name) and native
        object.__setattr__(config, "bfloat16", chosen if saved is None else bool(saved))
    if config.bfloat16 and not native:
        print(f"warning: --bfloat16 on {device.type}, which has no native bfloat16: expect it to be slower")
    common.set_torso_bfloat16(config.bfloat16)


def reset_learner_precision() -> None:
    """The end of a run: this process's torsos go back to float32, so that what a notebook or script does
    next in it (an evaluation, a run of another environment) starts from the default, not from the run's
    bfloat16."""
    common.set_torso_bfloat16(False)


def describe_layout(config: Any, num_actors: int = 0) -> str:
    """The one line a run prints at its start: how its envs, actors and learner threads are laid out."""
    envs = f"{config.num_envs} env{'s' if config.num_envs > 1 else ''}"
    if num_actors:
        where = f"{num_actors} actor process{'es' if num_actors > 1 else ''} x {envs}"
        flags = "--num_actors/--num_envs/--num_threads"
    else:
        where, flags = f"one process, {envs}", "--num_envs/--num_threads"
    threads = f"{config.num_threads} thread{'s' if config.num_threads > 1 else ''}"
    if getattr(config, "bfloat16", None):
        threads += " with a bfloat16 torso"
        flags += "/--nobfloat16"
    return f"layout: {where}, learner on {threads} ({available_cpu_cores()} CPU cores; set {flags} to choose)"
