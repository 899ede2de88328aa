"""The plot command: reading real run folders, grouping seeds, the mean and its band, the image, errors."""

import csv
import os

import numpy as np
import pytest

from deep_rl_zoo import plot
from deep_rl_zoo.dqn import train as dqn_train
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.ppo import train as ppo_train


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    """Three tiny real runs with TensorBoard: DQN seeds 1 and 2, and PPO with 2 actor processes."""
    root = tmp_path_factory.mktemp("plot_runs")
    common = dict(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_eval_steps=200,
        checkpoint_dir=str(root / "checkpoints"),
        runs_dir=str(root / "runs"),
        use_tensorboard=True,
        show_progress=False,
        stop_when_solved=False,
    )
    dqn = dict(num_train_steps=300, replay_capacity=1000, min_replay_size=100, batch_size=16)
    dqn_1 = dqn_train.main(dqn_train.DqnConfig(seed=1, **dqn, **common)).run_dir
    dqn_2 = dqn_train.main(
        dqn_train.DqnConfig(seed=2, **dqn, **dict(common, checkpoint_dir=str(root / "checkpoints2")))
    ).run_dir
    ppo = ppo_train.main(
        ppo_train.PpoConfig(
            num_train_steps=128, num_actors=2, unroll_length=32, minibatch_size=32, num_epochs=1, **common
        )
    ).run_dir
    return {"dqn_1": dqn_1, "dqn_2": dqn_2, "ppo": ppo, "root": root}


def _csv_rows(run_dir):
    with open(os.path.join(run_dir, "results.csv")) as f:
        return list(csv.DictReader(f))


@pytest.mark.smoke
def test_read_run_finds_the_csv_and_every_training_episode_in_tensorboard(real_runs):
    run = plot.read_run(real_runs["dqn_1"])
    rows = _csv_rows(real_runs["dqn_1"])
    assert run.agent_name == "DQN" and run.config["seed"] == "1"
    evaluation = run.metrics["eval/mean_episode_return"]
    assert evaluation.steps.tolist() == [300, 600]  # two iterations of 300 training env steps
    assert evaluation.values.tolist() == pytest.approx([float(r["eval_mean_episode_return"]) for r in rows])
    # TensorBoard has one point per training episode: as many as the CSV's per-iteration counts add up to.
    episodes = run.metrics["train/episode_return"]
    assert len(episodes.steps) == sum(int(r["train_num_episodes"]) for r in rows)
    assert "learner/loss" in run.metrics


@pytest.mark.smoke
def test_distributed_run_is_read_like_the_others(real_runs):
    run = plot.read_run(real_runs["ppo"])
    rows = _csv_rows(real_runs["ppo"])
    assert run.agent_name == "PPO"
    assert run.metrics["eval/mean_episode_return"].steps.tolist() == [int(r["train_env_steps"]) for r in rows]
    assert len(run.metrics["train/episode_return"].steps) == sum(int(r["train_num_episodes"]) for r in rows)
    assert "actor_0/steps_per_second" in run.metrics and "actor_1/steps_per_second" in run.metrics


@pytest.mark.smoke
def test_seeds_form_one_curve_and_other_agents_their_own(real_runs):
    runs = [plot.read_run(real_runs[k]) for k in ("dqn_1", "dqn_2", "ppo")]
    groups = plot.group_runs(runs)  # the two DQN runs differ only by seed and checkpoint folder
    assert [[r.agent_name for r in g] for g in groups] == [["DQN", "DQN"], ["PPO"]]
    (panel,) = plot.build_panels(runs, ["eval/mean_episode_return"])
    dqn_curve, ppo_curve = panel.curves
    assert dqn_curve.label.startswith("DQN CartPole-v1") and dqn_curve.label.endswith("2 runs")
    # Same evaluation steps for both seeds: the mean is the plain mean of their two CSV values.
    first, second = (_csv_rows(real_runs[k]) for k in ("dqn_1", "dqn_2"))
    expected = [
        (float(a["eval_mean_episode_return"]) + float(b["eval_mean_episode_return"])) / 2
        for a, b in zip(first, second, strict=True)
    ]
    assert dqn_curve.steps.tolist() == [300, 600]
    assert dqn_curve.mean.tolist() == pytest.approx(expected)
    assert ppo_curve.run_names == [os.path.basename(real_runs["ppo"])]


def test_runs_differing_in_bookkeeping_flags_are_seeds_of_one_experiment():
    def run(name, **flags):
        config = {"environment_name": "Pong", "learning_rate": "0.00025", "seed": "1", **flags}
        return plot.Run(path=name, name=name, agent_name="PPO", config=config, metrics={})

    runs = [
        run("a"),
        run(
            "b", seed="2", backend="ray", actor_timeout="60", max_actor_restarts="3", checkpoint_replay="True"
        ),
        run("c", learning_rate="0.001"),
    ]
    assert [[r.name for r in g] for g in plot.group_runs(runs)] == [["a", "b"], ["c"]]


def test_average_runs_mean_and_bands_by_hand():
    a = plot.Series(np.array([0, 10, 20]), np.array([1.0, 2.0, 3.0]))
    b = plot.Series(np.array([0, 10, 20]), np.array([3.0, 4.0, 5.0]))
    steps, mean, low, high, count = plot.average_runs([a, b], band="minmax")
    assert steps.tolist() == [0, 10, 20]
    assert mean.tolist() == [2.0, 3.0, 4.0]  # (1 + 3) / 2, (2 + 4) / 2, (3 + 5) / 2
    assert low.tolist() == [1.0, 2.0, 3.0] and high.tolist() == [3.0, 4.0, 5.0]
    assert count.tolist() == [2, 2, 2]
    _, mean, low, high, _ = plot.average_runs([a, b], band="std")
    assert low.tolist() == [1.0, 2.0, 3.0]  # population std of {1, 3} is 1: mean - 1
    assert high.tolist() == [3.0, 4.0, 5.0]


def _run(name, seed, metrics):
    series = {key: plot.Series(np.array(steps), np.array(values)) for key, (steps, values) in metrics.items()}
    return plot.Run(name, name, "PPO", {"environment_name": "Pong", "seed": str(seed)}, series)


def test_a_single_runs_evaluation_carries_its_lowest_and_highest_episode():
    evaluation = {
        "eval/mean_episode_return": ([250, 500], [-21.0, -10.0]),
        "eval/min_episode_return": ([250, 500], [-21.0, -16.0]),
        "eval/max_episode_return": ([250, 500], [-21.0, -3.0]),
    }
    (panel,) = plot.build_panels([_run("PPO_Pong", 1, evaluation)], ["eval/mean_episode_return"])
    (curve,) = panel.curves
    assert curve.mean.tolist() == [-21.0, -10.0]
    low, high = curve.episode_spread
    assert low.tolist() == [-21.0, -16.0] and high.tolist() == [-21.0, -3.0]
    # Two seeds: the band is over the runs, not one run's episodes; a run without the spread has none.
    other = {"eval/mean_episode_return": ([250, 500], [-20.0, -12.0])}
    (panel,) = plot.build_panels(
        [_run("PPO_Pong", 1, evaluation), _run("PPO_Pong-2", 2, other)], ["eval/mean_episode_return"]
    )
    assert panel.curves[0].episode_spread is None and panel.curves[0].low.tolist() == [-21.0, -12.0]
    (panel,) = plot.build_panels([_run("PPO_Pong-2", 2, other)], ["eval/mean_episode_return"])
    assert panel.curves[0].episode_spread is None


def test_a_run_that_stopped_early_leaves_the_mean_where_it_ends():
    long = plot.Series(np.array([0, 10, 20]), np.array([1.0, 2.0, 3.0]))
    short = plot.Series(np.array([0, 5]), np.array([3.0, 4.0]))  # e.g. solved and stopped at step 5
    steps, mean, _, _, count = plot.average_runs([long, short], band="minmax")
    assert steps.tolist() == [0, 5, 10, 20]
    # step 5: the long run interpolates to 1.5, so (1.5 + 4) / 2 = 2.75; from 10 on only the long run counts
    assert mean.tolist() == [2.0, 2.75, 2.0, 3.0]
    assert count.tolist() == [2, 2, 1, 1]


def test_moving_average_by_hand():
    assert plot.moving_average(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist() == [1.0, 1.5, 2.5, 3.5]
    assert plot.moving_average(np.array([1.0, 2.0, 3.0]), 1).tolist() == [1.0, 2.0, 3.0]


def test_group_labels_name_the_flags_that_differ_within_one_agent():
    def run(agent, seed, learning_rate, **flags):
        config = {
            "environment_name": "CartPole-v1",
            "seed": str(seed),
            "learning_rate": learning_rate,
            **flags,
        }
        return plot.Run("p", "n", agent, config, {})

    runs = [run("IMPALA", 1, "0.001"), run("IMPALA", 2, "0.001"), run("IMPALA", 1, "0.00045")]
    runs.append(run("PPO", 1, "0.001", num_epochs="10"))  # another agent: its name is enough
    groups = plot.group_runs(runs)
    assert [len(g) for g in groups] == [2, 1, 1]
    assert plot.group_labels(groups) == [
        "IMPALA CartPole-v1 (learning_rate=0.001)",
        "IMPALA CartPole-v1 (learning_rate=0.00045)",
        "PPO CartPole-v1",
    ]


@pytest.mark.smoke
def test_command_writes_a_png_from_real_runs(real_runs, tmp_path, capsys):
    output = tmp_path / "curve.png"
    plot.main([real_runs["dqn_1"], real_runs["dqn_2"], real_runs["ppo"], f"--output={output}"])
    assert "2 panel(s), 4 curve(s) in all from 3 run(s)" in capsys.readouterr().out  # DQN's group, PPO
    with open(output, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.smoke
def test_metric_flag_draws_a_learner_statistic_and_runs_root_means_every_run(real_runs, tmp_path):
    output = tmp_path / "loss.png"
    panels = plot.main([str(real_runs["root"] / "runs"), "--metric=learner/loss", f"--output={output}"])
    (panel,) = panels
    assert panel.metric == "learner/loss"
    assert {c.label.split(" ")[0] for c in panel.curves} == {"DQN", "PPO"}
    assert os.path.getsize(output) > 0


def test_an_empty_run_folder_is_one_line_and_a_non_zero_exit(tmp_path, capsys):
    # `python -m deep_rl_zoo.plot` calls this `main`; in-process, the exit is a SystemExit.
    empty = tmp_path / "runs" / "DQN_CartPole-v1"
    empty.mkdir(parents=True)
    with pytest.raises(SystemExit) as exit_info:
        plot.main([str(empty), f"--output={tmp_path / 'x.png'}"])
    assert exit_info.value.code != 0
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and str(empty) in stderr and "first iteration" in stderr
    assert not os.path.exists(tmp_path / "x.png")


@pytest.mark.smoke
def test_an_unknown_metric_lists_what_was_logged(real_runs):
    run = plot.read_run(real_runs["dqn_1"])
    with pytest.raises(ConfigError, match="learner/loss"):
        plot.build_panels([run], ["learner/los"])


def test_reference_flags_parse_label_and_number_or_fail_in_one_line():
    assert plot.parse_references(["random play=1.7", "human = 30.5", "a=b=-2"]) == [
        ("random play", 1.7),
        ("human", 30.5),
        ("a=b", -2.0),  # the number is after the last "="
    ]
    for bad in ("1.7", "=1.7", "random play=", "random play=high", "x=nan"):
        with pytest.raises(ConfigError, match="LABEL=NUMBER"):
            plot.parse_references([bad])


@pytest.mark.smoke
def test_a_reference_line_is_drawn_on_the_return_panels_only(real_runs, tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    lines = []
    axhline = Axes.axhline
    monkeypatch.setattr(
        Axes, "axhline", lambda axis, y, **kw: lines.append((axis, y, kw["label"])) or axhline(axis, y, **kw)
    )
    output = tmp_path / "curve.png"
    panels = plot.main(
        [
            real_runs["dqn_1"],
            "--metric=eval/mean_episode_return,learner/loss",
            "--reference=random play=21.5",
            f"--output={output}",
        ]
    )
    references = [(axis.get_title(), y) for axis, y, label in lines if label == "random play: 21.5"]
    assert references == [(panels[0].title, 21.5)]  # the return panel, not the loss panel
    with pytest.raises(SystemExit):
        plot.main([real_runs["dqn_1"], "--reference=1.7", f"--output={tmp_path / 'x.png'}"])
    assert not os.path.exists(tmp_path / "x.png")


def _impala_panels():
    """Three IMPALA groups whose labels agree up to their first comma (as the published IMPALA picture's
    did), one of them with 3 runs in the evaluation panel and 2 in the loss panel."""

    def run(seed, anneal, batch_size, metrics):
        config = {"environment_name": "Pong", "seed": str(seed), "anneal_learning_rate": anneal}
        config["batch_size"] = batch_size
        series = {key: plot.Series(np.array(s), np.array(v)) for key, (s, v) in metrics.items()}
        name = f"IMPALA_{seed}_{anneal}_{batch_size}"
        return plot.Run(name, name, "IMPALA", config, series)

    both = {"eval/mean_episode_return": ([250], [-20.0]), "learner/loss": ([250], [1.0])}
    evaluation_only = {"eval/mean_episode_return": ([250], [-19.0])}
    runs = [run(1, "True", "4", both), run(2, "True", "4", both), run(3, "True", "4", evaluation_only)]
    runs += [run(1, "True", "32", both), run(1, "False", "4", both)]
    return plot.build_panels(runs, ["eval/mean_episode_return", "learner/loss"])


def test_a_group_keeps_its_colour_across_panels_and_groups_differing_in_a_later_flag_do_not_share_one():
    evaluation, loss = _impala_panels()
    assert [c.label for c in evaluation.curves] == [
        "IMPALA Pong (anneal_learning_rate=True, batch_size=4), 3 runs",
        "IMPALA Pong (anneal_learning_rate=True, batch_size=32)",
        "IMPALA Pong (anneal_learning_rate=False, batch_size=4)",
    ]
    assert loss.curves[0].label == "IMPALA Pong (anneal_learning_rate=True, batch_size=4), 2 runs"
    # Other counts, other labels: one group, so one colour in both panels.
    assert [c.group for c in evaluation.curves] == [c.group for c in loss.curves]
    # Labels alike up to their first comma are different groups (the published IMPALA picture once drew
    # the paper's batch of 32 and the batch of 4 in one colour).
    assert len({c.group for c in evaluation.curves}) == 3


@pytest.mark.smoke
def test_the_picture_draws_each_group_in_one_colour_in_every_panel(tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    drawn = []
    plot_line = Axes.plot
    monkeypatch.setattr(
        Axes,
        "plot",
        lambda axis, *a, **kw: (
            drawn.append((axis, kw.get("label"), kw.get("color"))) or plot_line(axis, *a, **kw)
        ),
    )
    plot.draw(_impala_panels(), str(tmp_path / "colours.png"), band="minmax")
    colours = {}
    for axis, label, colour in drawn:
        if label is not None:  # a curve's mean line (the dashed part and the single runs have no label)
            colours.setdefault(axis, []).append(colour)
    evaluation, loss = colours.values()
    assert evaluation == loss and len(set(evaluation)) == 3
