"""The benchmark scripts' own arithmetic (their runs are measurements, not tests)."""

import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from deep_rl_zoo.results import export

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


@pytest.mark.parametrize("name", ["ppo", "ppo_rnd", "ppo_icm"])
def test_the_learner_benchmark_times_an_update_of_8_envs_x_128_steps(name):
    """`--part=learners` times the update of run_atari's batch, one unroll per env, however the envs are
    spread over actor processes (2 x 4 on 2 cores gave it one unroll per process, a quarter of it)."""
    learner_speed = _load("atari_learner_speed")
    _, batch = learner_speed.build_ppo(np.random.default_rng(0), name)
    assert sorted(u.actor_index for u in batch) == list(range(8))
    assert {len(u.reward) for u in batch} == {128}


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


def _write_results(path, rows: list[dict]) -> None:
    import csv

    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _evaluation_row(iteration: int, mean: float) -> dict:
    """A results.csv row of a run evaluated over 10 games after every 250k env steps, 10 minutes apart
    with 1 of them evaluating."""
    return {
        "iteration": iteration,
        "train_env_steps": 250_000 * (iteration + 1),
        "eval_mean_episode_return": mean,
        "eval_num_episodes": 10,
        "wall_seconds": 600.0 * (iteration + 1),
        "eval_seconds": 60.0 * (iteration + 1),
    }


def test_time_to_score_is_the_first_evaluation_over_ten_whole_episodes_reaching_the_target(tmp_path):
    time_to_score = _load("time_to_score")

    def row(iteration, mean, episodes, wall, evaluating):
        return {
            "iteration": iteration,
            "train_env_steps": 250_000 * (iteration + 1),
            "eval_mean_episode_return": mean,
            "eval_num_episodes": episodes,
            "wall_seconds": wall,
            "eval_seconds": evaluating,
        }

    _write_results(
        tmp_path / "results.csv",
        [
            row(0, "nan", 0, 900.0, 100.0),  # no whole game: no mean
            row(1, 19.0, 9, 1800.0, 210.0),  # reaches 18, but over 9 games: does not count
            row(2, 17.5, 12, 2700.0, 300.0),
            row(3, 18.0, 10, 3600.0, 420.0),  # the first that counts: 18.0 >= 18 over 10 games
            row(4, 20.0, 11, 4500.0, 500.0),
        ],
    )
    summary = time_to_score.report(str(tmp_path), 18.0, 10, str(tmp_path / "out"))
    assert summary["reached"] and summary["iteration"] == 3
    assert summary["train_env_steps"] == 1_000_000  # 4 iterations of 250,000
    assert (summary["wall_seconds"], summary["wall_seconds_without_eval"]) == (3600.0, 3180.0)  # 3600 - 420
    assert summary["short_evaluations_reaching"] == 1  # iteration 1's 9 games
    # The CPU as the published results name it: model with its vector unit, and native bfloat16 or not.
    assert (summary["cpu_model"], summary["cpu_native_bfloat16"]) == export.cpu_description()
    assert summary["cpu_cores"] >= 1
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["iteration"] == 3
    curve = (tmp_path / "out" / "curve.csv").read_text().splitlines()
    assert curve[1] == "0,250000,900.0,800.0,,0"  # the evaluation without a whole game has no mean
    assert len(curve) == 1 + 5

    missed = time_to_score.report(str(tmp_path), 21.0, 10, str(tmp_path / "missed"))
    assert not missed["reached"] and missed["best_counted_mean"] == 20.0


def test_time_to_score_run_reports_a_stopped_run_and_resume_continues_it(tmp_path, monkeypatch):
    """A run stopped by SIGTERM (status 143) is reported as far as it got; `run --resume` passes the
    script's --resume, appends to train.log and reports the whole run. A crash is an error, and --resume
    needs an earlier run's folder. The training process is a stand-in that writes results.csv."""
    time_to_score = _load("time_to_score")
    out = tmp_path / "s1"
    commands = []

    class StandIn:
        """The run script: two iterations then SIGTERM; resumed, two more reaching 18; status as set."""

        status = 143
        resumed_means = [-20.0, 5.0, 17.0, 18.5]

        def __init__(self, command, **kwargs):
            commands.append(command)
            resumed = "--resume" in command
            means = self.resumed_means if resumed else [-20.0, 5.0]
            folder = out / "runs" / "PPO_Pong_fast"
            folder.mkdir(parents=True, exist_ok=True)
            (out / "checkpoints").mkdir(exist_ok=True)
            _write_results(folder / "results.csv", [_evaluation_row(i, m) for i, m in enumerate(means)])
            self.stdout = iter([f"session {'2' if resumed else '1'}\n"])

        def wait(self):
            return self.status

    monkeypatch.setattr(time_to_score.subprocess, "Popen", StandIn)
    base = ["run", "--script=ppo.run_atari", "--target_return=18", "--eval_interval=250000"]
    base += ["--max_env_steps=10000000", f"--out={out}"]
    script_flags = ["--", "--flagfile=configs/ppo_pong_fast.flags", "--seed=1"]

    stopped = time_to_score.run(*time_to_score.parse_args(base + script_flags))
    assert stopped["interrupted"] and not stopped["reached"] and stopped["best_counted_mean"] == 5.0
    assert "--resume" not in commands[0] and "run --resume" in (out / "summary.md").read_text()
    with pytest.raises(SystemExit, match="not empty"):
        time_to_score.run(*time_to_score.parse_args(base + script_flags))

    StandIn.status, StandIn.resumed_means = 1, [-20.0, 5.0, 6.0]  # a crash: no report
    with pytest.raises(SystemExit, match="exited with status 1"):
        time_to_score.run(*time_to_score.parse_args(base + ["--resume"] + script_flags))

    StandIn.status, StandIn.resumed_means = 0, [-20.0, 5.0, 17.0, 18.5]
    resumed = time_to_score.run(*time_to_score.parse_args(base + ["--resume"] + script_flags))
    assert commands[-1][-1] == "--resume" and "--seed=1" in commands[-1]
    assert resumed["reached"] and resumed["iteration"] == 3 and not resumed["interrupted"]
    assert (out / "train.log").read_text() == "session 1\nsession 2\nsession 2\n"
    with pytest.raises(SystemExit, match="no checkpoints"):
        fresh = [a.replace(str(out), str(tmp_path / "new")) for a in base]
        time_to_score.run(*time_to_score.parse_args(fresh + ["--resume"] + script_flags))


def test_time_to_score_table_gives_each_seed_and_the_median_with_the_cpu_that_trained_it(tmp_path):
    time_to_score = _load("time_to_score")

    def run(name, means, cpu_model=None):
        folder = tmp_path / name
        folder.mkdir()
        _write_results(folder / "results.csv", [_evaluation_row(i, mean) for i, mean in enumerate(means)])
        if cpu_model:  # a published folder names the CPU that trained it
            (folder / "command.txt").write_text(
                f"cpu_model={cpu_model}\ncpu_native_bfloat16=yes: avx512_bf16\n"
            )
        return str(folder)

    seeds = [
        run("s1", [-20.0, 10.0, 18.5], "Some CPU, AVX2"),  # at 750k, 30 min (27 without evaluation)
        run("s2", [18.0], "Some CPU, AVX2"),  # at 250k, 10 min
        run("s3", [-20.0, -5.0, 12.0, 19.0], "Some CPU, AVX2"),  # at 1M, 40 min
    ]
    table = time_to_score.seeds_table(seeds, 18.0)
    lines = table.splitlines()
    assert (
        lines[2]
        == "| s1 | yes, 18.5 over 10 episodes | 750,000 | 30.0 min | 27.0 min | Some CPU, AVX2 (bf16) |"
    )
    # The median of each column: 750k env steps, 30 minutes, 27 without the evaluations.
    assert lines[-1] == "| median of 3 | | 750,000 | 30.0 min | 27.0 min | |"

    missed = time_to_score.seeds_table([seeds[0], run("s4", [-20.0, 17.9])], 18.0).splitlines()
    assert missed[-1].startswith("| s4 | no (best 17.9) |")  # a seed that missed: no median is made up
    assert not any(line.startswith("| median") for line in missed)


def test_time_to_score_of_a_results_csv_without_wall_clock_columns_gives_env_steps_only(tmp_path):
    time_to_score = _load("time_to_score")
    _write_results(
        tmp_path / "results.csv",
        [
            {
                "iteration": 0,
                "train_env_steps": 5000,
                "eval_mean_episode_return": 480.0,
                "eval_num_episodes": 10,
            }
        ],
    )
    summary = time_to_score.report(str(tmp_path), 475.0, 10, str(tmp_path / "out"))
    assert summary["reached"] and summary["train_env_steps"] == 5000
    assert summary["wall_seconds"] is None and summary["wall_seconds_without_eval"] is None
    assert "wall-clock: not recorded" in (tmp_path / "out" / "summary.md").read_text()


def test_time_to_score_resume_of_a_run_stopped_after_reaching_the_target_trains_no_further(
    tmp_path, monkeypatch, capsys
):
    """A SIGTERM that lands after the evaluation reaching 18 was written (and its checkpoint saved) stops
    the run with status 143: the report gives the target as reached, and `run --resume` reports it again
    without starting the run script, which would otherwise train past the target."""
    time_to_score = _load("time_to_score")
    out = tmp_path / "s2"
    commands = []

    class StandIn:
        def __init__(self, command, **kwargs):
            commands.append(command)
            folder = out / "runs" / "PPO_Pong_tuned"
            folder.mkdir(parents=True, exist_ok=True)
            (out / "checkpoints").mkdir(exist_ok=True)
            rows = [_evaluation_row(i, m) for i, m in enumerate([-20.0, 5.0, 18.5])]
            _write_results(folder / "results.csv", rows)
            self.stdout = iter(["iteration 2: ...\n"])

        def wait(self):
            return 143

    monkeypatch.setattr(time_to_score.subprocess, "Popen", StandIn)
    base = ["run", "--script=ppo.run_atari", "--target_return=18", "--eval_interval=250000"]
    base += ["--max_env_steps=10000000", f"--out={out}", "--", "--seed=2"]
    stopped = time_to_score.run(*time_to_score.parse_args(base))
    assert stopped["reached"] and stopped["iteration"] == 2 and stopped["interrupted"]
    assert "before the target" not in (out / "summary.md").read_text() + capsys.readouterr().out
    resumed = time_to_score.run(*time_to_score.parse_args(base[:-2] + ["--resume"] + base[-2:]))
    assert len(commands) == 1  # the run script was not started again
    assert resumed["reached"] and resumed["iteration"] == 2 and resumed["train_env_steps"] == 750_000


def _time_to_score_of_dqn_on_cartpole(out, *, target_return, eval_interval, num_eval_steps) -> list[str]:
    """`time_to_score.py run` of DQN on CartPole-v1 into `out`, learning from 100 env steps on."""
    return (
        [sys.executable, str(BENCHMARKS / "time_to_score.py"), "run", "--script=dqn.run_classic"]
        + [f"--target_return={target_return}", f"--eval_interval={eval_interval}", f"--out={out}"]
        + ["--max_env_steps=100000000", "--", f"--num_eval_steps={num_eval_steps}"]
        + ["--min_replay_size=100", "--nouse_tensorboard"]
    )


@pytest.mark.slow
def test_time_to_score_hands_sigterm_to_the_run_which_saves_and_leaves_no_process_behind(tmp_path):
    import signal

    out = tmp_path / "out"
    wrapper = subprocess.Popen(
        _time_to_score_of_dqn_on_cartpole(out, target_return=100_000, eval_interval=300, num_eval_steps=100),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log = out / "train.log"
    deadline = time.monotonic() + 120
    while not (log.is_file() and "iteration 0:" in log.read_text()):
        assert time.monotonic() < deadline and wrapper.poll() is None, "the run never finished an iteration"
        time.sleep(0.2)
    wrapper.send_signal(signal.SIGTERM)  # to the wrapper alone, as a watchdog's `kill -TERM <pid>` does
    output, _ = wrapper.communicate(timeout=120)
    assert wrapper.returncode == 1, output  # reported, target not reached
    assert "SIGTERM: saving the run" in log.read_text()
    assert list((out / "checkpoints").glob("*/*_interrupted.ckpt")), output
    assert "run --resume continues it" in output
    still_running = []
    for cmdline in pathlib.Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(out).encode() in cmdline.read_bytes():
                still_running.append(cmdline.parent.name)
        except OSError:
            pass  # a process that ended meanwhile
    assert not still_running  # the run and its processes ended with the wrapper


@pytest.mark.slow
def test_time_to_score_run_stops_the_training_at_the_target_and_reports_it(tmp_path):
    # Untrained DQN on CartPole-v1 plays ~10-step games: a target of 5 is met at the first evaluation.
    out = tmp_path / "out"
    result = subprocess.run(
        _time_to_score_of_dqn_on_cartpole(out, target_return=5, eval_interval=200, num_eval_steps=300),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reached"] and summary["iteration"] == 0 and summary["evaluations"] == 1  # it stopped
    assert summary["train_env_steps"] == 200
    # results.csv keeps tenths of a second: 200 quick env steps may round to 0.0 s of training.
    assert 0 < summary["wall_seconds"] < summary["process_wall_seconds"]
    assert 0 <= summary["wall_seconds_without_eval"] <= summary["wall_seconds"]
    assert "--target_return=5.0" in summary["command"]
    assert (out / "train.log").read_text().count("iteration 0:") == 1


def test_chaos_allows_a_killed_learner_to_lose_the_learner_step_that_ends_an_iteration():
    """A phase ends on the learner-step boundary nearest to --num_train_steps, so a learner killed before
    its checkpoint may lose one iteration plus part of a step (30,004 env steps of a 30,000 iteration)."""
    chaos = _load("chaos")
    log = (
        "note: a training phase ends between two learner steps (here 234 of about 128 env steps each), so "
        "iteration 0 trained 30,004 env steps for --num_train_steps=30,000\n"
    )
    assert chaos.learner_step_env_steps(log) == 128
    assert chaos.learner_step_env_steps("iteration 0: env steps 30,000\n") == 0  # no note: no slack


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(os, "getloadavg") or not os.path.exists("/proc/self/stat"), reason="Linux /proc"
)
def test_chaos_short_survives_and_reports_every_fault():
    """benchmarks/chaos.py --short: killed and hung actors, a killed learner, SIGTERM, a torn checkpoint,
    --resume, and nothing left behind (~1.5 min)."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "chaos.py"), "--short"],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "PYTHONPATH": str(BENCHMARKS.parent)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "FAIL" not in result.stdout and result.stdout.count("PASS") == 8


@pytest.mark.slow
def test_atari_resume_exact_passes_on_a_run_and_fails_when_the_replay_is_not_restored(tmp_path):
    """benchmarks/atari_resume_exact.py on a tiny DQN Pong run's --checkpoint_replay checkpoint: the round
    trip through the files continues bit-exactly, and a B that did not get the replay differs at once."""
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent)}
    small = ["--replay_capacity=600", "--min_replay_size=300"]
    run = [sys.executable, "-m", "deep_rl_zoo.dqn.run_atari", "--environment_name=Pong", "--seed=1"]
    run += ["--num_iterations=1", "--num_train_steps=700", "--num_eval_steps=50", "--checkpoint_replay"]
    run += [f"--checkpoint_dir={tmp_path}/c", f"--runs_dir={tmp_path}/r", "--noshow_progress", *small]
    subprocess.run(run + ["--nouse_tensorboard", "--num_threads=1"], check=True, env=env, capture_output=True)
    saved = tmp_path / "c" / "DQN_Pong" / "DQN_Pong_0.ckpt"
    check = [sys.executable, str(BENCHMARKS / "atari_resume_exact.py"), f"--checkpoint={saved}"]
    check += [
        "--set=replay_capacity=600",
        "--set=min_replay_size=300",
        "--steps_before=200",
        "--steps_after=120",
    ]
    result = subprocess.run(check, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "PASS" in result.stdout, result.stdout + result.stderr[-3000:]
    # Broken on purpose: the "save" writes the files A was loaded from, so B misses A's 200 steps.
    stale = f"""
import importlib.util, shutil, sys
spec = importlib.util.spec_from_file_location("check", {str(BENCHMARKS / "atari_resume_exact.py")!r})
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)
original = {str(saved)!r}
check.checkpoint.save_checkpoint = lambda path, *args, **kwargs: shutil.copy(original, path)
check.checkpoint.save_arrays = lambda path, arrays: shutil.copy(check.checkpoint.replay_path(original), path)
sys.argv = {check[1:]!r}
sys.exit(check.main())
"""
    result = subprocess.run(
        [sys.executable, "-c", stale], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 1 and "FAIL" in result.stdout, result.stdout + result.stderr[-3000:]


@pytest.mark.slow  # a real Atari-sized learner step of each agent: seconds
@pytest.mark.parametrize("agent", ["r2d2", "ngu"])
def test_the_recurrent_breakdown_times_every_part_of_the_real_step_and_leaves_the_code_as_it_was(agent):
    """Every function the breakdown wraps is one the learner's step really calls (a part the step stopped
    calling through its module would go untimed into "rest"), and the wrappers are gone afterwards."""
    from deep_rl_zoo import optimization
    from deep_rl_zoo.r2d2 import agent as r2d2_agent

    breakdown = _load("recurrent_learner_breakdown")
    originals = (r2d2_agent.unroll, optimization.gradient_step, optimization.apply_gradients)
    args = SimpleNamespace(batch_size=1, replay_capacity=2_000, num_threads=1, steps=1, set=[])
    result = breakdown.measure(agent, args, bfloat16=False)
    parts = result["parts_cpu"]
    expected = {
        "replay: sample",
        "replay: priorities",
        "target net: burn-in + learned steps (no grad)",
        "online net: burn-in (no grad)",
        "online net: learned steps (forward)",
        "targets (n-step double Q or Retrace), forward",
        "backward (all networks)",
        "optimizer: clip + Adam",
        "rest (Python, statistics, target copy)",
    }
    if agent == "ngu":
        expected |= {"batch to tensors", "embedding + RND losses (forward)"}
        assert set(result["backward_by_network"]) == {"Q loss backward", "embedding + RND backward"}
    assert set(parts) == expected
    assert parts["rest (Python, statistics, target copy)"] < 0.2 * result["cpu"]
    assert (r2d2_agent.unroll, optimization.gradient_step, optimization.apply_gradients) == originals


def test_the_speed_table_measures_every_agents_run_atari_past_its_warm_up():
    """Each of the twenty-one run_atari scripts (A2C-grad's run_atari_grad too) is in the table once, the flags it changes for the
    measurement are accepted by that script's config, and a warm-up (the replay's, epsilon's decay,
    PPO-RND's observation normaliser's) ends inside iteration 1, so iteration 2 times training, not
    collection."""
    from deep_rl_zoo import config as config_module
    from unit_tests.script_calls import run_script_call

    speed_table = _load("atari_speed_table")
    dqn_cartpole = _load("dqn_cartpole")
    scripts = sorted(
        f"deep_rl_zoo.{p.parent.name}.{p.stem}"
        for p in (BENCHMARKS.parent / "deep_rl_zoo").glob("*/run_atari*.py")
    )
    assert sorted(agent.module for agent in speed_table.AGENTS) == scripts
    assert len(scripts) == 21
    for agent in speed_table.AGENTS:
        call = run_script_call(agent.module)
        overrides = dqn_cartpole.parse_overrides(
            [flag.removeprefix("--") for flag in agent.flags], call.config_cls
        )
        config = call.config_cls(**{**call.defaults, "num_train_steps": agent.env_steps, **overrides})
        warm_up = sum(
            getattr(config, name, 0)
            for name in ("min_replay_size", "exploration_epsilon_decay_steps", "observation_warmup_steps")
        )
        assert warm_up < agent.env_steps, agent.name
        assert isinstance(config, config_module.RunConfig)


def test_the_speed_table_reports_cpu_and_cores_busy_between_iteration_1_and_2():
    """Samples are (CPU s, wall s): iteration 2's figures are the differences from the sample that saw
    row 1 to the one that saw row 2, never from the start, whose CPU is start-up and warm-up."""
    speed_table = _load("atari_speed_table")
    marks = {0: (3.0, 2.0), 1: (20.0, 12.0), 2: (30.0, 17.0)}
    assert speed_table._cpu_per_1000(marks, 5000) == pytest.approx(2.0)
    assert speed_table._cores_busy(marks) == pytest.approx(2.0)
    assert math.isnan(speed_table._cores_busy({0: (3.0, 2.0), 1: (20.0, 12.0)}))  # row 2 never sampled


def test_the_speed_table_splits_the_distributed_agents_time_as_their_loop_reports_it():
    """The split table reads the columns the distributed loop writes (so a renamed one cannot leave it
    silently empty) and leaves out the single-process agents, which write none."""
    from deep_rl_zoo.runtime.loop import PhaseTimes

    speed_table = _load("atari_speed_table")
    assert set(speed_table.SPLIT_KEYS) == set(PhaseTimes().statistics())
    split = dict(zip(speed_table.SPLIT_KEYS, (0.25, 0.7, 0.12, 1.83, 0.6, 0.05, 0.97), strict=True))
    text = speed_table.split_table([{"agent": "ppo", "split": split}, {"agent": "dqn", "split": {}}])
    assert text.splitlines()[2] == "| ppo | 25% | 70% | 0.12 | 1.83 | 60% | 5% | 0.97 |"
    assert len(text.splitlines()) == 3
    assert speed_table.split_table([{"agent": "dqn", "split": {}}]) == ""


@pytest.mark.slow
def test_the_speed_table_samples_a_stage_the_run_reached_as_it_ended():
    """A run that writes its last row and exits between two samples: the last sample marks that row, so
    iteration 2 still has figures (the sampler used to take stage 1's own sample for it: zero CPU)."""
    speed_table = _load("atari_speed_table")
    with tempfile.TemporaryDirectory() as folder:
        work = pathlib.Path(folder)
        rows = work / "rows.txt"
        burn = (
            "import time\n"
            f"open({str(rows)!r}, 'a').write('1\\n')\n"
            "end = time.process_time() + 0.5\n"
            "while time.process_time() < end: pass\n"
            f"open({str(rows)!r}, 'a').write('2\\n')\n"
        )

        def stage() -> int:
            return len(rows.read_text().splitlines()) if rows.exists() else 0

        marks, _, _ = speed_table.run_sampled([sys.executable, "-c", burn], work, stage)
    assert 2 in marks
    cpu, wall = speed_table._between_stages(marks)
    assert 0.2 <= cpu <= 0.9 and wall > 0, (cpu, wall)


@pytest.mark.slow
def test_the_speed_table_counts_the_cpu_of_the_runs_processes_and_only_theirs():
    """A run in its own session that burns about 0.6 CPU seconds in a child process: the sampler counts
    them (the child's own time while it lives, then in its parent's reaped-children time), and not this
    test's process."""
    speed_table = _load("atari_speed_table")
    burn = (
        "import subprocess, sys\n"
        "code = 'import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass'\n"
        "subprocess.run([sys.executable, '-c', code], check=True)\n"
        "print('reaped', flush=True)\n"
        "sys.stdin.read()  # lives on until the test has sampled it\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", burn],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    busy_here = time.process_time() + 0.3
    while time.process_time() < busy_here:  # this process's CPU must not be counted
        pass
    usage = [speed_table.session_usage(child.pid)]  # while the burn may still run
    assert child.stdout.readline() == "reaped\n"  # (waiting for it however loaded the machine is)
    usage.append(speed_table.session_usage(child.pid))
    child.stdin.close()
    assert child.wait(timeout=60) == 0
    cpu_s = usage[-1][0]  # a sample taken after the child's own child was reaped
    assert 0.6 <= cpu_s < 0.6 + 0.5, cpu_s  # the burn plus two interpreters' start-up
    assert max(rss for _, rss in usage) > 5 * 2**20  # a Python process holds megabytes
