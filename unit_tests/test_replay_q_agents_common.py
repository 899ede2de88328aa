"""What every replay-based Q agent must do, checked once per agent: smoke runs of run_classic, run_atari
and eval_agent (with video), resume, and the common bad input. Agent-specific behaviour and learning
live in each agent's own test file."""

import csv
import importlib
import os
from types import SimpleNamespace

import pytest
import torch

from deep_rl_zoo import checkpoint, run_support
from deep_rl_zoo.config import EvalConfig
from deep_rl_zoo.errors import ConfigError

# package -> (checkpoint agent name, config class)
AGENTS = {
    "double_dqn": ("DoubleDQN", "DoubleDqnConfig"),
    "prioritized_dqn": ("PrioritizedDQN", "PrioritizedDqnConfig"),
    "c51_dqn": ("C51", "C51Config"),
}


@pytest.fixture(params=sorted(AGENTS))
def package(request) -> SimpleNamespace:
    name, config_name = AGENTS[request.param]
    train = importlib.import_module(f"deep_rl_zoo.{request.param}.train")
    return SimpleNamespace(
        name=name,
        train=train,
        config_cls=getattr(train, config_name),
        run_atari=importlib.import_module(f"deep_rl_zoo.{request.param}.run_atari"),
        eval_agent=importlib.import_module(f"deep_rl_zoo.{request.param}.eval_agent"),
    )


def tiny_classic_config(package, tmp_path, **overrides):
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
    return package.config_cls(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.smoke
def test_run_classic_writes_a_checkpoint_and_a_csv_row_per_iteration(package, tmp_path):
    state = package.train.main(tiny_classic_config(package, tmp_path))
    for iteration in (0, 1):
        assert os.path.isfile(
            tmp_path
            / "checkpoints"
            / f"{package.name}_CartPole-v1"
            / f"{package.name}_CartPole-v1_{iteration}.ckpt"
        )
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    assert [int(r["train_env_steps"]) for r in rows] == [300, 600]
    assert float(rows[-1]["learner_learner_steps"]) > 0  # it learned, not only acted


@pytest.mark.smoke
def test_run_atari_smoke_stores_each_frame_once(package, tmp_path):
    config = package.config_cls(
        **{
            **package.run_atari.DEFAULTS,
            "num_iterations": 1,
            "num_train_steps": 80,
            "num_eval_steps": 30,
            "max_episode_steps": 40,
            "replay_capacity": 200,
            "min_replay_size": 40,
            "batch_size": 8,
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "runs_dir": str(tmp_path / "runs"),
            "use_tensorboard": False,
            "show_progress": False,
        }
    )
    env = run_support.make_environment(config, 0, train=True)
    agent = package.train.build_agents(config, env, torch.device("cpu")).train_agent
    assert agent._writer.frame_store is not None
    state = package.train.main(config)
    assert state.train_env_steps == 80
    assert os.path.isfile(tmp_path / "checkpoints" / f"{package.name}_Pong" / f"{package.name}_Pong_0.ckpt")


@pytest.mark.smoke
def test_eval_agent_plays_a_checkpoint_and_records_a_video(package, tmp_path):
    package.train.main(tiny_classic_config(package, tmp_path, num_iterations=1))
    returns = package.eval_agent.main(
        EvalConfig(
            environment_name="CartPole-v1",
            num_episodes=2,
            load_checkpoint_file="latest",
            checkpoint_dir=str(tmp_path / "checkpoints"),
            recording_video_dir=str(tmp_path / "recordings"),
        )
    )
    assert len(returns) == 2 and all(r >= 1 for r in returns)
    assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "recordings"))


@pytest.mark.smoke
def test_resume_continues_where_the_run_stopped(package, tmp_path):
    name = package.name
    first = package.train.main(tiny_classic_config(package, tmp_path, num_iterations=2))
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / f"{name}_CartPole-v1" / f"{name}_CartPole-v1_1.ckpt"),
        name,
        "CartPole-v1",
    )
    resumed = package.train.main(tiny_classic_config(package, tmp_path, num_iterations=3, resume=True))
    assert resumed.run_dir == first.run_dir and resumed.train_env_steps == 900
    final = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / f"{name}_CartPole-v1" / f"{name}_CartPole-v1_2.ckpt"),
        name,
        "CartPole-v1",
    )
    assert final["agent"]["env_steps"] == saved["agent"]["env_steps"] + 300
    assert final["agent"]["learner_steps"] > saved["agent"]["learner_steps"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"environment_name": "CartPol-v1"}, "CartPole-v1"),
        ({"environment_name": "Pendulum-v1"}, "discrete"),
        ({"batch_size": 2000}, "batch_size"),
        ({"target_network_update_period": 0}, "target_network_update_period"),
    ],
)
def test_common_bad_input_is_rejected_before_any_work(package, tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        package.train.main(tiny_classic_config(package, tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")
