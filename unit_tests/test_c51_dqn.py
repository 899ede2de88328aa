"""C51 end to end: smoke runs of every script, resume, bad input, the distributions, learning."""

import csv
import os

import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint, run_support
from deep_rl_zoo.c51_dqn import eval_agent, run_atari, train
from deep_rl_zoo.config import EvalConfig
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.networks.value import build_c51_network

NAME = "C51"


def tiny_classic_config(tmp_path, **overrides) -> train.C51Config:
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
    return train.C51Config(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.smoke
def test_run_classic_writes_a_checkpoint_and_a_csv_row_per_iteration(tmp_path):
    state = train.main(tiny_classic_config(tmp_path))
    for iteration in (0, 1):
        assert os.path.isfile(tmp_path / "checkpoints" / f"{NAME}_CartPole-v1_{iteration}.ckpt")
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    assert [int(r["train_env_steps"]) for r in rows] == [300, 600]
    assert float(rows[-1]["learner_learner_steps"]) > 0  # it learned, not only acted


@pytest.mark.smoke
def test_run_atari_smoke_stores_each_frame_once(tmp_path):
    config = train.C51Config(
        **{
            **run_atari.DEFAULTS,
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
    assert train.build_agents(config, env, torch.device("cpu")).train_agent._writer.frame_store is not None
    state = train.main(config)
    assert state.train_env_steps == 80
    assert os.path.isfile(tmp_path / "checkpoints" / f"{NAME}_Pong_0.ckpt")


@pytest.mark.smoke
def test_eval_agent_plays_a_checkpoint_and_records_a_video(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    returns = eval_agent.main(
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
def test_resume_continues_where_the_run_stopped(tmp_path):
    first = train.main(tiny_classic_config(tmp_path, num_iterations=2))
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / f"{NAME}_CartPole-v1_1.ckpt"), NAME, "CartPole-v1"
    )
    resumed = train.main(tiny_classic_config(tmp_path, num_iterations=3, resume=True))
    assert resumed.run_dir == first.run_dir and resumed.train_env_steps == 900
    final = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / f"{NAME}_CartPole-v1_2.ckpt"), NAME, "CartPole-v1"
    )
    assert final["agent"]["env_steps"] == saved["agent"]["env_steps"] + 300
    assert final["agent"]["learner_steps"] > saved["agent"]["learner_steps"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"environment_name": "CartPol-v1"}, "CartPole-v1"),
        ({"environment_name": "Pendulum-v1"}, "discrete"),
        ({"batch_size": 2000}, "batch_size"),
        ({"num_atoms": 1}, "num_atoms"),
        ({"v_min": 10.0, "v_max": -10.0}, "v_min"),
    ],
)
def test_bad_input_is_rejected_before_any_work(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        train.main(tiny_classic_config(tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")


def test_network_outputs_distributions_whose_means_are_the_q_values():
    atoms = torch.linspace(-10.0, 10.0, 5)
    for observation_shape in [(4,), (4, 84, 84)]:
        network = build_c51_network(observation_shape, 3, atoms, (16,))
        dtype = torch.uint8 if len(observation_shape) == 3 else torch.float32
        output = network(torch.zeros(2, *observation_shape, dtype=dtype))
        assert output.q_logits.shape == (2, 3, 5) and output.q_values.shape == (2, 3)
        expected = (torch.softmax(output.q_logits, dim=2) * atoms).sum(dim=2)
        torch.testing.assert_close(output.q_values, expected)
        assert -10.0 <= output.q_values.min() and output.q_values.max() <= 10.0


def test_eval_agent_rebuilds_the_support_of_the_checkpoint(tmp_path):
    # A run with a non-default support must be playable: the atoms come from the checkpoint's config.
    train.main(tiny_classic_config(tmp_path, num_iterations=1, num_atoms=11, v_min=-5.0, v_max=5.0))
    returns = eval_agent.main(
        EvalConfig(
            num_episodes=1,
            load_checkpoint_file="latest",
            checkpoint_dir=str(tmp_path / "checkpoints"),
            recording_video_dir="",
        )
    )
    assert len(returns) == 1


@pytest.mark.learning
def test_c51_learns_cartpole(tmp_path):
    """C51's default classic flags reach a clearly learned greedy return within 15,000 env steps.

    Every classic default as `run_classic` has it, only fewer iterations. Seed 1 measured (runs are
    deterministic per seed): greedy evaluation means 40, 215, 237 after 5,000, 10,000, ... env steps.
    """
    config = train.C51Config(
        seed=1,
        num_iterations=3,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
    )
    state = train.main(config)
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    best = max(float(r["eval_mean_episode_return"]) for r in rows)
    assert best >= 150, f"best greedy evaluation mean {best} after {state.train_env_steps} env steps"
    assert np.isfinite(float(rows[-1]["learner_loss"]))
