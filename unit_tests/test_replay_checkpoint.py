"""--checkpoint_replay: a replay agent's replay and frames saved beside its checkpoint, loaded without
unpickling, and a resumed agent that learns exactly as the uninterrupted one."""

import dataclasses
import errno
import importlib
import os
import subprocess
import sys
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint
from deep_rl_zoo.errors import CheckpointError, DamagedFileError
from deep_rl_zoo.types_ import TimeStep

# package -> config class
AGENTS = {"dqn": "DqnConfig", "prioritized_dqn": "PrioritizedDqnConfig", "rainbow": "RainbowConfig"}


class _FramesEnv(gym.Env):
    """Random 36x36 frames (the smallest the Nature CNN takes), stacked by 4 as on Atari."""

    observation_space = gym.spaces.Box(0, 255, shape=(4, 36, 36), dtype=np.uint8)
    action_space = gym.spaces.Discrete(3)


def _timesteps(num_steps: int, seed: int) -> list[TimeStep]:
    """A fixed stream of Atari-like timesteps: stacks of random frames, episodes of 5..30 steps."""
    rng = np.random.default_rng(seed)
    timesteps, frames, t, length = [], [], 0, 0
    for _ in range(num_steps):
        frame = rng.integers(0, 256, (36, 36), dtype=np.uint8)
        first = t == 0
        if first:
            frames, length = [frame] * 4, int(rng.integers(5, 31))
        else:
            frames = frames[1:] + [frame]
        last = t == length
        timesteps.append(TimeStep(np.stack(frames), float(rng.integers(-1, 2)), last, False, first, {}))
        t = 0 if last else t + 1
    return timesteps


def _build(package: str, config):
    torch.manual_seed(config.seed)  # network initialisation
    train = importlib.import_module(f"deep_rl_zoo.{package}.train")
    return train.build_agents(config, _FramesEnv(), torch.device("cpu")).train_agent


@pytest.mark.smoke
@pytest.mark.parametrize("package", sorted(AGENTS))
def test_resumed_agent_with_saved_replay_learns_exactly_as_the_uninterrupted_one(package, tmp_path):
    torch.set_num_threads(1)
    train = importlib.import_module(f"deep_rl_zoo.{package}.train")
    config_cls = getattr(train, AGENTS[package])
    config = config_cls(
        environment_name="Pong",
        replay_capacity=60,  # smaller than the 100 steps before the save: the rings have wrapped
        min_replay_size=30,
        batch_size=8,
        learn_interval=1,
        target_network_update_period=10,
        **({"n_step": 3} if "n_step" in {f.name for f in dataclasses.fields(config_cls)} else {}),
    )
    stream = _timesteps(140, seed=5)
    before, after = stream[:100], stream[100:]
    after = [after[0]._replace(first=True, reward=0.0, terminated=False)] + after[1:]  # a new episode

    uninterrupted = _build(package, config)
    for timestep in before:
        uninterrupted.step(timestep)
    path = str(tmp_path / "AGENT_Pong_0.ckpt")
    checkpoint.save_checkpoint(path, "AGENT", "Pong", 0, uninterrupted.state_dict(), {})
    checkpoint.save_arrays(checkpoint.replay_path(path), uninterrupted.replay_contents.state_arrays())
    assert os.path.isfile(str(tmp_path / "AGENT_Pong_0.replay.npz"))
    # One after the other, not interleaved: Rainbow's noise comes from torch's global generator.
    expected = _continue(uninterrupted, after)

    resumed = _build(package, config)
    resumed.load_state_dict(checkpoint.load_checkpoint(path, "AGENT", "Pong")["agent"])
    resumed.replay_contents.load_state_arrays(checkpoint.load_arrays(checkpoint.replay_path(path)))
    assert resumed.replay_contents.replay.size == 60
    actual = _continue(resumed, after)

    # Same batches from the same replay and generator states: the very same losses, bit for bit.
    learned = sum(not timestep.first for timestep in after)  # one gradient step per non-first step
    assert learned > 30 and len(expected) == learned
    assert actual == expected


def _continue(agent, timesteps) -> list[tuple[int, float]]:
    """Starts a new episode (as a resumed run does) and returns (action, loss) of each learning step."""
    agent.reset()
    learner_steps = agent.statistics["learner_steps"]
    trace = []
    for timestep in timesteps:
        action = agent.step(timestep)
        if agent.statistics["learner_steps"] > learner_steps:
            learner_steps = agent.statistics["learner_steps"]
            trace.append((action, agent.statistics["loss"]))
    return trace


def test_saving_needs_the_disk_space_and_says_how_much(tmp_path, monkeypatch):
    arrays = {"frames": np.zeros((1000, 84, 84), np.uint8)}  # 7,056,000 bytes
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", lambda _: SimpleNamespace(free=100 * 2**20))
    with pytest.raises(
        CheckpointError, match=r"not enough disk space .* needs 0\.26 GiB .* 0\.10 GiB are free"
    ):
        checkpoint.save_arrays(str(tmp_path / "x.replay.npz"), arrays)  # 7 MB + 256 MiB margin > 100 MiB
    assert os.listdir(tmp_path) == []  # nothing half-written


def test_loading_refuses_pickled_arrays_and_damaged_files(tmp_path):
    path = str(tmp_path / "evil.replay.npz")
    np.savez(path, payload=np.array([print], dtype=object))  # an object array is a pickle
    with pytest.raises(CheckpointError, match="pickled objects"):
        checkpoint.load_arrays(path)
    with open(path, "wb") as f:
        f.write(b"not a zip")
    with pytest.raises(CheckpointError, match="truncated or not a replay file"):
        checkpoint.load_arrays(path)
    with pytest.raises(CheckpointError, match="no replay file"):
        checkpoint.load_arrays(str(tmp_path / "missing.replay.npz"))
    with pytest.raises(CheckpointError, match="Python objects"):
        checkpoint.save_arrays(path, {"payload": np.array([print], dtype=object)})


@pytest.mark.smoke
def test_run_keeps_the_newest_replay_file_and_resume_restores_it(tmp_path, capsys):
    dqn_train = importlib.import_module("deep_rl_zoo.dqn.train")
    config = dqn_train.DqnConfig(
        num_iterations=2,
        num_train_steps=300,
        num_eval_steps=100,
        replay_capacity=1000,
        min_replay_size=100,
        batch_size=16,
        checkpoint_replay=True,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    dqn_train.main(config)
    (run_folder,) = os.listdir(tmp_path / "checkpoints")
    folder = tmp_path / "checkpoints" / run_folder

    def replay_files():
        return sorted(name for name in os.listdir(folder) if name.endswith(".replay.npz"))

    assert "DQN_CartPole-v1_1.ckpt" in os.listdir(folder)
    assert replay_files() == ["DQN_CartPole-v1_1.replay.npz"]  # iteration 0's was deleted
    saved = checkpoint.load_arrays(str(folder / "DQN_CartPole-v1_1.replay.npz"))
    assert int(saved["replay/num_added"]) == 600  # one-step DQN: one transition per env step
    capsys.readouterr()
    dqn_train.main(dataclasses.replace(config, num_iterations=3, resume=True))
    assert "restored 600 transitions" in capsys.readouterr().err
    assert replay_files() == ["DQN_CartPole-v1_2.replay.npz"]

    # A torn newest checkpoint and replay (a disk that failed mid-write): --resume takes iteration 1's
    # checkpoint, says which file it skipped, and starts with an empty replay (iteration 1's was deleted).
    newest = folder / "DQN_CartPole-v1_2.ckpt"
    newest.write_bytes(newest.read_bytes()[:1000])
    dqn_train.main(dataclasses.replace(config, num_iterations=4, resume=True))
    err = capsys.readouterr().err
    assert f"--resume: skipping a damaged checkpoint: {newest} is truncated or not a checkpoint file" in err
    assert f"resuming from {folder / 'DQN_CartPole-v1_1.ckpt'} (the newest intact checkpoint)" in err
    assert "no replay file" in err and "the replay starts empty" in err
    assert "DQN_CartPole-v1_3.ckpt" in os.listdir(folder)

    replay = folder / "DQN_CartPole-v1_3.replay.npz"
    replay.write_bytes(b"")  # a replay file of zero bytes beside an intact checkpoint
    dqn_train.main(dataclasses.replace(config, num_iterations=5, resume=True))
    err = capsys.readouterr().err
    assert (
        f"--checkpoint_replay: {replay} is truncated or not a replay file (it is empty); the replay starts empty"
        in err
    )
    assert "DQN_CartPole-v1_4.ckpt" in os.listdir(folder)


def test_a_replay_file_with_a_flipped_bit_is_refused_as_damaged(tmp_path):
    path = tmp_path / "x.replay.npz"
    checkpoint.save_arrays(str(path), {"frames": np.full(1000, 7, np.uint8)})
    data = bytearray(path.read_bytes())
    data[data.find(bytes([7] * 1000)) + 500] ^= 0x01  # one pixel 7 -> 6
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedFileError, match=r"x\.replay\.npz is damaged: .* CRC-32"):
        checkpoint.load_arrays(str(path))


@pytest.mark.smoke
def test_a_full_disk_skips_that_save_with_a_warning_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    dqn_train = importlib.import_module("deep_rl_zoo.dqn.train")
    config = dqn_train.DqnConfig(
        num_iterations=4,
        num_train_steps=200,
        num_eval_steps=50,
        replay_capacity=1000,
        min_replay_size=100,
        batch_size=16,
        checkpoint_replay=True,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    # The disk is full while iteration 1's replay and iteration 2's checkpoint are written.
    full_for = ("DQN_CartPole-v1_1.replay.npz", "DQN_CartPole-v1_2.ckpt")
    replace = os.replace

    def replace_on_a_full_disk(source, destination):
        if os.path.basename(destination) in full_for:
            raise OSError(errno.ENOSPC, "No space left on device")
        replace(source, destination)

    monkeypatch.setattr(os, "replace", replace_on_a_full_disk)
    dqn_train.main(config)
    captured = capsys.readouterr()
    (run_folder,) = os.listdir(tmp_path / "checkpoints")
    folder = tmp_path / "checkpoints" / run_folder
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: no room to write {folder}/DQN_CartPole-v1_1.replay.npz: No space left on device; skipped "
        f"saving iteration 1; the last good checkpoint, {folder}/DQN_CartPole-v1_0.ckpt, is intact and --resume "
        "continues it; the run goes on and saves again after the next iteration",
        f"warning: no room to write {folder}/DQN_CartPole-v1_2.ckpt: No space left on device; skipped "
        f"saving iteration 2; the last good checkpoint, {folder}/DQN_CartPole-v1_0.ckpt, is intact and --resume "
        "continues it; the run goes on and saves again after the next iteration",
    ]
    assert "iteration 2: " in captured.out and "not saved (no room, see the warning)" in captured.out
    # No temporary file, no replay without its checkpoint; iteration 3 saved once there was room again.
    assert sorted(name for name in os.listdir(folder) if "best" not in name) == [
        "DQN_CartPole-v1_0.ckpt",
        "DQN_CartPole-v1_3.ckpt",
        "DQN_CartPole-v1_3.replay.npz",
    ]


def _limit_file_size(max_bytes: int) -> None:
    import resource  # POSIX only

    # A write past the limit fails with EFBIG (Python ignores SIGXFSZ, which would kill the process).
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, resource.RLIM_INFINITY))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="sets a file-size limit in the child (POSIX)")
def test_a_file_size_limit_in_a_real_run_keeps_the_last_good_checkpoint_for_resume(tmp_path):
    command = [
        sys.executable,
        "-m",
        "deep_rl_zoo.dqn.run_classic",
        "--num_train_steps=200",
        "--num_eval_steps=50",
        "--min_replay_size=100",
        "--batch_size=16",
        "--checkpoint_replay",
        f"--checkpoint_dir={tmp_path / 'checkpoints'}",
        f"--runs_dir={tmp_path / 'runs'}",
        "--nouse_tensorboard",
        "--noshow_progress",
        "--nostop_when_solved",
    ]

    def run(num_iterations, resume, limit=None):
        flags = [f"--num_iterations={num_iterations}"] + (["--resume"] if resume else [])
        return subprocess.run(
            command + flags,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            preexec_fn=(lambda: _limit_file_size(limit)) if limit else None,
        )

    first = run(1, resume=False)
    assert first.returncode == 0, first.stderr[-2000:]
    folder = next((tmp_path / "checkpoints").iterdir())
    good = folder / "DQN_CartPole-v1_0.ckpt"
    good_bytes = good.read_bytes()
    # A limit far below a checkpoint's size: every save of two more iterations fails, the run goes on.
    full = run(3, resume=True, limit=20_000)
    assert full.returncode == 0, full.stderr[-2000:]
    warnings = [line for line in full.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and all(
        "File too large" in w and f"checkpoint, {good}, is intact" in w for w in warnings
    )
    assert good.read_bytes() == good_bytes
    assert not [name for name in os.listdir(folder) if name.startswith(".tmp-")]
    resumed = run(2, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming from {good}" in resumed.stderr
    assert "restored" in resumed.stderr  # iteration 0's replay file was kept with its checkpoint


@pytest.mark.smoke
def test_resume_with_other_flags_adapts_or_refuses_in_one_line_naming_the_flag(tmp_path, capsys):
    dqn_train = importlib.import_module("deep_rl_zoo.dqn.train")
    config = dqn_train.DqnConfig(
        num_iterations=1,
        num_train_steps=200,
        num_eval_steps=50,
        replay_capacity=1000,
        min_replay_size=100,
        batch_size=16,
        checkpoint_replay=True,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    dqn_train.main(config)
    again = dataclasses.replace(config, num_iterations=2, resume=True)
    # The network's shape: refused before any work, naming the flag and both values.
    with pytest.raises(CheckpointError) as error:
        dqn_train.main(dataclasses.replace(again, hidden_sizes=(32,)))
    assert "\n" not in str(error.value)
    assert "--hidden_sizes=(128, 128) in the checkpoint, (32,) now" in str(error.value)
    # The replay's capacity: the 200 saved transitions do not fit a replay of 150.
    with pytest.raises(CheckpointError, match=r"--replay_capacity=1000 in the checkpoint, 150 now"):
        dqn_train.main(dataclasses.replace(again, replay_capacity=150))
    capsys.readouterr()
    # A learning rate: adapts, and says so.
    dqn_train.main(dataclasses.replace(again, learning_rate=1e-3))
    assert (
        "--resume: flags changed since the checkpoint: --learning_rate=0.001 (was 0.002)"
        in capsys.readouterr().err
    )
