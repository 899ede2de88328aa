"""Configuration validation, the flag machinery, schedules and the run logger."""

import csv
import subprocess
import sys

import pytest

from deep_rl_zoo import trackers
from deep_rl_zoo.config import EvalConfig, RunConfig, trained_config
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.schedules import LinearSchedule


@pytest.mark.parametrize(
    "overrides",
    [{"num_train_steps": 0}, {"num_eval_steps": -1}, {"sticky_action_probability": 1.5}, {"num_threads": -1}],
)
def test_impossible_flag_values_are_config_errors(overrides):
    with pytest.raises(ConfigError):
        RunConfig(**overrides)


@pytest.mark.parametrize("config_class", [RunConfig, EvalConfig])
def test_a_frame_too_small_for_the_nature_cnn_is_refused_before_the_run(config_class):
    with pytest.raises(ConfigError) as excinfo:
        config_class(environment_height=35)
    assert (
        str(excinfo.value)
        == "--environment_height must be at least 36 (the Nature CNN's smallest frame), got 35"
    )
    with pytest.raises(ConfigError, match="--environment_width must be at least 36"):
        config_class(environment_width=0)
    assert config_class(environment_height=36, environment_width=36).environment_height == 36


@pytest.mark.slow
def test_every_flag_of_the_dqn_scripts_has_a_help_string():
    result = subprocess.run(
        [sys.executable, "-m", "deep_rl_zoo.dqn.run_classic", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    for flag in ("--environment_name", "--num_train_steps", "--[no]resume", "--learning_rate", "--tag"):
        assert flag in result.stdout
    # absl prints "(default: ...)" right after the help; an empty help would leave the flag name alone
    assert "--learning_rate: Adam learning rate." in result.stdout
    assert "--environment_height" not in result.stdout  # Atari-only flags stay off classic scripts


def test_linear_schedule_holds_then_decays_then_holds():
    schedule = LinearSchedule(begin_value=1.0, end_value=0.1, begin_t=10, decay_steps=100)
    # before begin_t: 1.0; halfway: 1.0 + 0.5 * (0.1 - 1.0) = 0.55; after: 0.1
    assert schedule(0) == 1.0 and schedule(10) == 1.0
    assert schedule(60) == pytest.approx(0.55)
    assert schedule(10_000) == pytest.approx(0.1)


def test_csv_gets_one_header_and_one_row_per_call(tmp_path):
    logger = trackers.RunLogger(str(tmp_path / "run"), False, str(tmp_path / "results.csv"))
    logger.csv_row({"iteration": 0, "eval_mean_episode_return": 10.0})
    logger.csv_row({"iteration": 1, "eval_mean_episode_return": 20.0})
    with open(tmp_path / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["eval_mean_episode_return"] for r in rows] == ["10.0", "20.0"]


def test_target_return_must_be_a_number_and_needs_evaluations():
    assert RunConfig(target_return=18.0).target_return == 18.0
    with pytest.raises(ConfigError, match="--target_return must be a finite number, got nan"):
        RunConfig(target_return=float("nan"))
    with pytest.raises(ConfigError, match="--target_return needs evaluations"):
        RunConfig(target_return=18.0, num_eval_steps=0)


def test_target_return_replaces_the_envs_reward_threshold():
    from deep_rl_zoo import environments, gym_env

    env = gym_env.create_classic_environment("CartPole-v1", seed=0)
    assert environments.solved_return_of(RunConfig(), env) == 475.0  # CartPole-v1's threshold
    assert environments.solved_return_of(RunConfig(target_return=200.0), env) == 200.0
    assert environments.solved_return_of(RunConfig(target_return=200.0, stop_when_solved=False), env) == 200.0
    assert environments.solved_return_of(RunConfig(stop_when_solved=False), env) is None


def test_trained_config_rebuilds_a_checkpoints_flags_as_the_run_had_them():
    from deep_rl_zoo.impala.train import ImpalaConfig

    saved = {"config": {"hidden_sizes": [32, 16], "image_torso": "deep", "a_flag_since_removed": 3}}
    config = trained_config(ImpalaConfig, saved, environment_name="Pong")
    # JSON gives the tuple back as a list: the rebuilt config must equal the run's own, tuple and all.
    assert config == ImpalaConfig(hidden_sizes=(32, 16), image_torso="deep", environment_name="Pong")
    assert trained_config(ImpalaConfig, None) == ImpalaConfig()
    # A field older checkpoints lack gets the value they were trained with; a saved value wins over it.
    assert trained_config(ImpalaConfig, {"config": {}}, {"image_torso": "deep"}).image_torso == "deep"
    assert trained_config(ImpalaConfig, saved, {"image_torso": "shallow"}).image_torso == "deep"
