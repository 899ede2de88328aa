"""Before/after timings of a code change in one run: the package at a git revision beside this tree.

Benchmarks with `--baseline=REV` extract `deep_rl_zoo` at REV into a scratch folder and alternate rounds
between it and this checkout, each round a fresh process whose PYTHONPATH picks the tree (a shared
machine's load then falls on both alike).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def extract(revision: str, folder: str) -> str:
    """The deep_rl_zoo package at git `revision`, extracted under `folder`; returns its PYTHONPATH."""
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", revision, "deep_rl_zoo"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    return folder


def json_round(script: str, python_path: str, arguments: list[str]) -> dict:
    """Runs `script --worker ARGUMENTS` with the package at `python_path`; the JSON of its last line."""
    output = subprocess.run(
        [sys.executable, script, "--worker", *arguments],
        env={**os.environ, "PYTHONPATH": python_path},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])
