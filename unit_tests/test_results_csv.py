"""results.csv keeps the columns of its first row: every row a csv.DictReader reads has exactly the
header's fields, even when an agent's statistics grow after its first update."""

import csv
import os

import pytest

from deep_rl_zoo import trackers
from deep_rl_zoo.sac import train as sac_train


def read_rows(path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames), list(reader)


def assert_every_row_has_the_header_fields(header: list[str], rows: list[dict]) -> None:
    for row in rows:
        assert None not in row, f"a row has more fields than the header: {row[None]}"  # DictReader's restkey
        assert list(row) == header and None not in row.values(), (
            f"a row has fewer fields than the header: {row}"
        )


def test_a_later_row_with_fewer_or_more_keys_keeps_the_header_columns(tmp_path, capsys):
    path = tmp_path / "results.csv"
    logger = trackers.RunLogger(str(tmp_path / "run"), False, str(path))
    logger.csv_row({"iteration": 0, "learner_steps": 0})
    logger.csv_row({"iteration": 1})  # a missing value: left empty
    logger.csv_row({"iteration": 2, "learner_steps": 5, "learner_loss": 0.5})  # a new key: left out
    logger.csv_row({"iteration": 3, "learner_steps": 9, "learner_loss": 0.25})

    header, rows = read_rows(path)
    assert header == ["iteration", "learner_steps"]
    assert_every_row_has_the_header_fields(header, rows)
    assert [(r["iteration"], r["learner_steps"]) for r in rows] == [
        ("0", "0"),
        ("1", ""),
        ("2", "5"),
        ("3", "9"),
    ]
    warnings = [line for line in capsys.readouterr().err.splitlines() if "learner_loss" in line]
    assert len(warnings) == 1  # said once, not on every row


def test_a_resumed_run_appends_under_the_existing_header(tmp_path):
    path = tmp_path / "results.csv"
    trackers.RunLogger(str(tmp_path / "run"), False, str(path)).csv_row({"iteration": 0, "a": 1, "b": 2})
    resumed = trackers.RunLogger(str(tmp_path / "run"), False, str(path))
    resumed.csv_row({"b": 20, "iteration": 1, "a": 10})  # another key order: written in the header's order

    header, rows = read_rows(path)
    assert header == ["iteration", "a", "b"]
    assert_every_row_has_the_header_fields(header, rows)
    assert rows[1] == {"iteration": "1", "a": "10", "b": "20"}


@pytest.mark.smoke
def test_sac_run_whose_first_iteration_learns_nothing_writes_the_learner_columns_from_the_start(tmp_path):
    # 64 env steps per iteration and a warm-up of 100: no update in iteration 0, updates in iteration 1.
    config = sac_train.SacConfig(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_train_steps=64,
        num_eval_steps=50,
        num_actors=2,
        unroll_length=16,
        min_replay_size=100,
        batch_size=16,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    state = sac_train.main(config)

    header, rows = read_rows(os.path.join(state.run_dir, "results.csv"))
    assert_every_row_has_the_header_fields(header, rows)
    assert "learner_critic_loss" in header and "learner_critic_grad_norm" in header
    assert [r["learner_learner_steps"] for r in rows][0] == "0"
    assert rows[0]["learner_critic_loss"] == "nan"  # declared before the first update
    assert float(rows[1]["learner_learner_steps"]) > 0 and float(rows[1]["learner_critic_loss"]) >= 0
