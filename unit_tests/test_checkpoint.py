"""Checkpoints: round trip, atomic writes, latest lookup, and refusal of bad files."""

import os
import struct

import pytest
import torch

from deep_rl_zoo import checkpoint
from deep_rl_zoo.errors import CheckpointError, DamagedFileError


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


def _flip_a_bit_of(path, value: float) -> None:
    """Flips one bit inside the stored bytes of the float32 `value` (tensor data, not a header)."""
    data = bytearray(path.read_bytes())
    at = data.find(struct.pack("<f", value))
    assert at > 0
    data[at + 1] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncated", "bit flip in a weight", "zero bytes"])
def test_a_damaged_checkpoint_is_refused_in_one_line_naming_it(tmp_path, damage):
    path = tmp_path / "a.ckpt"
    _save(path, value=1234.5)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:-100])
    elif damage == "zero bytes":
        path.write_bytes(b"")
    else:
        _flip_a_bit_of(path, 1234.5)  # torch.load alone would load a wrong weight without a word
    with pytest.raises(DamagedFileError) as error:
        checkpoint.load_checkpoint(str(path), "DQN", "CartPole-v1")
    message = str(error.value)
    assert message.startswith(str(path)) and "\n" not in message
    expected = {"truncated": "truncated", "zero bytes": "it is empty", "bit flip in a weight": "CRC-32"}
    assert expected[damage] in message


def test_resume_takes_the_newest_intact_checkpoint_and_names_the_damaged_ones(tmp_path):
    for iteration in range(4):
        _save(
            checkpoint.checkpoint_path(str(tmp_path), "DQN", "CartPole-v1", iteration), value=iteration + 0.5
        )
    newest = tmp_path / "DQN_CartPole-v1_3.ckpt"
    newest.write_bytes(b"")  # a disk that filled up mid-write, on a file system without atomic renames
    _flip_a_bit_of(tmp_path / "DQN_CartPole-v1_2.ckpt", 2.5)
    path, payload, skipped = checkpoint.load_newest_intact(str(tmp_path), "DQN", "CartPole-v1")
    assert os.path.basename(path) == "DQN_CartPole-v1_1.ckpt" and payload["agent"]["w"].item() == 1.5
    assert [line.split(" ")[0] for line in skipped] == [str(newest), str(tmp_path / "DQN_CartPole-v1_2.ckpt")]


def test_resume_with_every_checkpoint_damaged_is_one_error_naming_the_newest(tmp_path):
    for iteration in range(2):
        path = checkpoint.checkpoint_path(str(tmp_path), "DQN", "CartPole-v1", iteration)
        _save(path)
        open(path, "wb").close()
    with pytest.raises(
        CheckpointError, match=r"every checkpoint in .* is damaged; the newest: .*_1\.ckpt is"
    ):
        checkpoint.load_newest_intact(str(tmp_path), "DQN", "CartPole-v1")
