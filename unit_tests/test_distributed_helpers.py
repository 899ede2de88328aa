"""`train_until`, the shape of the asynchronous agents' learning tests: it must resume one iteration at a
time, stop at the first milestone, and give up after its budget (so a test that never learns fails)."""

import csv

from unit_tests.distributed_helpers import train_until


def _fake_run(results_csv, returns):
    """A `main` that appends one results.csv row per iteration it is asked for, with `returns[i]` as
    iteration i's evaluation, and records the configs it was given."""
    calls = []

    def main(config):
        calls.append(config)
        done = 0 if not config["resume"] else sum(1 for _ in open(results_csv)) - 1
        mode = "a" if config["resume"] else "w"
        with open(results_csv, mode, newline="") as f:
            writer = csv.writer(f)
            if not config["resume"]:
                writer.writerow(["iteration", "eval_mean_episode_return"])
            for i in range(done, config["num_iterations"]):
                writer.writerow([i, returns[i]])

    return main, calls


def test_train_until_resumes_one_iteration_at_a_time_and_stops_at_the_milestone(tmp_path):
    results_csv = tmp_path / "results.csv"
    main, calls = _fake_run(results_csv, [10, 40, 70, 90, 95])
    rows = train_until(
        main, dict, results_csv, lambda rows: float(rows[-1]["eval_mean_episode_return"]) >= 60, 5
    )
    assert [float(row["eval_mean_episode_return"]) for row in rows] == [10, 40, 70]
    assert calls == [
        {"num_iterations": 1, "resume": False},
        {"num_iterations": 2, "resume": True},
        {"num_iterations": 3, "resume": True},
    ]


def test_train_until_gives_up_after_its_budget_so_a_run_that_never_learns_fails(tmp_path):
    results_csv = tmp_path / "results.csv"
    main, calls = _fake_run(results_csv, [10, 12, 11, 13])
    rows = train_until(
        main, dict, results_csv, lambda rows: float(rows[-1]["eval_mean_episode_return"]) >= 60, 3
    )
    assert len(calls) == 3 and len(rows) == 3
