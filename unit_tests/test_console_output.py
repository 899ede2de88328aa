"""What a run tells its user: honest numbers, no noise, and one-line guidance."""

import glob
import math
import os
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest

from deep_rl_zoo import distributed, environments, gym_env, main_loop, trackers
from deep_rl_zoo.config import QEvalConfig, RunConfig
from deep_rl_zoo.dqn import eval_agent as dqn_eval_agent
from deep_rl_zoo.dqn import train as dqn_train
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.ppo import train as ppo_train
from deep_rl_zoo.runtime import loop


class TenStepEnv(gym.Env):
    """Every episode lasts exactly 10 steps with reward 1 per step (return 10)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self._t += 1
        return np.zeros(1, np.float32), 1.0, self._t == 10, False, {}


class ZeroAgent:
    statistics: dict = {}

    def step(self, timestep):
        return 0

    def reset(self):
        pass


def _evaluate(num_eval_steps: int) -> dict:
    env = gym.wrappers.RecordEpisodeStatistics(TenStepEnv())
    return main_loop.run_evaluation_phase(
        num_eval_steps, env, ZeroAgent(), 0, 0, False, trackers.PhaseStats()
    )


# --- Honest numbers ---


def test_an_evaluation_without_a_whole_episode_reports_the_unfinished_one_as_such():
    summary = _evaluate(7)  # 7 steps of a 10-step episode: no episode finished
    assert summary["num_episodes"] == 0 and math.isnan(summary["mean_episode_return"])
    assert summary["unfinished_episode_return"] == 7.0  # 7 steps x reward 1
    assert summary["unfinished_episode_length"] == 7
    text = main_loop._describe_evaluation(summary)
    assert text == "eval: no episode finished in 7 steps (the unfinished one had return 7.0 after 7 steps)"
    assert "over 0 episodes" not in text


def test_an_evaluation_counts_whole_episodes_only():
    summary = _evaluate(25)  # two whole 10-step episodes and 5 steps of a third
    assert summary["num_episodes"] == 2 and summary["mean_episode_return"] == 10.0
    assert "unfinished_episode_return" not in summary
    assert main_loop._describe_evaluation(summary) == "eval return 10.0 over 2 episodes"


def _finish(eval_summary, capsys, solved_min_episodes=10, rows=None):
    class NullLogger:
        def scalars(self, *args):
            pass

        def csv_row(self, row):
            if rows is not None:
                rows.append(row)

        def flush(self):
            pass

    solved = main_loop.finish_iteration(
        iteration=0,
        train_mean_return=20.0,
        train_num_episodes=3,
        train_steps_per_second=100.0,
        eval_summary=eval_summary,
        learner_statistics={},
        logger=NullLogger(),
        save_checkpoint=lambda iteration, state: "ckpt",
        loop_state=main_loop.LoopState(),
        solved_return=475.0,
        solved_min_episodes=solved_min_episodes,
    )
    return solved, capsys.readouterr().out


def _summary(num_episodes, mean, **extra):
    return {"num_episodes": num_episodes, "mean_episode_return": mean, "num_steps": 5000, **extra}


def test_solved_needs_ten_whole_episodes(capsys):
    solved, out = _finish(_summary(2, 500.0), capsys)  # 2 episodes of 500 >= 475, but only 2
    assert not solved
    assert "not solved yet" in out and "over 2 whole episodes; solved needs at least 10" in out
    solved, out = _finish(_summary(10, 480.0), capsys)
    assert solved and "solved: evaluation mean 480.0 >= 475.0 over 10 episodes" in out


def test_the_csv_row_carries_the_evaluation_spread(capsys):
    rows = []
    spread = {"min_episode_return": -20.0, "max_episode_return": 20.0, "std_episode_return": 18.4}
    _finish(_summary(17, 2.7, **spread), capsys, rows=rows)
    assert {k: rows[0][k] for k in ("eval_mean_episode_return", "eval_num_episodes")} == {
        "eval_mean_episode_return": 2.7,
        "eval_num_episodes": 17,
    }
    assert [rows[0][f"eval_{edge}_episode_return"] for edge in ("min", "max", "std")] == [-20.0, 20.0, 18.4]
    rows.clear()
    _finish(_summary(0, math.nan), capsys, rows=rows)  # no whole game: no spread either
    assert all(math.isnan(rows[0][f"eval_{edge}_episode_return"]) for edge in ("min", "max", "std"))


def test_an_unfinished_episode_never_solves_a_run(capsys):
    unfinished = _summary(0, math.nan, unfinished_episode_return=500.0, unfinished_episode_length=500)
    solved, out = _finish(unfinished, capsys, solved_min_episodes=1)
    assert not solved and "solved" not in out


def test_solved_needs_as_many_episodes_as_the_evaluation_budget_holds_up_to_ten():
    env = gym.make("CartPole-v1")  # episodes end by 500 steps
    assert environments.solved_min_episodes_of(RunConfig(num_eval_steps=5000), env) == 10  # 5000 // 500
    assert environments.solved_min_episodes_of(RunConfig(num_eval_steps=1000), env) == 2  # 1000 // 500
    assert environments.solved_min_episodes_of(RunConfig(num_eval_steps=100), env) == 1  # at least one
    assert environments.solved_min_episodes_of(RunConfig(num_eval_steps=100_000), env) == 10  # at most ten
    assert (
        environments.solved_min_episodes_of(RunConfig(num_eval_steps=1000, max_episode_steps=100), env) == 10
    )
    no_limit = gym.make("CartPole-v1", max_episode_steps=None).unwrapped
    assert environments.solved_min_episodes_of(RunConfig(num_eval_steps=1000), no_limit) == 10


def test_a_distributed_phase_ends_on_the_learner_step_nearest_to_the_budget():
    # Learner steps of 1,020 env steps (4 x 256 transitions, minus resets) and --num_train_steps=2048:
    assert not loop.training_phase_done(0, 2048, 0)  # always one learner step
    assert not loop.training_phase_done(1020, 2048, 1020)  # 1,028 missing >= half a step (510)
    assert loop.training_phase_done(2040, 2048, 1020)  # 8 missing < 510: stop (not at 3,060)
    assert not loop.training_phase_done(1530, 2048, 1020)  # 518 missing: 2 x 518 = 1036 >= 1020
    assert loop.training_phase_done(1024, 100, 1024)  # one step already exceeds a small budget


@pytest.mark.smoke
def test_a_ppo_run_reports_the_env_steps_it_took_and_says_why_they_differ(tmp_path, capsys):
    config = ppo_train.PpoConfig(
        num_iterations=2,
        num_train_steps=256,
        num_eval_steps=50,
        num_actors=2,
        unroll_length=64,  # a learner step: 2 x 64 = 128 transitions, a few fewer env steps (resets)
        minibatch_size=64,
        num_epochs=1,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    state = ppo_train.main(config)
    out = capsys.readouterr().out
    # Two learner steps per phase (the old loop took a third whenever resets left it a few steps short).
    assert 2 * 256 - 2 * 64 < state.train_env_steps <= 2 * 256
    assert out.count("note: a training phase ends between two learner steps") <= 1
    last_line = [line for line in out.splitlines() if line.startswith("iteration 1:")][0]
    assert f"env steps {state.train_env_steps:,}," in last_line


# --- Noise ---


def _run_python(code: str, **env_changes) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SDL_") and k != "XDG_RUNTIME_DIR"}
    env.update(env_changes)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.smoke
def test_creating_atari_games_prints_no_emulator_banner():
    code = (
        "from deep_rl_zoo import gym_env\n"
        "for seed in range(2):\n"
        "    env = gym_env.create_atari_environment('Pong', seed=seed)\n"
        "    env.reset(seed=seed); env.close()\n"
    )
    result = _run_python(code)
    assert result.returncode == 0, result.stderr
    assert "A.L.E" not in result.stderr + result.stdout and "Stella" not in result.stderr + result.stdout


@pytest.mark.smoke
def test_rendering_classic_frames_without_a_desktop_prints_nothing():
    code = (
        "from deep_rl_zoo import gym_env\n"
        "env = gym_env.create_classic_environment('CartPole-v1', seed=0, render_mode='rgb_array')\n"
        "env.reset(seed=0)\n"
        "frame = env.render()\n"
        "print(frame.shape)\n"
    )
    result = _run_python(code)  # no XDG_RUNTIME_DIR, no SDL_* variables: a server without a desktop
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(400, 600, 3)"
    assert "XDG_RUNTIME_DIR" not in result.stderr and "ALSA" not in result.stderr


def test_the_rename_note_is_printed_once_per_run(capsys):
    # What a run script does: resolve the name once, then build a training and an evaluation env.
    gym_env.resolve_environment_name("LunarLander-v2")
    assert not gym_env.is_atari("LunarLander-v2")
    for seed in (0, 1):
        gym_env.create_classic_environment("LunarLander-v2", seed=seed).close()
    assert capsys.readouterr().err.count("LunarLander-v3") == 1


@pytest.mark.smoke
def test_videos_are_named_by_run_and_never_replace_another(tmp_path, capsys):
    common = dict(checkpoint_dir=str(tmp_path / "checkpoints"), runs_dir=str(tmp_path / "runs"))
    tiny = dict(num_iterations=1, num_train_steps=200, num_eval_steps=100, min_replay_size=50, batch_size=16)
    tiny.update(use_tensorboard=False, show_progress=False, stop_when_solved=False)
    dqn_train.main(dqn_train.DqnConfig(tag="wide", **common, **tiny))
    (checkpoint_file,) = glob.glob(
        str(tmp_path / "checkpoints" / "**" / "DQN_CartPole-v1_0.ckpt"), recursive=True
    )
    videos = str(tmp_path / "videos")

    def evaluate(load):
        config = QEvalConfig(num_episodes=1, load_checkpoint_file=load, recording_video_dir=videos)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # RecordVideo's "Overwriting existing videos" would raise
            dqn_eval_agent.main(config)
        return capsys.readouterr().out

    capsys.readouterr()
    first = evaluate(checkpoint_file)
    second = evaluate(checkpoint_file)
    random = evaluate("")
    assert sorted(os.listdir(videos)) == [
        "DQN_CartPole-v1_random-weights-episode-0.mp4",
        "DQN_CartPole-v1_wide_iteration0-2-episode-0.mp4",  # the same run again: a new name
        "DQN_CartPole-v1_wide_iteration0-episode-0.mp4",  # agent, environment, tag, iteration
    ]
    assert os.path.join(videos, "DQN_CartPole-v1_wide_iteration0-episode-0.mp4") in first
    assert os.path.join(videos, "DQN_CartPole-v1_wide_iteration0-2-episode-0.mp4") in second
    assert "random-weights" in random


def test_debug_screenshots_go_to_the_run_folder(tmp_path):
    logger = trackers.RunLogger(str(tmp_path / "runs" / "DQN_CartPole-v1"), False, str(tmp_path / "r.csv"), 1)
    logger.screenshot("train", np.zeros((4, 6, 3), np.uint8), step=10, episode_index=1)
    assert os.listdir(tmp_path / "runs" / "DQN_CartPole-v1" / "screenshots") == [
        "DQN_CartPole-v1_train_episode1.png"
    ]


# --- Guidance ---


def test_more_actors_than_cores_is_said_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(distributed, "available_cpu_cores", lambda: 2)
    distributed.warn_if_more_actors_than_cores(2)
    assert capsys.readouterr().err == ""
    distributed.warn_if_more_actors_than_cores(8)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--num_actors=8 is more than the 2 CPU cores" in err


def test_the_no_gpu_note_only_answers_a_request_for_gpus(monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.device_count", lambda: 0)
    import torch

    assert distributed.actor_devices(2, actors_on_gpu=None) == [torch.device("cpu")] * 2  # the default
    assert capsys.readouterr().err == ""
    distributed.actor_devices(2, actors_on_gpu=True)  # --actors_on_gpu typed by the user
    assert "no CUDA device is visible" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("script", "environment", "pointer"),
    [
        ("deep_rl_zoo.ppo.run_classic", "Pendulum-v1", "python -m deep_rl_zoo.ppo.run_continuous"),
        ("deep_rl_zoo.ppo.run_continuous", "CartPole-v1", "python -m deep_rl_zoo.ppo.run_classic"),
        (
            "deep_rl_zoo.dqn.run_classic",
            "Pong",
            "python -m deep_rl_zoo.dqn.run_atari --environment_name=Pong",
        ),
        ("deep_rl_zoo.a2c.run_classic_grad", "Breakout", "python -m deep_rl_zoo.a2c.run_atari_grad"),
        ("deep_rl_zoo.ppo.run_continuous", "Pong", "python -m deep_rl_zoo.ppo.run_atari"),
        ("deep_rl_zoo.dqn.run_atari", "CartPole-v1", "python -m deep_rl_zoo.dqn.run_classic"),
    ],
)
def test_a_script_given_the_wrong_kind_of_environment_names_the_right_one(script, environment, pointer):
    with pytest.raises(ConfigError, match=pointer.replace(".", r"\.")):
        gym_env.check_script_fits_environment(script, environment)


def test_fitting_scripts_pass_the_check():
    gym_env.check_script_fits_environment("deep_rl_zoo.ppo.run_classic", "CartPole-v1")
    gym_env.check_script_fits_environment("deep_rl_zoo.ppo.run_continuous", "Pendulum-v1")
    gym_env.check_script_fits_environment("deep_rl_zoo.dqn.run_atari", "Pong")
    gym_env.check_script_fits_environment("deep_rl_zoo.dqn.eval_agent", "Pong")  # eval scripts: any


@pytest.mark.smoke
def test_run_classic_with_an_atari_name_stops_with_one_line_before_any_work(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "deep_rl_zoo.ppo.run_classic", "--environment_name=Pong"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "error: Pong is an Atari game: use python -m deep_rl_zoo.ppo.run_atari --environment_name=Pong\n"
    )
    assert not os.path.exists(tmp_path / "runs") and not os.path.exists(tmp_path / "checkpoints")


@pytest.mark.smoke
def test_the_console_says_when_learning_starts_after_the_warm_up(tmp_path, capsys):
    config = dqn_train.DqnConfig(
        num_iterations=1,
        num_train_steps=300,
        num_eval_steps=50,
        min_replay_size=100,
        batch_size=16,
        learn_interval=4,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    dqn_train.main(config)
    out = capsys.readouterr().out
    # The replay holds 100 transitions after env step 100, and 100 is a multiple of learn_interval 4.
    assert out.count("learning starts") == 1
    assert "learning starts at env step 100: the replay warm-up is over (100 transitions stored)" in out
