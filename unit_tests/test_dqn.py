"""DQN end to end: smoke runs of every script, resume, determinism, bad input, and a learning test."""

import csv
import dataclasses
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint, replay
from deep_rl_zoo.config import QEvalConfig
from deep_rl_zoo.dqn import agent as dqn_agent
from deep_rl_zoo.dqn import eval_agent, train
from deep_rl_zoo.errors import CheckpointError, ConfigError, NonFiniteLossError
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.types_ import TimeStep
from unit_tests.deadlines import Deadline, answers_ctrl_c, under_load


def tiny_classic_config(tmp_path, **overrides) -> train.DqnConfig:
    values = dict(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_train_steps=300,
        num_eval_steps=200,
        replay_capacity=1000,
        min_replay_size=100,
        batch_size=16,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    values.update(overrides)
    return train.DqnConfig(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.smoke
def test_eval_agent_without_checkpoint_says_it_plays_random_weights_on_atari(tmp_path, capsys):
    returns = eval_agent.main(
        QEvalConfig(
            environment_name="Pong",
            num_episodes=1,
            max_episode_steps=20,
            recording_video_dir=str(tmp_path / "v"),
        )
    )
    assert len(returns) == 1
    assert "random weights" in capsys.readouterr().out
    assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "v"))


@pytest.mark.smoke
def test_resume_restores_the_exact_agent_state(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    payload = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "DQN_CartPole-v1" / "DQN_CartPole-v1_0.ckpt"), "DQN", "CartPole-v1"
    )
    config = tiny_classic_config(tmp_path)
    from deep_rl_zoo import environments

    agents = train.build_agents(
        config, environments.make_environment(config, 5, train=True), torch.device("cpu")
    )
    agents.train_agent.load_state_dict(payload["agent"])
    restored = agents.train_agent.state_dict()
    for key in ("network", "target_network"):
        for name, tensor in payload["agent"][key].items():
            assert torch.equal(restored[key][name], tensor)
    assert restored["rng"] == payload["agent"]["rng"]
    schedule = LinearSchedule(
        config.exploration_epsilon_begin_value,
        config.exploration_epsilon_end_value,
        config.min_replay_size,
        config.exploration_epsilon_decay_steps,
    )
    assert agents.train_agent.epsilon == pytest.approx(schedule(payload["agent"]["env_steps"]))


@pytest.mark.smoke
def test_same_seed_gives_identical_returns(tmp_path):
    a = train.main(tiny_classic_config(tmp_path / "a", seed=3))
    b = train.main(tiny_classic_config(tmp_path / "b", seed=3))
    rows_a = read_csv(os.path.join(a.run_dir, "results.csv"))
    rows_b = read_csv(os.path.join(b.run_dir, "results.csv"))
    keys = ("train_mean_episode_return", "eval_mean_episode_return", "learner_loss")
    assert [[r[k] for k in keys] for r in rows_a] == [[r[k] for k in keys] for r in rows_b]


@pytest.mark.smoke
def test_an_atari_run_records_the_precision_it_chose_and_keeps_it_on_resume(tmp_path, monkeypatch):
    from deep_rl_zoo.networks import common

    def atari_config(**overrides):
        tiny = dict(environment_name="Pong", num_iterations=1, num_train_steps=40, num_eval_steps=0)
        return tiny_classic_config(tmp_path, min_replay_size=32, batch_size=4, **{**tiny, **overrides})

    monkeypatch.setattr(common, "native_bfloat16", lambda device: True)
    state = train.main(atari_config())  # --bfloat16 unset: this "CPU" has it natively
    assert common._torso_autocast_dtype is None  # the run handed its process back in float32
    saved = checkpoint.load_checkpoint(
        os.path.join(tmp_path, "checkpoints", "DQN_Pong", "DQN_Pong_0.ckpt"), "DQN", "PongNoFrameskip-v4"
    )
    assert saved["config"]["bfloat16"] is True
    monkeypatch.setattr(common, "native_bfloat16", lambda device: False)  # resumed on another machine
    train.main(atari_config(num_iterations=2, resume=True))
    with open(os.path.join(state.run_dir, "config.txt")) as f:
        recorded = [line.strip() for line in f if line.startswith("bfloat16=")]
    assert recorded == ["bfloat16=True", "bfloat16=True"]  # once per session: the resumed run kept it


@pytest.mark.smoke
def test_tensorboard_logs_can_be_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    state = train.main(tiny_classic_config(tmp_path, use_tensorboard=True, num_train_steps=1000))
    events = EventAccumulator(state.run_dir)
    events.Reload()
    tags = events.Tags()["scalars"]
    for tag in ("train/episode_return", "eval/mean_episode_return", "learner/loss", "learner/epsilon"):
        assert tag in tags
    # x-axis is env steps: the last evaluation point sits at 2 iterations x 1000 steps.
    assert events.Scalars("eval/mean_episode_return")[-1].step == 2000


@pytest.mark.smoke
def test_an_existing_run_folder_is_never_reused(tmp_path):
    a = train.main(tiny_classic_config(tmp_path, num_iterations=1, tag="x"))
    b = train.main(
        tiny_classic_config(tmp_path, num_iterations=1, tag="x", checkpoint_dir=str(tmp_path / "c2"))
    )
    assert a.run_dir != b.run_dir and os.path.isdir(a.run_dir) and os.path.isdir(b.run_dir)


# ----------------------------------------------------------------------------------------------------
# Bad input: a clear error before any work, nothing saved is touched.


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"environment_name": "CartPol-v1"}, "CartPole-v1"),
        ({"environment_name": "Pendulum-v1"}, "discrete"),
        ({"num_train_steps": 0}, "num_train_steps"),
        ({"num_iterations": -1}, "num_iterations"),
        ({"batch_size": 2000}, "batch_size"),
    ],
)
def test_bad_input_is_rejected_before_any_work(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        train.main(tiny_classic_config(tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints")
    assert not os.path.exists(tmp_path / "runs")


@pytest.mark.smoke
def test_a_second_run_gets_its_own_folders_and_never_touches_the_first(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    first = tmp_path / "checkpoints" / "DQN_CartPole-v1" / "DQN_CartPole-v1_0.ckpt"
    before = first.read_bytes()
    train.main(tiny_classic_config(tmp_path, num_iterations=1, seed=7))
    assert first.read_bytes() == before
    assert (tmp_path / "checkpoints" / "DQN_CartPole-v1-2" / "DQN_CartPole-v1_0.ckpt").is_file()
    assert sorted(os.listdir(tmp_path / "runs")) == ["DQN_CartPole-v1", "DQN_CartPole-v1-2"]


def test_resume_without_checkpoint_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no DQN checkpoint"):
        train.main(tiny_classic_config(tmp_path, resume=True))


def _eval(tmp_path, path, environment_name="CartPole-v1"):
    return eval_agent.main(
        QEvalConfig(environment_name=environment_name, load_checkpoint_file=str(path), recording_video_dir="")
    )


@pytest.mark.smoke
def test_missing_truncated_and_foreign_checkpoints_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        _eval(tmp_path, tmp_path / "missing.ckpt")

    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    good = tmp_path / "checkpoints" / "DQN_CartPole-v1" / "DQN_CartPole-v1_0.ckpt"
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        _eval(tmp_path, truncated)
    with pytest.raises(CheckpointError, match="trained on CartPole-v1, not Acrobot-v1"):
        _eval(tmp_path, good, environment_name="Acrobot-v1")

    foreign = tmp_path / "foreign.ckpt"
    payload = torch.load(good, weights_only=True)
    payload["agent_name"] = "PPO"
    torch.save(payload, foreign)
    with pytest.raises(CheckpointError, match="written by agent PPO"):
        _eval(tmp_path, foreign)


class _Payload:
    def __reduce__(self):
        return (os.system, (f"touch {os.getcwd()}/pwned",))


def test_a_checkpoint_carrying_code_is_refused_and_never_run(tmp_path):
    path = tmp_path / "evil.ckpt"
    torch.save({"format": checkpoint.FORMAT, "agent": _Payload()}, path)
    with pytest.raises(CheckpointError, match="refused"):
        _eval(tmp_path, path)
    assert not os.path.exists(os.path.join(os.getcwd(), "pwned"))


@pytest.mark.slow
def test_cli_prints_one_line_error_and_exits_non_zero(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "deep_rl_zoo.dqn.run_classic", "--environment_name=CartPol-v1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=under_load(120),
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: unknown environment 'CartPol-v1'")
    assert "CartPole-v1" in result.stderr
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")


@pytest.mark.slow
def test_ctrl_c_saves_the_run_where_it_stood_and_keeps_written_checkpoints(tmp_path):
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deep_rl_zoo.dqn.run_classic",
            "--num_train_steps=200",
            "--num_eval_steps=50",
            "--num_iterations=100000",
            "--min_replay_size=50",
            "--nouse_tensorboard",
            "--noshow_progress",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=answers_ctrl_c,  # Ctrl-C must reach it even if pytest runs with SIGINT ignored
    )
    first = tmp_path / "checkpoints" / "DQN_CartPole-v1" / "DQN_CartPole-v1_0.ckpt"
    saved = Deadline(90)  # a Python start-up importing torch, then one iteration (stretched by the load)
    while not first.exists() and not saved.passed():
        time.sleep(0.2)
    assert first.exists()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=under_load(60))
    assert process.returncode == 130
    assert "interrupted: stopped in iteration" in stderr and "which --resume continues" in stderr
    assert [n for n in os.listdir(first.parent) if n.endswith("_interrupted.ckpt")]  # saved where it stood
    for name in os.listdir(first.parent):
        path = first.parent / name
        assert not name.startswith(".tmp")
        checkpoint.load_checkpoint(str(path), "DQN", "CartPole-v1")  # every file left is complete


class _NanNetwork(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))

    def forward(self, x):
        from deep_rl_zoo.networks.value import QNetworkOutput

        return QNetworkOutput(q_values=self.w * torch.full((x.shape[0], 2), float("nan")))


def test_a_nan_loss_stops_the_run_naming_the_step():
    network = _NanNetwork()
    rng = np.random.default_rng(0)
    agent = dqn_agent.Dqn(
        network=network,
        optimizer=torch.optim.SGD(network.parameters(), lr=0.1),
        replay=replay.UniformReplay(100, rng=np.random.default_rng(1)),
        transition_accumulator=replay.TransitionAccumulator(n=1, discount=0.99),
        exploration_epsilon=LinearSchedule(1.0, 1.0, 0, 0),
        num_actions=2,
        min_replay_size=4,
        learn_interval=1,
        batch_size=4,
        target_network_update_period=10,
        max_grad_norm=0.0,
        rng=rng,
        device=torch.device("cpu"),
    )
    agent.reset()
    observation = np.zeros(3, dtype=np.float32)
    agent.step(TimeStep(observation, 0.0, False, False, True, {}))
    with pytest.raises(NonFiniteLossError, match="learner step 1"):
        for _ in range(10):
            agent.step(TimeStep(observation, 1.0, False, False, False, {}))


# ----------------------------------------------------------------------------------------------------


@pytest.mark.learning
def test_dqn_learns_cartpole(tmp_path):
    """DQN's default classic flags reach a greedy mean of 300 (random play: about 22) within 40,000 env steps.

    Guards the whole DQN loop (acting, replay, target network, optimizer) on the budget the benchmark
    uses: a bug that stops learning leaves the greedy mean under 100. Seed 1 is the config's default, not
    one picked for passing: of the five seeds of benchmarks/README.md (`dqn_cartpole.py`), seeds 1, 3
    and 4 reach 475 by 40,000 env steps, so they pass; seed 5 (475 only at 50,000) may, seed 2 (best 294
    in 50,000) would not. The best of up to 8 evaluations counts because DQN's greedy mean on
    CartPole swings by 100-200 between evaluations (see `DqnConfig`), and 300 is not a low bar for it.
    Runs are deterministic per seed.
    """
    config = dataclasses.replace(
        tiny_classic_config(tmp_path),
        seed=1,
        num_iterations=8,
        num_train_steps=5000,
        num_eval_steps=2500,
        replay_capacity=train.DqnConfig.replay_capacity,
        min_replay_size=train.DqnConfig.min_replay_size,
        batch_size=train.DqnConfig.batch_size,
        stop_when_solved=True,
    )
    state = train.main(config)
    best = max(
        float(r["eval_mean_episode_return"]) for r in read_csv(os.path.join(state.run_dir, "results.csv"))
    )
    assert best >= 300, f"best greedy evaluation mean {best} after {state.train_env_steps} env steps"


@pytest.mark.smoke
def test_debug_screenshots_save_the_terminal_frame_of_every_nth_episode(tmp_path):
    state = train.main(tiny_classic_config(tmp_path, num_iterations=1, debug_screenshots_interval=2))
    shots = sorted(os.listdir(os.path.join(state.run_dir, "screenshots")))  # with the run's logs
    assert not os.path.exists(tmp_path / "screenshots")  # the top-level folder holds README pictures
    assert shots and all(name.endswith(".png") for name in shots)
    assert all(int(name.split("episode")[1][:-4]) % 2 == 0 for name in shots)


@pytest.mark.smoke
@pytest.mark.parametrize("environment_name", ["MountainCar-v0", "Acrobot-v1", "LunarLander-v2"])
def test_run_classic_accepts_the_other_classic_tasks(tmp_path, environment_name, capsys):
    state = train.main(tiny_classic_config(tmp_path, environment_name=environment_name, num_iterations=1))
    assert state.train_env_steps == 300
    if environment_name == "LunarLander-v2":
        assert "LunarLander-v3" in capsys.readouterr().err  # the old name still works, with a note


@pytest.mark.slow
def test_cli_run_then_eval_exit_zero(tmp_path):
    """The two commands of `make demo`, by their command lines: both must exit 0."""
    common = ["--environment_name=CartPole-v1", f"--checkpoint_dir={tmp_path / 'c'}"]
    train_run = subprocess.run(
        [
            sys.executable,
            "-m",
            "deep_rl_zoo.dqn.run_classic",
            *common,
            "--num_iterations=1",
            "--num_train_steps=200",
            "--num_eval_steps=100",
            "--min_replay_size=50",
            "--noshow_progress",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=under_load(300),
    )
    assert train_run.returncode == 0, train_run.stderr[-2000:]
    eval_run = subprocess.run(
        [
            sys.executable,
            "-m",
            "deep_rl_zoo.dqn.eval_agent",
            *common,
            "--load_checkpoint_file=latest",
            "--num_episodes=1",
            f"--recording_video_dir={tmp_path / 'v'}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=under_load(300),
    )
    assert eval_run.returncode == 0, eval_run.stderr[-2000:]
    assert "mean return over 1 episode:" in eval_run.stdout
