"""Break the code on purpose, one real bug at a time, and count how many the quick suite catches.

Each mutant is a one-line bug an engineer could plausibly write: swapped network roles, a dropped
termination mask, a flipped sign, a wrong axis, a skipped update. Mutants live in
`mutation/mutants/*.py`, each module holding `MUTANTS: list[Mutant]`
(`from check import Mutant`; this script's folder is on `sys.path`). For every mutant this script
copies the repository once into a scratch folder, replaces `old` by `new` in `path` (the text must occur
exactly once, so a mutant cannot silently stop applying when the code moves), runs the quick tier
(`pytest -m "not slow" -x`, what `make test-quick` runs) against the copy, and restores the file. A mutant
is *caught* when pytest fails. The unmutated copy must pass first: otherwise every mutant would count as
caught.

    python mutation/check.py                       # every mutant, whole quick suite
    python mutation/check.py --only=ppo,impala     # mutants whose name starts with these
    python mutation/check.py --workers=2           # pytest-xdist inside each run

Prints one line per mutant and the total `caught N of M`; exits 1 if any mutant survived.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

REPO = pathlib.Path(__file__).resolve().parents[1]
QUICK_TIER = "not slow"  # the marker expression of `make test-quick` (tiers: unit_tests/conftest.py)


class Mutant(NamedTuple):
    name: str  # "<agent>/<short-bug-name>"
    path: str  # file relative to the repository root
    old: str  # exact text, occurring once in the file
    new: str  # the bug
    why: str = ""  # what a user would get from this bug


def load_mutants() -> list[Mutant]:
    mutants = []
    for module_path in sorted((REPO / "mutation" / "mutants").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"mutants_{module_path.stem}", module_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        mutants.extend(module.MUTANTS)
    return mutants


def copy_repository(destination: pathlib.Path) -> None:
    ignore = shutil.ignore_patterns(
        ".venv", ".git", "runs", "checkpoints", "recordings", "screenshots", "__pycache__", "*.egg-info"
    )
    shutil.copytree(REPO, destination, ignore=ignore, symlinks=True)


def run_quick_suite(root: pathlib.Path, workers: int, timeout_s: float, tests: list[str]) -> tuple[bool, str]:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-m", QUICK_TIER, "-p", "no:cacheprovider"]
    if workers > 1:
        command += ["-n", str(workers)]
    command += tests
    try:
        result = subprocess.run(
            command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return True, "timeout"
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return result.returncode != 0, lines[-1] if lines else result.stderr.strip()[-200:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated name prefixes of the mutants to run")
    parser.add_argument("--workers", type=int, default=1, help="pytest-xdist workers per run")
    parser.add_argument("--timeout_s", type=float, default=900.0, help="a run past this counts as caught")
    parser.add_argument("--tests", nargs="*", default=[], help="test paths (default: the whole quick tier)")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    args = parser.parse_args()

    mutants = load_mutants()
    if args.only:
        prefixes = tuple(args.only.split(","))
        mutants = [m for m in mutants if m.name.startswith(prefixes)]
    if args.list:
        for m in mutants:
            print(f"{m.name}: {m.why}")
        return 0
    for m in mutants:  # every mutant must still apply to today's code
        count = (REPO / m.path).read_text().count(m.old)
        if count != 1:
            print(f"error: mutant {m.name}: text occurs {count} times in {m.path}", file=sys.stderr)
            return 2

    survivors = []
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        root = pathlib.Path(scratch) / "repo"
        copy_repository(root)
        start = time.monotonic()
        failed, last_line = run_quick_suite(root, args.workers, args.timeout_s, args.tests)
        print(
            f"unmutated                                        {time.monotonic() - start:6.1f} s  {last_line}"
        )
        if failed:
            print("error: the quick tier fails without any mutant; fix that first", file=sys.stderr)
            return 2
        for m in mutants:
            target = root / m.path
            original = target.read_text()
            target.write_text(original.replace(m.old, m.new))
            start = time.monotonic()
            try:
                caught, last_line = run_quick_suite(root, args.workers, args.timeout_s, args.tests)
            finally:
                target.write_text(original)
            verdict = "caught  " if caught else "SURVIVED"
            print(f"{verdict} {m.name:45s} {time.monotonic() - start:6.1f} s  {last_line}", flush=True)
            if not caught:
                survivors.append(m)
    print(f"caught {len(mutants) - len(survivors)} of {len(mutants)}")
    for m in survivors:
        print(f"  survived: {m.name} ({m.path}): {m.why}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
