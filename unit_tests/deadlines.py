"""Deadlines for tests that start processes, stretched by the machine's load.

A Python process that imports torch needs about 1.5 s of CPU before it does anything; on a machine whose
load average is 20 on 2 cores it gets about a tenth of a core, so a start-up that takes 3 s alone takes 30.
A deadline of "60 s" then fails a test whose code is right. These deadlines are written for an idle
machine and stretched by load / cores (at least 1x), read again at every check, so they still catch a hang.
"""

import os
import time


def load_factor() -> float:
    """How many times slower than alone a process runs now: the 1-minute load per core, at least 1."""
    if not hasattr(os, "getloadavg"):
        return 1.0
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def under_load(seconds: float) -> float:
    """`seconds` (what an idle machine needs, with a margin) stretched by the load now."""
    return seconds * load_factor()


class Deadline:
    """`seconds` from now on an idle machine; stretched by the load seen at each `passed()`."""

    def __init__(self, seconds: float):
        self._start = time.monotonic()
        self._seconds = seconds

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def passed(self) -> bool:
        return self.elapsed() > under_load(self._seconds)


def answers_ctrl_c() -> None:
    """`preexec_fn` for a process a test will send SIGINT: give it the default SIGINT disposition.

    A test runner started in the background by a script (`nohup pytest ... &` without job control) inherits
    SIGINT *ignored*, passes that on to its children, and a Python started with SIGINT ignored never raises
    KeyboardInterrupt: the test would wait for a Ctrl-C that cannot arrive. A terminal job, which is what
    these tests imitate, starts with the default disposition.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
