"""The benchmark scripts' own arithmetic (their runs are measurements, not tests)."""

import importlib.util
import pathlib

import pytest

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
