"""Checkpoints: round trip, atomic writes, latest lookup, and refusal of bad files."""

import os

import pytest
import torch

from deep_rl_zoo import checkpoint
from deep_rl_zoo.errors import CheckpointError


def _save(path, agent="DQN", env="CartPole-v1", iteration=0, value=1.0):
    checkpoint.save_checkpoint(
        str(path), agent, env, iteration, {"w": torch.tensor([value]), "steps": 3}, {"next_iteration": 1}
    )


def test_round_trip_keeps_tensors_numbers_and_metadata(tmp_path):
    path = tmp_path / "a.ckpt"
    _save(path, value=2.5)
    payload = checkpoint.load_checkpoint(str(path), "DQN", "CartPole-v1")
    assert payload["agent"]["w"].item() == 2.5 and payload["agent"]["steps"] == 3
    assert payload["loop"] == {"next_iteration": 1} and payload["iteration"] == 0


def test_a_failed_save_leaves_the_previous_file_intact_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "a.ckpt"
    _save(path, value=1.0)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        _save(path, value=2.0)
    monkeypatch.undo()
    assert checkpoint.load_checkpoint(str(path), "DQN", "CartPole-v1")["agent"]["w"].item() == 1.0
    assert os.listdir(tmp_path) == ["a.ckpt"]


def test_latest_checkpoint_is_the_highest_iteration_of_that_agent_and_env(tmp_path):
    for iteration in (0, 2, 10):
        _save(checkpoint.checkpoint_path(str(tmp_path), "DQN", "ALE/Pong-v5", iteration), iteration=iteration)
    _save(checkpoint.checkpoint_path(str(tmp_path), "PPO", "ALE/Pong-v5", 99))
    latest = checkpoint.find_latest_checkpoint(str(tmp_path), "DQN", "ALE/Pong-v5")
    assert os.path.basename(latest) == "DQN_ALE-Pong-v5_10.ckpt"  # 10 > 2 numerically, '/' made safe
    assert checkpoint.find_latest_checkpoint(str(tmp_path), "DQN", "CartPole-v1") is None


def test_not_a_checkpoint_is_refused(tmp_path):
    path = tmp_path / "x.ckpt"
    torch.save({"some": "dict"}, path)
    with pytest.raises(CheckpointError, match="not a Deep RL Zoo checkpoint"):
        checkpoint.load_checkpoint(str(path), "DQN", "CartPole-v1")
    path.write_text("hello")
    with pytest.raises(CheckpointError, match="truncated or not a checkpoint"):
        checkpoint.load_checkpoint(str(path), "DQN", "CartPole-v1")
