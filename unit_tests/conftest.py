"""Shared pytest fixtures and the rule that sorts tests into the two tiers.

Tiers (markers declared in pyproject.toml):

- quick (`make test-quick`, i.e. `pytest -m "not slow"`): unit tests in this process, each well under a
  second; about a minute for all of them on 2 cores. This is the tier `mutation/check.py` runs.
- slow (`make test` runs it, with everything else): any test that
  - starts another process: a Python subprocess (a script's CLI, Ctrl-C, kill -9), actor processes of the
    distributed runtime, a Ray cluster; mark it `@pytest.mark.slow`;
  - runs a script end to end (`train.main`, `eval_agent.main`, `run_*.main` with a tiny budget): mark it
    `@pytest.mark.smoke`, which puts it in the slow tier by itself;
  - checks that an agent learns: `@pytest.mark.learning`, also slow by itself.

The rule is enforced, not only written: a test outside the slow tier that starts a Python interpreter or a
multiprocessing process fails at once (in every run, CI's included), naming the marker it needs, and every
run lists the quick tests that took over a second, so the next person sees what to speed up or move.
Other subprocesses (git, ffmpeg) are allowed: they start in milliseconds.
"""

import multiprocessing.process
import os
import subprocess
import sys

import pytest
import torch

from deep_rl_zoo.networks import common

SLOW_MARKERS = ("slow", "smoke", "learning")  # any of them puts a test in the slow tier
QUICK_TEST_SECONDS = 1.0  # a quick-tier test slower than this is listed at the end of the run


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects anything
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is None and any(item.get_closest_marker(m) for m in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)


class QuickTierViolation(RuntimeError):
    pass


def _refuse(what: str, nodeid: str):
    raise QuickTierViolation(
        f"{nodeid} {what}: mark it @pytest.mark.slow (a test that starts a process is in the slow tier; "
        "see unit_tests/conftest.py)"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Outside the slow tier, starting a Python interpreter or a multiprocessing process is an error.

    Guards the test's whole run, so a module- or session-scoped fixture that a quick test is the first to
    need (and that starts actor processes) is caught as well.
    """
    if item.get_closest_marker("slow") is not None:
        yield
        return
    popen_init = subprocess.Popen.__init__
    process_start = multiprocessing.process.BaseProcess.start

    def guarded_popen_init(self, args, *pargs, **kwargs):
        argv = [os.fsdecode(a) for a in ([args] if isinstance(args, (str, bytes, os.PathLike)) else args)]
        program = argv[0] if argv else ""
        if argv and (program == sys.executable or os.path.basename(program.split()[0]).startswith("python")):
            _refuse(f"starts a Python subprocess ({' '.join(argv)[:80]})", item.nodeid)
        popen_init(self, args, *pargs, **kwargs)

    def guarded_start(self):
        _refuse(f"starts a process ({self.name})", item.nodeid)
        process_start(self)

    subprocess.Popen.__init__ = guarded_popen_init
    multiprocessing.process.BaseProcess.start = guarded_start
    try:
        yield
    finally:
        subprocess.Popen.__init__ = popen_init
        multiprocessing.process.BaseProcess.start = process_start


@pytest.fixture(autouse=True)
def _one_thread_and_tmp_cwd(tmp_path, monkeypatch):
    # Two cores are shared by two xdist workers: one torch thread each keeps them from fighting.
    torch.set_num_threads(1)
    # Scripts write ./runs, ./checkpoints, ./recordings by default: keep those out of the repo.
    monkeypatch.chdir(tmp_path)
    os.environ.setdefault("MPLBACKEND", "Agg")
    yield
    # A training run sets its process's torso precision (on a CPU with native bfloat16, Atari runs pick
    # bfloat16 by default): no test may hand it on to the next one.
    common.set_torso_bfloat16(False)


_slow_quick_tests: list[tuple[float, str]] = []


def pytest_runtest_logreport(report):
    # Runs where the reports arrive: in the main process, also under pytest-xdist.
    if report.when == "call" and report.duration > QUICK_TEST_SECONDS and "slow" not in report.keywords:
        _slow_quick_tests.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter):
    if not _slow_quick_tests:
        return
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    terminalreporter.write_sep("-", f"quick-tier tests over {QUICK_TEST_SECONDS:.0f} s (load now {load:.1f})")
    for duration, nodeid in sorted(_slow_quick_tests, reverse=True):
        terminalreporter.write_line(f"{duration:6.2f} s  {nodeid}")
    terminalreporter.write_line(
        "Make them faster, or mark them slow/smoke if they run a script or a process."
    )
