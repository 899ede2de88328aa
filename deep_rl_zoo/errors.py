"""Errors that end a run with a one-line message instead of a traceback."""

import functools
import sys
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


class ZooError(Exception):
    """Base class: the message is shown to the user as one line."""

    exit_code = 2


class ConfigError(ZooError):
    """Bad user input: an unknown environment, an impossible flag value, a wrong action space."""


class CheckpointError(ZooError):
    """A checkpoint that is missing, truncated, foreign, or carries pickled code."""


class ForeignCheckpointError(CheckpointError):
    """A checkpoint written by another agent (`written_by`) than the one asked to load it."""

    def __init__(self, message: str, written_by: str | None):
        super().__init__(message)
        self.written_by = written_by


class DamagedFileError(CheckpointError):
    """A checkpoint or replay file whose bytes are not the ones written: truncated, zeroed, bit flips."""


class DiskFullError(CheckpointError):
    """No room to write a checkpoint or replay file (a full disk, a quota, a file-size limit)."""


class NonFiniteLossError(ZooError):
    """The loss became NaN or infinite; training cannot continue meaningfully."""

    exit_code = 3

    def __init__(self, step: int, value: float):
        super().__init__(f"loss became {value} at learner step {step}; stopping the run")
        self.step = step


class ActorError(ZooError):
    """An actor failed or died and could not be replaced (no restarts left); the whole run stops."""

    exit_code = 4


def require(condition: bool, message: str) -> None:
    """Raises ConfigError(message) unless condition holds."""
    if not condition:
        raise ConfigError(message)


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM after saving where it stood; the message says where."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def exit_on_error(fn: Callable[..., _T]) -> Callable[..., _T]:
    """Turns ZooError into `error: <message>` on stderr and a non-zero exit; Ctrl-C into exit 130
    (128 + the signal's number for a run that saved itself when stopped)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ZooError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(e.exit_code)
        except RunInterrupted as e:
            print(f"interrupted: {e}", file=sys.stderr)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            print("interrupted: stopped cleanly; checkpoints already written are kept", file=sys.stderr)
            sys.exit(130)

    return wrapper
