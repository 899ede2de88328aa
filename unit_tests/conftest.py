"""Shared pytest fixtures: every test runs with one torch thread and in its own folder."""

import os

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread_and_tmp_cwd(tmp_path, monkeypatch):
    # Two cores are shared by two xdist workers: one torch thread each keeps them from fighting.
    torch.set_num_threads(1)
    # Scripts write ./runs, ./checkpoints, ./recordings by default: keep those out of the repo.
    monkeypatch.chdir(tmp_path)
    os.environ.setdefault("MPLBACKEND", "Agg")
    yield
