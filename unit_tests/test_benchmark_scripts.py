"""The benchmark scripts' own arithmetic (their runs are measurements, not tests)."""

import importlib.util
import pathlib

import numpy as np
import pytest
import torch

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dqn_cartpole_reports_an_evaluation_without_a_whole_episode_as_unfinished_not_as_a_mean():
    dqn_cartpole = _load("dqn_cartpole")
    rows = [  # results.csv writes NaN where no evaluation episode finished
        {"eval_mean_episode_return": "nan", "eval_num_episodes": "0"},
        {"eval_mean_episode_return": "487.5", "eval_num_episodes": "10"},
    ]
    assert dqn_cartpole.evaluation_means(rows) == [None, pytest.approx(487.5)]
    assert dqn_cartpole.evaluation_means(rows[:1]) == [None]


def _conv_macs(in_channels: int, out_channels: int, kernel: int, out_side: int) -> int:
    return out_channels * out_side * out_side * in_channels * kernel * kernel


def test_the_bound_counts_exactly_the_arithmetic_of_dqns_acting_and_gradient_step():
    """`--part=bound` of atari_learner_speed: the Nature CNN's operations counted by hand (84x84x4 ->
    conv 8x8/4 -> 20x20x32 -> conv 4x4/2 -> 9x9x64 -> conv 3x3/1 -> 7x7x64 -> 512 -> 6 actions), and a
    DQN gradient step on 32 transitions is its online forward and backward (no input gradient at the
    first convolution) and its target forward: nothing more, nothing less."""
    learner_speed = _load("atari_learner_speed")
    dqn, config = learner_speed.build_dqn(np.random.default_rng(0), warm_up=40)
    first_conv = 2 * _conv_macs(4, 32, 8, 20)
    forward = first_conv + 2 * (_conv_macs(32, 64, 4, 9) + _conv_macs(64, 64, 3, 7) + 3136 * 512 + 512 * 6)
    frame = torch.zeros((1, 4, 84, 84), dtype=torch.uint8)
    assert learner_speed.counted_flops(lambda: dqn._network(frame)) == forward

    batch = config.batch_size
    gradient_step = batch * forward + batch * (2 * forward - first_conv) + batch * forward
    expected = gradient_step / config.learn_interval + (1 - config.exploration_epsilon_end_value) * forward
    assert learner_speed.dqn_flops_per_env_step(dqn, config) == pytest.approx(expected, rel=1e-12)
