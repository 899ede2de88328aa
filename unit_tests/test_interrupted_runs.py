"""A single-process run stopped by Ctrl-C or SIGTERM saves itself part-way through its iteration, and
--resume finishes that iteration: the same env steps, transitions and gradient steps as a run that was
never stopped (only the episode that was running is lost)."""

import csv
import dataclasses
import importlib.util
import os
import re
import signal

import gymnasium as gym
import pytest

from deep_rl_zoo import checkpoint, environments
from deep_rl_zoo.dqn import train as dqn_train
from deep_rl_zoo.errors import RunInterrupted

STEM = "DQN_CartPole-v1"


class _SignalAt(gym.Wrapper):
    """Sends this process `signum` during its `at`-th env step (as a user's Ctrl-C or `kill` would)."""

    def __init__(self, env, at: int, signum: int):
        super().__init__(env)
        self.at, self.signum, self.count = at, signum, 0

    def step(self, action):
        self.count += 1
        if self.count == self.at:
            os.kill(os.getpid(), self.signum)
        return self.env.step(action)


def _config(tmp_path, **overrides):
    return dqn_train.DqnConfig(
        num_iterations=2,
        num_train_steps=200,
        num_eval_steps=100,
        replay_capacity=1000,
        min_replay_size=50,
        batch_size=16,
        checkpoint_replay=True,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
        **overrides,
    )


def _signal_during(monkeypatch, phase: str, at: int, signum: int = signal.SIGTERM):
    """Makes the run's `phase` ("train" or "eval") environment deliver `signum` at its `at`-th step."""
    if phase == "train":
        original = environments.make_train_environment
        monkeypatch.setattr(
            environments, "make_train_environment", lambda *a, **k: _SignalAt(original(*a, **k), at, signum)
        )
    else:  # the evaluation env: `make_environment(..., train=False)` (training builds its env with it too)
        make = environments.make_environment

        def make_eval(*args, **kwargs):
            env = make(*args, **kwargs)
            return env if kwargs.get("train", True) else _SignalAt(env, at, signum)

        monkeypatch.setattr(environments, "make_environment", make_eval)


def _folder(tmp_path):
    (name,) = os.listdir(tmp_path / "checkpoints")
    return tmp_path / "checkpoints" / name


def _load(folder, name):
    return checkpoint.load_checkpoint(str(folder / name), "DQN", "CartPole-v1")


def _csv_iterations(tmp_path):
    (name,) = os.listdir(tmp_path / "runs")
    with open(tmp_path / "runs" / name / "results.csv") as f:
        return [int(row["iteration"]) for row in csv.DictReader(f)]


@pytest.mark.smoke
def test_sigterm_in_training_saves_the_iteration_part_way_and_resume_finishes_it_exactly(
    tmp_path, monkeypatch, capsys
):
    dqn_train.main(_config(tmp_path / "whole"))
    whole = _load(_folder(tmp_path / "whole"), f"{STEM}_1.ckpt")

    config = _config(tmp_path / "stopped")
    previous_handler = signal.getsignal(signal.SIGTERM)
    with monkeypatch.context() as patch:
        _signal_during(patch, "train", at=300)
        with pytest.raises(RunInterrupted, match="stopped in iteration 1 at env step 300") as stopped:
            dqn_train.main(config)
    assert stopped.value.exit_code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is previous_handler  # the run's handler is gone again
    folder = _folder(tmp_path / "stopped")
    names = sorted(os.listdir(folder))
    assert f"{STEM}_1_interrupted.ckpt" in names and f"{STEM}_1.ckpt" not in names
    assert [n for n in names if n.endswith(".replay.npz")] == [f"{STEM}_1_interrupted.replay.npz"]
    saved = _load(folder, f"{STEM}_1_interrupted.ckpt")
    assert saved["iteration"] == 1
    assert saved["loop"]["next_iteration"] == 1
    assert saved["loop"]["train_env_steps"] == 300
    assert saved["loop"]["iteration_env_steps"] == 100
    assert saved["agent"]["env_steps"] == 300  # the transition of the 300th step was stored, no more
    replay = checkpoint.load_arrays(str(folder / f"{STEM}_1_interrupted.replay.npz"))
    assert int(replay["replay/num_added"]) == 300
    assert _csv_iterations(tmp_path / "stopped") == [0]

    capsys.readouterr()
    dqn_train.main(dataclasses.replace(config, resume=True))
    err = capsys.readouterr().err
    assert f"resuming from {folder / f'{STEM}_1_interrupted.ckpt'}" in err
    assert "restored 300 transitions" in err
    names = sorted(os.listdir(folder))
    assert not [n for n in names if "interrupted" in n]  # finished iteration 1: superseded
    assert [n for n in names if n.endswith(".replay.npz")] == [f"{STEM}_1.replay.npz"]
    resumed = _load(folder, f"{STEM}_1.ckpt")
    for key in ("env_steps", "learner_steps"):
        assert resumed["agent"][key] == whole["agent"][key], key
    assert resumed["loop"]["train_env_steps"] == whole["loop"]["train_env_steps"] == 400
    assert resumed["loop"]["iteration_env_steps"] == 0 and resumed["loop"]["iteration_episode_returns"] == []
    assert _csv_iterations(tmp_path / "stopped") == [0, 1]


@pytest.mark.smoke
def test_sigint_in_evaluation_keeps_the_training_and_resume_plays_the_evaluation_again(
    tmp_path, monkeypatch, capsys
):
    config = _config(tmp_path)
    # A terminal job's Ctrl-C disposition, even where pytest runs with SIGINT ignored (under nohup).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with monkeypatch.context() as patch:
            _signal_during(patch, "eval", at=30, signum=signal.SIGINT)
            with pytest.raises(RunInterrupted, match="stopped in iteration 0 at env step 200") as stopped:
                dqn_train.main(config)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped.value.exit_code == 128 + signal.SIGINT
    folder = _folder(tmp_path)
    saved = _load(folder, f"{STEM}_0_interrupted.ckpt")
    assert saved["loop"]["next_iteration"] == 0
    assert saved["loop"]["iteration_env_steps"] == 200  # training done, the evaluation was not
    games = saved["loop"]["iteration_episode_returns"]
    assert len(games) > 0 and len(saved["loop"]["iteration_episode_lengths"]) == len(games)
    assert sum(saved["loop"]["iteration_episode_lengths"]) <= 200

    dqn_train.main(dataclasses.replace(config, resume=True))
    first = _load(folder, f"{STEM}_0.ckpt")
    assert first["loop"]["train_env_steps"] == 200  # no training step was added to iteration 0
    assert first["agent"]["env_steps"] == 200
    assert _load(folder, f"{STEM}_1.ckpt")["loop"]["train_env_steps"] == 400
    with open(next((tmp_path / "runs").iterdir()) / "results.csv") as f:
        row = next(csv.DictReader(f))
    # Iteration 0's training mean still counts the games it finished before the stop.
    assert int(row["train_num_episodes"]) == len(games)
    assert float(row["train_mean_episode_return"]) == pytest.approx(sum(games) / len(games))


def test_an_ignored_sigint_stays_ignored_and_the_handlers_come_back():
    from deep_rl_zoo.main_loop import stop_on_signals

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under `nohup ... &`
    try:
        term = signal.getsignal(signal.SIGTERM)
        with stop_on_signals() as stop:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            assert not stop.requested
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.signal == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is term
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_latest_checkpoint_orders_an_interrupted_iteration_between_its_neighbours(tmp_path):
    def latest(*names):
        for name in os.listdir(tmp_path):
            os.remove(tmp_path / name)
        for name in names:
            (tmp_path / name).write_bytes(b"")
        return os.path.basename(checkpoint.find_latest_checkpoint(str(tmp_path), "DQN", "CartPole-v1"))

    assert latest(f"{STEM}_0.ckpt", f"{STEM}_1_interrupted.ckpt") == f"{STEM}_1_interrupted.ckpt"
    assert latest(f"{STEM}_1_interrupted.ckpt", f"{STEM}_1.ckpt") == f"{STEM}_1.ckpt"
    assert latest(f"{STEM}_9.ckpt", f"{STEM}_10_interrupted.ckpt") == f"{STEM}_10_interrupted.ckpt"
    assert latest(f"{STEM}_10.ckpt", f"{STEM}_2_interrupted.ckpt") == f"{STEM}_10.ckpt"


@pytest.mark.smoke
def test_sigterm_stops_a_distributed_run_between_learner_steps_and_resume_finishes_the_iteration(
    tmp_path, monkeypatch
):
    from deep_rl_zoo.ppo import train as ppo_train
    from deep_rl_zoo.ppo.agent import Ppo

    config = ppo_train.PpoConfig(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_train_steps=320,
        num_eval_steps=50,
        num_actors=2,
        unroll_length=16,
        minibatch_size=16,
        num_epochs=1,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    learn, calls = Ppo.learn, []

    def learn_then_signal(self, payloads):
        learn(self, payloads)
        calls.append(len(payloads))
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    with monkeypatch.context() as patch:
        patch.setattr(Ppo, "learn", learn_then_signal)
        with pytest.raises(RunInterrupted, match="stopped in iteration 0") as stopped:
            ppo_train.main(config)
    assert stopped.value.exit_code == 128 + signal.SIGTERM
    assert len(calls) == 3  # the learner stopped right after the step in which the signal came
    folder = tmp_path / "checkpoints" / "PPO_CartPole-v1"
    saved = checkpoint.load_checkpoint(
        str(folder / "PPO_CartPole-v1_0_interrupted.ckpt"), "PPO", "CartPole-v1"
    )
    assert saved["agent"]["learner_steps"] == 3
    steps = saved["loop"]["train_env_steps"]
    assert 0 < steps < 320 and saved["loop"]["iteration_env_steps"] == steps  # 3 x 2 unrolls of <= 16
    assert steps <= 3 * 2 * 16

    resumed = ppo_train.main(dataclasses.replace(config, resume=True))
    assert resumed.next_iteration == 2
    assert not [n for n in os.listdir(folder) if "interrupted" in n]
    first = checkpoint.load_checkpoint(str(folder / "PPO_CartPole-v1_0.ckpt"), "PPO", "CartPole-v1")
    # Iteration 0 went on from where it stopped: ~320 env steps in all, not 320 more.
    assert abs(first["loop"]["train_env_steps"] - 320) <= 16
    assert _csv_iterations(tmp_path) == [0, 1]


def _processes_in_group(pgid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _answers(pid: int, signum: int) -> str:
    """What process `pid` does with signal `signum` if it neither ignores nor blocks it ("" if it does):
    its name and whether it catches it or dies of it, from /proc/PID/status ("" if it has gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    except OSError:
        return ""
    bit = 1 << (signum - 1)
    if (int(fields["SigIgn"], 16) | int(fields["SigBlk"], 16)) & bit:
        return ""
    caught = int(fields["SigCgt"], 16) & bit
    return f"{fields['Name'].strip()} {'catches' if caught else 'dies of'} it"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process groups from /proc")
@pytest.mark.parametrize(
    ("signum", "backend"),
    [
        (signal.SIGINT, "local"),  # a terminal's Ctrl-C
        # `timeout`, systemd's stop and batch schedulers signal every process of the job: the actors
        # and the fork server that starts them must leave the stop to the learner, or it counts their
        # deaths as faults, spends its restarts and ends with an error instead of saving
        (signal.SIGTERM, "local"),
        # With --backend=ray the group holds the local Ray instance the learner started (GCS, raylet,
        # workers, the Ray actors): started with SIGTERM blocked, they live on until the learner has saved
        pytest.param(
            signal.SIGTERM,
            "ray",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("ray") is None,
                reason="Ray is an optional extra: pip install -e '.[ray]'",
            ),
        ),
    ],
    ids=["ctrl_c", "sigterm_to_the_group", "sigterm_to_the_group_on_ray"],
)
def test_a_stop_signal_to_a_distributed_scripts_group_saves_it_and_leaves_no_process(
    tmp_path, request, signum, backend
):
    import shutil
    import subprocess
    import sys
    import tempfile
    import time

    from unit_tests.deadlines import Deadline, answers_ctrl_c, under_load

    command = [sys.executable, "-m", "deep_rl_zoo.ppo.run_classic", "--num_train_steps=2048"]
    command += ["--num_eval_steps=100", "--num_iterations=1000", "--nouse_tensorboard", "--noshow_progress"]
    environment = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    if backend == "ray":
        command += ["--backend=ray", "--num_actors=2"]
        # A Ray instance of its own: ray.init joins the newest one recorded under its temp folder (a
        # `ray start` of another test), and its socket paths must stay short.
        environment["RAY_TMPDIR"] = ray_folder = tempfile.mkdtemp(prefix="ray", dir="/tmp")
        request.addfinalizer(lambda: shutil.rmtree(ray_folder, ignore_errors=True))
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,  # restarts and deaths are reported on stdout (tqdm.write), errors on stderr
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, like a terminal job
        preexec_fn=answers_ctrl_c,
    )
    folder = tmp_path / "checkpoints" / "PPO_CartPole-v1"
    try:
        started = Deadline(120)  # start-up, actors, one iteration (stretched by the load)
        while not (folder / "PPO_CartPole-v1_0.ckpt").exists():
            assert process.poll() is None, process.communicate()[0]
            assert not started.passed()
            time.sleep(0.2)
        # Every other process of the group leaves the stop to the learner: it ignores the signal (the fork
        # server and the actors) or blocks it (Ray's). One that caught it, or took its default, could die of
        # it before the learner has saved: under load, Ray's monitors did, and the run lost an object.
        others = [pid for pid in _processes_in_group(process.pid) if pid != process.pid]
        assert others
        answering = {pid: _answers(pid, signum) for pid in others}
        assert not [pid for pid, answers in answering.items() if answers], answering
        # The signal reaches the actors and their fork server first: whether they die of it or not must not
        # hang on how soon the learner notices its own copy, so they get theirs a moment before it does.
        for pid in others:
            os.kill(pid, signum)
        time.sleep(under_load(2))
        assert process.poll() is None, process.communicate()[0]  # the run died of its actors' signal
        os.killpg(process.pid, signum)  # the whole group: the learner, every actor, the fork server
        output, _ = process.communicate(timeout=under_load(60))
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signum, output
    assert "which --resume continues" in output and "Traceback" not in output
    assert "DeprecationWarning" not in output  # Ray 2.60 warns of its own API at every actor start
    # No actor died or was restarted (each would be reported on a line "actor N ..."): the learner stopped them.
    assert re.search(r"^actor \d", output, re.MULTILINE) is None, output
    (saved,) = [n for n in os.listdir(folder) if n.endswith("_interrupted.ckpt")]
    checkpoint.load_checkpoint(str(folder / saved), "PPO", "CartPole-v1")
    gone = Deadline(10)
    while _processes_in_group(process.pid) and not gone.passed():
        time.sleep(0.2)
    assert _processes_in_group(process.pid) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("package", "agent_name", "flags"),
    [
        # A replay ratio of 100 gradient steps per env step received: one learner step owes hundreds.
        ("r2d2", "R2D2", ["--updates_per_env_step=100", "--min_replay_size=100", "--batch_size=8"]),
        ("sac", "SAC", ["--updates_per_env_step=100", "--min_replay_size=100", "--batch_size=8"]),
    ],
)
def test_sigterm_is_obeyed_within_10_s_by_a_learner_owing_many_gradient_steps(
    tmp_path, package, agent_name, flags
):
    import subprocess
    import sys
    import time

    from unit_tests.deadlines import Deadline, under_load

    command = [sys.executable, "-m", f"deep_rl_zoo.{package}.run_classic", "--num_actors=2", *flags]
    command += ["--num_iterations=1000", "--num_train_steps=100000"]
    command += ["--nouse_tensorboard", "--noshow_progress"]
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": repo_root},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        started = Deadline(120)
        while not (tmp_path / "runs").exists():  # the run opened its folders; the actors start now
            assert process.poll() is None and not started.passed()
            time.sleep(0.2)
        time.sleep(under_load(8))  # the replay fills (100 steps) and the learner owes its steps
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, stderr = process.communicate(timeout=under_load(60))
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "which --resume continues" in stderr
    assert took < under_load(10), f"SIGTERM took {took:.1f} s to stop the run"
