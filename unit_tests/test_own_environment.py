"""An environment of the user's own (docs/own_environment.md): `module:id` names, `--env_kwargs`, and the
Atari-style preprocessing of image observations, with the small envs of `unit_tests/toy_envs.py`."""

import os
import subprocess
import sys

import numpy as np
import pytest

from deep_rl_zoo import environments, errors, evaluation, gym_env
from deep_rl_zoo.config import EvalConfig, QEvalConfig, RunConfig
from deep_rl_zoo.dqn import eval_agent, train
from unit_tests.deadlines import under_load

VECTOR = "unit_tests.toy_envs:ToyVector-v0"
IMAGE = "unit_tests.toy_envs:ToyImage-v0"
CONTINUOUS = "unit_tests.toy_envs:ToyContinuous-v0"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _walk_right(env, num_steps: int):
    """Resets, then takes action 1 `num_steps` times; returns the observations and the last step."""
    observation, _ = env.reset(seed=0)
    observations, step = [observation], None
    for _ in range(num_steps):
        step = env.step(1)
        observations.append(step[0])
    return observations, step


def test_module_colon_id_imports_the_module_and_resolves_to_its_id():
    assert gym_env.resolve_environment_name(VECTOR) == "ToyVector-v0"
    assert not gym_env.is_atari(VECTOR)


def test_a_module_that_cannot_be_imported_is_a_one_line_error():
    with pytest.raises(errors.ConfigError) as excinfo:
        gym_env.resolve_environment_name("no_such_package_xyz:MyEnv-v0")
    assert str(excinfo.value) == (
        "unknown environment 'no_such_package_xyz:MyEnv-v0': cannot import its module 'no_such_package_xyz' "
        "(No module named 'no_such_package_xyz'); is it installed, or on PYTHONPATH?"
    )


def test_an_id_the_module_does_not_register_names_the_ones_it_does():
    with pytest.raises(errors.ConfigError) as excinfo:
        gym_env.resolve_environment_name("unit_tests.toy_envs:ToyVectr-v0")
    message = str(excinfo.value)
    assert "importing unit_tests.toy_envs registered no environment 'ToyVectr-v0'" in message
    assert "did you mean unit_tests.toy_envs:ToyVector-v0" in message
    assert "\n" not in message


def test_env_kwargs_reach_the_constructor():
    # A corridor of 3 cells: two steps right reach the end, return 1.
    env = environments.make_environment(
        RunConfig(environment_name=VECTOR, env_kwargs='{"length": 3}'), 0, train=True
    )
    observations, (_, reward, terminated, _, info) = _walk_right(env, 2)
    assert [o[0] for o in observations] == [0.0, 0.5, 1.0]  # cell / (length - 1)
    assert terminated and reward == 1.0
    assert info["episode"]["r"] == 1.0 and info["episode"]["l"] == 2


def test_bad_env_kwargs_are_one_line_errors():
    with pytest.raises(errors.ConfigError, match=r"--env_kwargs is not valid JSON"):
        RunConfig(env_kwargs="{length: 3}")
    with pytest.raises(errors.ConfigError, match=r"--env_kwargs must be a JSON object"):
        RunConfig(env_kwargs="[3]")
    config = RunConfig(environment_name=VECTOR, env_kwargs='{"lenght": 3}')
    with pytest.raises(errors.ConfigError) as excinfo:
        environments.make_environment(config, 0, train=True)
    assert str(excinfo.value) == (
        'cannot create ToyVector-v0 with --env_kwargs={"lenght": 3}: '
        "ToyCorridor.__init__() got an unexpected keyword argument 'lenght'"
    )
    with pytest.raises(errors.ConfigError, match="--env_kwargs cannot set render_mode"):
        environments.make_environment(
            RunConfig(environment_name=VECTOR, env_kwargs='{"render_mode": null}'), 0, train=True
        )


def test_image_observations_get_the_atari_style_preprocessing():
    # 12x12 RGB frames, a white column at the agent's cell -> gray 36x48, the last 4 stacked.
    config = RunConfig(environment_name=IMAGE, environment_height=36, environment_width=48)
    env = environments.make_environment(config, 0, train=True)
    assert env.observation_space.shape == (4, 36, 48) and env.observation_space.dtype == np.uint8
    observations, _ = _walk_right(env, 1)
    first, second = observations
    assert (first == first[-1]).all()  # a fresh episode's stack repeats its first frame
    # Cell 0 of 5 is pixel column 0 of 12, i.e. columns 0-3 of 48; cell 1 is pixel 3 (round(11 / 4)): 12-15.
    assert first[-1][:, :4].min() == 255 and first[-1][:, 4:].max() == 0
    assert second[-1][:, 12:16].min() == 255 and second[-1][:, :12].max() == 0
    assert (second[:3] == first[-1]).all()  # the stack moved on by one frame


def test_vector_observations_are_not_preprocessed():
    env = environments.make_environment(RunConfig(environment_name=VECTOR), 0, train=True)
    assert env.observation_space.shape == (2,)


def test_an_action_space_the_agent_cannot_use_is_a_one_line_error_before_any_file(tmp_path):
    config = train.DqnConfig(
        environment_name=CONTINUOUS, runs_dir=str(tmp_path / "runs"), checkpoint_dir=str(tmp_path / "c")
    )
    with pytest.raises(
        errors.ConfigError, match=r"DQN needs a discrete action space; ToyContinuous-v0 has Box"
    ):
        train.main(config)
    assert not os.path.exists(tmp_path / "runs") and not os.path.exists(tmp_path / "c")


def test_scripts_point_image_envs_to_run_atari_and_vector_envs_to_run_classic(capsys):
    with pytest.raises(errors.ConfigError) as excinfo:
        gym_env.check_script_fits_environment("deep_rl_zoo.dqn.run_classic", IMAGE)
    assert str(excinfo.value) == (
        f"{IMAGE} has image observations: use python -m deep_rl_zoo.dqn.run_atari --environment_name={IMAGE}"
    )
    with pytest.raises(errors.ConfigError, match="use python -m deep_rl_zoo.dqn.run_classic"):
        gym_env.check_script_fits_environment("deep_rl_zoo.dqn.run_atari", VECTOR)
    with pytest.raises(
        errors.ConfigError, match="has continuous actions: use python -m deep_rl_zoo.ppo.run_continuous"
    ):
        gym_env.check_script_fits_environment("deep_rl_zoo.ppo.run_classic", CONTINUOUS)
    gym_env.check_script_fits_environment("deep_rl_zoo.dqn.run_atari", IMAGE)  # fits, with a note
    assert "--noop_max" in capsys.readouterr().err
    gym_env.check_script_fits_environment("deep_rl_zoo.dqn.run_classic", VECTOR, {"length": 3})


def _tiny_dqn(tmp_path, **overrides) -> train.DqnConfig:
    return train.DqnConfig(
        **{
            "num_iterations": 1,
            "num_train_steps": 200,
            "num_eval_steps": 60,
            "min_replay_size": 32,
            "batch_size": 16,
            "replay_capacity": 500,
            "runs_dir": str(tmp_path / "runs"),
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "use_tensorboard": False,
            "show_progress": False,
            **overrides,
        }
    )


@pytest.mark.smoke
def test_dqn_trains_on_an_image_env_of_ones_own_through_the_nature_cnn(tmp_path):
    config = _tiny_dqn(tmp_path, environment_name=IMAGE, environment_height=36, environment_width=36)
    state = train.main(config)
    assert state.train_env_steps == 200
    path = os.path.join(
        tmp_path,
        "checkpoints",
        "DQN_unit-tests.toy-envs-ToyImage-v0",
        "DQN_unit-tests.toy-envs-ToyImage-v0_0.ckpt",
    )
    env = environments.make_environment(config, 0, train=False)
    network = train.load_network(path, env)
    assert type(network).__name__ == "NatureCnnQNetwork"
    # Played without repeating --environment_height/width: the checkpoint's own 36 x 36 frames are used.
    returns = eval_agent.main(
        QEvalConfig(environment_name=IMAGE, load_checkpoint_file=path, num_episodes=1, recording_video_dir="")
    )
    assert len(returns) == 1
    # Told to play other frames than it was trained on: one line naming the flag, not a torch traceback.
    with pytest.raises(errors.CheckpointError) as excinfo:
        eval_agent.main(
            QEvalConfig(
                environment_name=IMAGE,
                load_checkpoint_file=path,
                environment_height=48,
                num_episodes=1,
                recording_video_dir="",
            )
        )
    assert str(excinfo.value).startswith(
        f"{path}'s network does not fit this evaluation's env: --environment_height=36 in the checkpoint, "
        "48 now (size mismatch for torso.fc.0.weight"
    )


def test_evaluation_plays_the_env_the_checkpoint_was_trained_on_unless_told_otherwise(capsys):
    trained = {"env_kwargs": '{"length": 3}', "environment_height": 36, "environment_width": 36, "seed": 7}
    config = evaluation.with_training_environment(EvalConfig(environment_name=VECTOR), trained)
    assert (config.env_kwargs, config.environment_height, config.environment_width) == (
        '{"length": 3}',
        36,
        36,
    )
    assert config.environment_frame_stack == 4 and config.seed == 1  # not an env flag: the evaluation's own
    assert capsys.readouterr().out == (
        'playing the env the checkpoint was trained on: --env_kwargs={"length": 3} '
        "--environment_height=36 --environment_width=36\n"
    )
    # A value given to the evaluation is kept; a run trained on the defaults changes nothing.
    own = EvalConfig(environment_name=VECTOR, env_kwargs='{"length": 5}', environment_height=48)
    config = evaluation.with_training_environment(own, trained)
    assert (config.env_kwargs, config.environment_height, config.environment_width) == (
        '{"length": 5}',
        48,
        36,
    )
    assert evaluation.with_training_environment(own, {"env_kwargs": "", "environment_height": 84}) is own


@pytest.mark.smoke
def test_cli_trains_and_evaluates_a_module_env_with_its_kwargs(tmp_path):
    environment = os.environ | {"PYTHONPATH": REPO_ROOT}
    common = [f"--environment_name={VECTOR}", '--env_kwargs={"length": 3}', "--checkpoint_dir=ckpt"]
    train_run = subprocess.run(
        [
            sys.executable,
            "-m",
            "deep_rl_zoo.dqn.run_classic",
            *common,
            "--num_iterations=1",
            "--num_train_steps=200",
            "--num_eval_steps=60",
            "--min_replay_size=32",
            "--nouse_tensorboard",
            "--noshow_progress",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=under_load(120),
    )
    assert train_run.returncode == 0, train_run.stderr
    evaluation = subprocess.run(
        [
            sys.executable,
            "-m",
            "deep_rl_zoo.dqn.eval_agent",
            *common,
            "--load_checkpoint_file=latest",
            "--num_episodes=2",
            "--recording_video_dir=",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=under_load(120),
    )
    assert evaluation.returncode == 0, evaluation.stderr
    assert "mean return over 2 episodes" in evaluation.stdout

    missing = subprocess.run(
        [sys.executable, "-m", "deep_rl_zoo.dqn.run_classic", "--environment_name=mypkg_xyz:MyEnv-v0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=under_load(120),
    )
    assert missing.returncode == 2
    assert (
        missing.stderr.strip()
        .splitlines()[-1]
        .startswith("error: unknown environment 'mypkg_xyz:MyEnv-v0': cannot import its module 'mypkg_xyz'")
    )
