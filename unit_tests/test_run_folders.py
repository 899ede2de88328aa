"""One folder per run under runs/ and checkpoints/ (same name), --tag sweeps, --resume and `latest`
finding the newest matching run, the `best` checkpoint, and learner curves in every run."""

import math
import os
import shutil
import time

import pytest
import torch

from deep_rl_zoo import checkpoint, main_loop, run_folders, trackers
from deep_rl_zoo.config import QEvalConfig
from deep_rl_zoo.dqn import eval_agent, train
from deep_rl_zoo.errors import ConfigError
from unit_tests.test_dqn import tiny_classic_config


def _save(folder, iteration, agent="DQN", env="CartPole-v1"):
    path = checkpoint.checkpoint_path(str(folder), agent, env, iteration)
    checkpoint.save_checkpoint(path, agent, env, iteration, {"w": torch.tensor([float(iteration)])}, {})
    return path


def _age(path, seconds_ago):
    stamp = time.time() - seconds_ago
    os.utime(path, (stamp, stamp))


# ----------------------------------------------------------------------------------------------------
# Naming and finding (no training)


def test_a_new_run_name_is_free_under_every_root(tmp_path):
    runs, checkpoints = str(tmp_path / "runs"), str(tmp_path / "checkpoints")
    os.makedirs(os.path.join(checkpoints, "DQN_CartPole-v1"))  # e.g. runs/ was deleted, checkpoints kept
    assert checkpoint.new_run_name([runs, checkpoints], "DQN_CartPole-v1") == "DQN_CartPole-v1-2"
    assert checkpoint.new_run_name([runs, checkpoints], "DQN_CartPole-v1") == "DQN_CartPole-v1-3"
    assert sorted(os.listdir(runs)) == ["DQN_CartPole-v1-2", "DQN_CartPole-v1-3"]  # no half-made pair


def test_run_name_adds_the_tag_made_safe_for_a_file_system():
    assert checkpoint.run_name("DQN", "CartPole-v1") == "DQN_CartPole-v1"
    assert checkpoint.run_name("IMPALA", "ALE/Pong-v5", "LSTM LR/1e-3") == "IMPALA_ALE-Pong-v5_LSTM-LR-1e-3"


def test_latest_is_the_highest_iteration_of_the_run_written_last(tmp_path):
    root = tmp_path / "checkpoints"
    old = _save(root / "DQN_CartPole-v1", 5)  # more iterations, but written earlier
    new = _save(root / "DQN_CartPole-v1-2", 1)
    tagged = _save(root / "DQN_CartPole-v1_LR1", 0)
    _save(root / "PPO_CartPole-v1", 9)  # another agent
    _age(old, 300), _age(new, 200), _age(tagged, 100)
    os.makedirs(root / "DQN_CartPole-v1-3")  # a run that has not finished an iteration yet
    find = checkpoint.find_run_checkpoint
    assert find(str(root), "DQN", "CartPole-v1", tag="") == new  # untagged runs only
    assert find(str(root), "DQN", "CartPole-v1", tag="LR1") == tagged
    assert find(str(root), "DQN", "CartPole-v1", tag=None) == tagged  # any tag: the newest of all
    assert find(str(root), "DQN", "CartPole-v1", tag="LR2") is None
    assert find(str(root), "DQN", "Acrobot-v1") is None
    _age(old, 0)  # the first run resumed: it is the newest now, whatever order the folders list in
    assert find(str(root), "DQN", "CartPole-v1", tag="") == old


def test_checkpoints_of_the_older_flat_layout_are_still_found(tmp_path):
    flat = _save(tmp_path, 3)
    assert checkpoint.find_run_checkpoint(str(tmp_path), "DQN", "CartPole-v1", tag="") == flat


def test_resume_finds_a_run_named_by_an_atari_short_name(tmp_path):
    """`--environment_name=Pong` names the files `PPO_Pong_<i>.ckpt` while they hold the env id
    PongNoFrameskip-v4: --resume looks for the files by the name and checks them against the id."""
    from deep_rl_zoo.config import RunConfig

    folder = tmp_path / "PPO_Pong"
    folder.mkdir()
    for iteration in range(2):
        path = checkpoint.checkpoint_path(str(folder), "PPO", "Pong", iteration)
        state = {"w": torch.tensor([float(iteration)])}
        checkpoint.save_checkpoint(path, "PPO", "PongNoFrameskip-v4", iteration, state, {})
    config = RunConfig(environment_name="Pong", resume=True, checkpoint_dir=str(tmp_path))
    resume = run_folders.load_resume_checkpoint(config, "PPO", "PongNoFrameskip-v4")
    assert os.path.basename(resume.path) == "PPO_Pong_1.ckpt" and resume.payload["agent"]["w"].item() == 1.0


def test_best_comes_from_the_newest_run_that_has_one(tmp_path):
    root = tmp_path / "checkpoints"
    first = _save(root / "DQN_CartPole-v1", 2)
    best = checkpoint.best_checkpoint_path(str(root / "DQN_CartPole-v1"), "DQN", "CartPole-v1")
    checkpoint.copy_checkpoint(first, best)
    _age(first, 100)
    _save(root / "DQN_CartPole-v1-2", 0)  # newer, but no evaluation finished an episode: no best
    assert checkpoint.find_run_checkpoint(str(root), "DQN", "CartPole-v1", checkpoint.BEST) == best
    assert checkpoint.load_checkpoint(best, "DQN", "CartPole-v1")["iteration"] == 2
    assert sorted(os.listdir(root / "DQN_CartPole-v1")) == [
        "DQN_CartPole-v1_2.ckpt",
        "DQN_CartPole-v1_best.ckpt",
    ]


# ----------------------------------------------------------------------------------------------------
# The best checkpoint follows the best greedy evaluation


class _Agent:
    def __init__(self):
        self.w = 0.0

    def state_dict(self):
        return {"w": torch.tensor([self.w])}


def test_best_is_the_iteration_with_the_highest_evaluation_mean_over_whole_episodes(tmp_path):
    config = tiny_classic_config(tmp_path)
    agent = _Agent()
    folder = str(tmp_path / "checkpoints" / "run")
    save = run_folders.checkpoint_saver(config, "DQN", "CartPole-v1", agent, folder)
    logger = trackers.RunLogger(str(tmp_path / "runs" / "run"), False, str(tmp_path / "r.csv"))
    state = main_loop.LoopState()
    # iteration: 0     1      2      3 (no whole episode: its partial return never counts)
    means = [10.0, 30.0, 20.0, 99.0]
    episodes = [2, 2, 2, 0]
    for iteration, (mean, count) in enumerate(zip(means, episodes, strict=True)):
        agent.w = float(iteration)
        main_loop.finish_iteration(
            iteration=iteration,
            train_mean_return=math.nan,
            train_num_episodes=0,
            train_steps_per_second=1.0,
            eval_summary={"mean_episode_return": mean, "num_episodes": count, "steps_per_second": 1.0},
            learner_statistics={},
            logger=logger,
            save_checkpoint=save,
            loop_state=state,
            solved_return=None,
        )
    assert state.best_iteration == 1 and state.best_eval_return == 30.0  # max(10, 30, 20)
    best = checkpoint.load_checkpoint(os.path.join(folder, "DQN_CartPole-v1_best.ckpt"), "DQN", "CartPole-v1")
    assert best["iteration"] == 1 and best["agent"]["w"].item() == 1.0
    assert best["loop"]["best_eval_return"] == 30.0
    assert not [name for name in os.listdir(folder) if name.startswith(".tmp")]  # written atomically


# ----------------------------------------------------------------------------------------------------
# Whole runs (DQN, a few hundred env steps each)


@pytest.mark.smoke
def test_a_tag_sweep_gets_one_folder_per_run_in_runs_and_checkpoints(tmp_path):
    for tag in ("LR1", "LR2", "LR1"):  # the same tag twice: the second gets -2
        state = train.main(tiny_classic_config(tmp_path, num_iterations=1, tag=tag))
        assert state.next_iteration == 1
    expected = ["DQN_CartPole-v1_LR1", "DQN_CartPole-v1_LR1-2", "DQN_CartPole-v1_LR2"]
    assert sorted(os.listdir(tmp_path / "runs")) == expected
    assert sorted(os.listdir(tmp_path / "checkpoints")) == expected
    for name in expected:
        assert (tmp_path / "checkpoints" / name / "DQN_CartPole-v1_0.ckpt").is_file()
        assert (tmp_path / "runs" / name / "results.csv").is_file()


@pytest.mark.smoke
def test_a_copied_checkpoint_resumed_elsewhere_logs_there_and_leaves_the_original_run_alone(tmp_path):
    original, copy = tmp_path / "original", tmp_path / "copy"
    train.main(tiny_classic_config(original, num_iterations=1))
    before = {p.name: p.stat().st_mtime_ns for p in (original / "runs" / "DQN_CartPole-v1").iterdir()}
    shutil.copytree(original / "checkpoints", copy / "checkpoints")
    state = train.main(tiny_classic_config(copy, num_iterations=2, resume=True))
    assert state.next_iteration == 2
    assert state.run_dir == str(copy / "runs" / "DQN_CartPole-v1")
    assert (copy / "runs" / "DQN_CartPole-v1" / "results.csv").is_file()
    after = {p.name: p.stat().st_mtime_ns for p in (original / "runs" / "DQN_CartPole-v1").iterdir()}
    assert after == before


@pytest.mark.smoke
def test_resume_continues_the_newest_run_with_the_same_tag(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=1, tag="A"))
    train.main(tiny_classic_config(tmp_path, num_iterations=1, tag="A", seed=2))  # newest A: A-2
    train.main(tiny_classic_config(tmp_path, num_iterations=1, tag="B"))  # newer still, other tag
    state = train.main(tiny_classic_config(tmp_path, num_iterations=2, tag="A", seed=2, resume=True))
    assert state.next_iteration == 2 and state.train_env_steps == 600  # 2 x 300
    assert state.run_dir == str(tmp_path / "runs" / "DQN_CartPole-v1_A-2")
    folder = tmp_path / "checkpoints" / "DQN_CartPole-v1_A-2"
    assert sorted(p for p in os.listdir(folder) if not p.endswith("best.ckpt")) == [
        "DQN_CartPole-v1_0.ckpt",
        "DQN_CartPole-v1_1.ckpt",
    ]
    untouched = os.listdir(tmp_path / "checkpoints" / "DQN_CartPole-v1_A")
    assert [p for p in untouched if not p.endswith("best.ckpt")] == ["DQN_CartPole-v1_0.ckpt"]
    assert len(os.listdir(tmp_path / "runs")) == 3  # no new run folder for the resumed run
    with pytest.raises(ConfigError, match="no DQN checkpoint for CartPole-v1 tagged 'C'"):
        train.main(tiny_classic_config(tmp_path, num_iterations=2, tag="C", resume=True))


@pytest.mark.smoke
def test_eval_agent_loads_latest_best_or_a_run_folder(tmp_path, capsys):
    train.main(tiny_classic_config(tmp_path, num_iterations=2, tag="demo"))
    folder = tmp_path / "checkpoints" / "DQN_CartPole-v1_demo"
    common = dict(checkpoint_dir=str(tmp_path / "checkpoints"), recording_video_dir="", num_episodes=1)
    for which, expected in [
        ("latest", folder / "DQN_CartPole-v1_1.ckpt"),
        ("best", folder / "DQN_CartPole-v1_best.ckpt"),
        (str(folder), folder / "DQN_CartPole-v1_1.ckpt"),
    ]:
        eval_agent.main(QEvalConfig(load_checkpoint_file=which, **common))
        assert f"loaded {expected}" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="tagged 'other'"):
        eval_agent.main(QEvalConfig(load_checkpoint_file="best", tag="other", **common))


@pytest.mark.smoke
def test_eval_agent_with_a_step_budget_and_iterations_plays_whole_episodes(tmp_path, capsys):
    # Random weights on CartPole end episodes in ~10 steps: a 200-step budget holds several.
    returns = eval_agent.main(QEvalConfig(num_iterations=2, num_eval_steps=200, recording_video_dir=""))
    out = capsys.readouterr().out
    assert "iteration 0: mean return" in out and "iteration 1: mean return" in out
    assert len(returns) >= 2 and sum(returns) <= 2 * 200  # CartPole: reward 1 per step, whole episodes only


@pytest.mark.slow
def test_a_distributed_run_shorter_than_100_learner_steps_still_has_learner_curves(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from deep_rl_zoo.ppo import train as ppo_train
    from unit_tests.test_ppo import _config

    # 2 actors x 64 steps = 128 env steps per learner step; 1500 steps -> 12 learner steps (< 100).
    config = _config(
        tmp_path, num_iterations=1, num_train_steps=1500, unroll_length=64, minibatch_size=64, num_epochs=1,
        use_tensorboard=True,
    )  # fmt: skip
    state = ppo_train.main(config)
    events = EventAccumulator(state.run_dir)
    events.Reload()
    learner_tags = [tag for tag in events.Tags()["scalars"] if tag.startswith("learner/")]
    assert learner_tags
    # One point at the first learner step past 1000 env steps, one at the iteration's end (~12 x 128).
    steps = [event.step for event in events.Scalars(learner_tags[0])]
    assert len(steps) == 2 and 1000 <= steps[0] < 1000 + 2 * 128 and steps[1] == state.train_env_steps
