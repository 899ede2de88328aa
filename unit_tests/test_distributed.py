"""The distributed loop: shared parameters, actor processes, faults, iteration boundaries, Ctrl-C."""

import csv
import fcntl
import functools
import multiprocessing
import os
import re
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import time

import numpy as np
import pytest
import torch
from torch import nn

from deep_rl_zoo import errors, gym_env, main_loop, trackers
from deep_rl_zoo.errors import ActorError, ZooError
from deep_rl_zoo.runtime import interface as runtime_interface
from deep_rl_zoo.runtime import loop as runtime_loop
from deep_rl_zoo.runtime.interface import ACTOR_TIME_KEYS, ActorLinkBase, ActorMessage, ActorRestart
from deep_rl_zoo.runtime.local import LocalActorRuntime, SharedParameters
from deep_rl_zoo.runtime.loop import run_distributed_training_iterations
from unit_tests.deadlines import Deadline, answers_ctrl_c, under_load

# ----------------------------------------------------------------------------------------------------
# A fake algorithm: actors act at random on CartPole and send (parameter version, env steps) unrolls.


class _CountingActor:
    """Sends an unroll every `unroll_length` env steps; `synchronous` actors then wait for new params."""

    agent_name = "FAKE"

    def __init__(self, link, unroll_length, synchronous, fail_after, failure, max_sleep_s, rng):
        self._link = link
        self._unroll_length = unroll_length
        self._synchronous = synchronous
        self._fail_after = fail_after
        self._failure = failure
        self._max_sleep_s = max_sleep_s
        self._rng = rng
        self._steps_in_unroll = 0
        self._total_steps = 0

    def step(self, timestep):
        if not timestep.first:
            self._steps_in_unroll += 1
            self._total_steps += 1
            if self._total_steps == self._fail_after:
                if self._failure == "raise":
                    raise RuntimeError("boom in the actor")
                os._exit(3)
        if self._steps_in_unroll == self._unroll_length:
            if self._max_sleep_s > 0:  # scrambles the order in which actors reach the learner
                time.sleep(self._rng.uniform(0, self._max_sleep_s))
            self._link.send({"version": self._link.parameter_version, "steps": self._steps_in_unroll})
            self._steps_in_unroll = 0
            if self._synchronous:
                self._link.wait_for_new_parameters()
            else:
                self._link.pull_parameters()
        return int(self._rng.integers(2))

    def reset(self):
        pass


def _build_fake_actor(
    unroll_length,
    synchronous,
    failing_actor,
    fail_after,
    failure,
    max_sleep_s,
    actor_index,
    seed,
    device,
    link,
):
    env = gym_env.create_classic_environment("CartPole-v1", seed=seed)
    actor = _CountingActor(
        link,
        unroll_length,
        synchronous,
        fail_after if actor_index == failing_actor else -1,
        failure,
        max_sleep_s,
        np.random.default_rng(actor_index),
    )
    return env, actor, nn.Linear(2, 1)


class _FakeLearner:
    """Checks that every payload of a synchronous step was collected with the published parameters."""

    agent_name = "FAKE"
    on_policy = False  # the learner counts stale payloads itself: the loop must not drop them

    def __init__(self, num_actors: int, synchronous: bool):
        self.messages_per_step = num_actors
        self._synchronous = synchronous
        self._module = nn.Linear(2, 1)
        self.version = 1  # the runtime publishes once at construction
        self.steps_received = 0
        self.learner_steps = 0
        self.stale_payloads = 0

    @property
    def shared_module(self):
        return self._module

    def learn(self, payloads):
        self.learner_steps += 1
        for payload in payloads:
            self.steps_received += payload["steps"]
            if payload["version"] != self.version:
                self.stale_payloads += 1
        self.version += 1  # the loop publishes right after this

    @property
    def statistics(self):
        return {"learner_steps": self.learner_steps}

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def _make_pool(num_actors, learner, unroll_length=5, synchronous=True, failing_actor=-1, fail_after=-1,
               failure="raise", max_sleep_s=0.0, max_actor_restarts=0):  # fmt: skip
    build = functools.partial(
        _build_fake_actor, unroll_length, synchronous, failing_actor, fail_after, failure, max_sleep_s
    )
    return LocalActorRuntime(
        learner.shared_module,
        build,
        seeds=list(range(num_actors)),
        devices=[torch.device("cpu")] * num_actors,
        max_actor_restarts=max_actor_restarts,
    )


class _RandomAgent:
    agent_name = "FAKE"

    def step(self, timestep):
        return 0

    def reset(self):
        pass


def _run(tmp_path, learner, pool, num_iterations, num_train_steps):
    logger = trackers.RunLogger(
        str(tmp_path), use_tensorboard=False, results_csv_path=str(tmp_path / "r.csv")
    )
    env = gym_env.create_classic_environment("CartPole-v1", seed=99)
    try:
        with pool:
            return run_distributed_training_iterations(
                num_iterations=num_iterations,
                num_train_steps=num_train_steps,
                num_eval_steps=20,
                learner=learner,
                runtime=pool,
                eval_agent=_RandomAgent(),
                eval_env=env,
                seed=0,
                logger=logger,
                save_checkpoint=lambda iteration, state: "nowhere",
                loop_state=main_loop.LoopState(),
                show_progress=False,
            )
    finally:
        env.close()


def _assert_all_children_gone(pool):
    pids = pool.started_pids
    assert pids, "the pool never started its actors"
    assert multiprocessing.active_children() == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# ----------------------------------------------------------------------------------------------------
# Shared parameters (in one process).


def test_shared_parameters_copy_values_and_count_versions():
    context = torch.multiprocessing.get_context("spawn")
    learner_module = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))  # float32 params, int64 buffer
    shared = SharedParameters(learner_module, context)
    assert shared.version == 0
    with torch.no_grad():
        learner_module[0].weight.fill_(2.0)
        learner_module[1].num_batches_tracked.fill_(7)
    assert shared.publish(learner_module) == 1
    actor_module = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    assert shared.copy_to(actor_module) == 1
    assert torch.equal(actor_module[0].weight, torch.full((2, 3), 2.0))
    assert actor_module[1].num_batches_tracked.item() == 7
    # A later update reaches the actor only when it copies again.
    with torch.no_grad():
        learner_module[0].bias.fill_(-1.0)
    assert shared.publish(learner_module) == 2
    assert not torch.equal(actor_module[0].bias, learner_module[0].bias)
    shared.copy_to(actor_module)
    assert torch.equal(actor_module[0].bias, torch.full((2,), -1.0))


def test_shared_parameters_reject_another_architecture():
    shared = SharedParameters(nn.Linear(3, 2), torch.multiprocessing.get_context("spawn"))
    with pytest.raises(ValueError, match="architecture"):
        shared.publish(nn.Linear(4, 2))


# ----------------------------------------------------------------------------------------------------
# Actor processes (each test starts real processes: a few seconds).


@pytest.mark.slow
def test_synchronous_actors_many_short_iterations_no_deadlock_and_on_policy(tmp_path):
    # 3 actors, unrolls of 5 steps, iterations of 7 steps: every iteration boundary falls inside a
    # learner step, and random sleeps shuffle which actor arrives first.
    learner = _FakeLearner(num_actors=3, synchronous=True)
    pool = _make_pool(3, learner, unroll_length=5, max_sleep_s=0.01)
    took = Deadline(60)
    state = _run(tmp_path, learner, pool, num_iterations=30, num_train_steps=7)
    assert not took.passed()
    assert state.next_iteration == 30
    # 7 steps need one learner step of 3 x 5 = 15 env steps per iteration.
    assert learner.learner_steps == 30
    assert state.train_env_steps == learner.steps_received == 30 * 15
    assert learner.stale_payloads == 0  # each unroll was collected with the newest parameters
    _assert_all_children_gone(pool)


@pytest.mark.slow
def test_asynchronous_actors_many_short_iterations_no_deadlock(tmp_path):
    learner = _FakeLearner(num_actors=2, synchronous=False)
    pool = _make_pool(2, learner, unroll_length=3, synchronous=False, max_sleep_s=0.005)
    state = _run(tmp_path, learner, pool, num_iterations=40, num_train_steps=5)
    assert state.next_iteration == 40
    assert state.train_env_steps == learner.steps_received >= 40 * 5
    _assert_all_children_gone(pool)


@pytest.mark.slow
def test_single_actor_works(tmp_path):
    learner = _FakeLearner(num_actors=1, synchronous=True)
    pool = _make_pool(1, learner, unroll_length=4)
    state = _run(tmp_path, learner, pool, num_iterations=3, num_train_steps=8)
    assert state.train_env_steps == 3 * 8
    assert learner.stale_payloads == 0
    _assert_all_children_gone(pool)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("failure", "message"),
    [("raise", "actor 1 failed: RuntimeError: boom"), ("exit", "actor 1 exited with code 3")],
)
def test_actor_failure_stops_the_run_naming_the_actor(tmp_path, failure, message):
    learner = _FakeLearner(num_actors=3, synchronous=True)
    pool = _make_pool(3, learner, unroll_length=5, failing_actor=1, fail_after=12, failure=failure)
    took = Deadline(30)
    with pytest.raises(ActorError, match=message):
        _run(tmp_path, learner, pool, num_iterations=1000, num_train_steps=1000)
    assert not took.passed()  # noticed within seconds, not at the end of the run
    _assert_all_children_gone(pool)


def test_actor_error_ends_a_script_with_a_nonzero_exit_code():
    assert issubclass(ActorError, ZooError)
    assert ActorError.exit_code != 0


_INTERRUPTIBLE_RUN = textwrap.dedent(
    """
    import os, sys, pathlib, time
    from deep_rl_zoo.errors import exit_on_error
    from unit_tests import test_distributed as t

    @exit_on_error
    def main():
        learner = t._FakeLearner(num_actors=2, synchronous=True)
        if len(sys.argv) > 2 and sys.argv[2] == "flooding":  # the learner stops reading: actors block mid-send
            with t._flooding_runtime(2, max_actor_restarts=0) as pool:
                pool.get()
                pathlib.Path(sys.argv[1]).write_text(" ".join(str(p.pid) for p in pool.processes))
                while True:
                    time.sleep(1)
        pool = t._make_pool(2, learner, unroll_length=5, max_sleep_s=0.002)
        with pool:
            pathlib.Path(sys.argv[1]).write_text(" ".join(str(p.pid) for p in pool.processes))
            while True:
                pool.get()
                learner.learn([{"version": learner.version, "steps": 0}])
                pool.publish(learner.shared_module)

    main()
    """
)


@pytest.mark.slow
def test_ctrl_c_stops_the_learner_and_every_actor(tmp_path):
    pid_file = tmp_path / "pids"
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    process = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTIBLE_RUN, str(pid_file)],
        cwd=repo_root,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, like a terminal job
        preexec_fn=answers_ctrl_c,  # and Ctrl-C reaches it even if pytest runs with SIGINT ignored
    )
    try:
        started = Deadline(60)  # a Python start-up importing torch, then two actors (stretched by the load)
        while not pid_file.exists() or not pid_file.read_text():
            assert process.poll() is None, process.stderr.read()
            assert not started.passed()
            time.sleep(0.1)
        time.sleep(2.0)  # let the actors get going
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
        _, stderr = process.communicate(timeout=under_load(30))
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "Traceback" not in stderr  # the actors ignored the SIGINT; the learner stopped them
    for pid in map(int, pid_file.read_text().split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_actors_on_gpu_without_a_gpu_keeps_actors_on_the_cpu_and_says_so_once(capsys):
    from deep_rl_zoo import distributed

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: actors would go there")
    assert distributed.actor_devices(3, actors_on_gpu=True) == [torch.device("cpu")] * 3
    assert capsys.readouterr().err.count("no CUDA device") == 1
    assert distributed.actor_devices(3, actors_on_gpu=False) == [torch.device("cpu")] * 3
    assert capsys.readouterr().err == ""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc")
@pytest.mark.parametrize("actors_blocked_on", ["waiting for parameters", "sending (learner not reading)"])
def test_actors_exit_when_the_learner_is_killed(tmp_path, actors_blocked_on):
    """SIGKILL leaves the learner no chance to stop its actors: they must notice by themselves, whatever
    they are blocked on, and no process (actor or fork server) may be left."""
    pid_file = tmp_path / "pids"
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    mode = "flooding" if actors_blocked_on.startswith("sending") else "synchronous"
    process = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTIBLE_RUN, str(pid_file), mode],
        cwd=repo_root,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        started = Deadline(60)
        while not pid_file.exists() or not pid_file.read_text():
            assert process.poll() is None, process.stderr.read()
            assert not started.passed()
            time.sleep(0.1)
        time.sleep(1.0)
        actor_pids = list(map(int, pid_file.read_text().split()))
        helper_pids = {_parent(pid) for pid in actor_pids} - {process.pid}  # the fork server
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=under_load(10))
        actors_gone, helpers_gone = Deadline(10), Deadline(20)
        while any(_running(pid) for pid in actor_pids):
            assert not actors_gone.passed(), f"actors {actor_pids} outlived the killed learner by 10 s"
            time.sleep(0.2)
        while any(_running(pid) for pid in helper_pids):
            assert not helpers_gone.passed(), f"fork server {helper_pids} outlived the killed learner"
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            process.kill()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


# ----------------------------------------------------------------------------------------------------
# The loop against a scripted runtime (no processes): what reaches the learner, what is logged.


class _ScriptedRuntime:
    """An ActorRuntime that hands out the given messages in order; publishing bumps the version."""

    num_actors = 2

    def __init__(self, messages, restarts=()):
        self._messages = list(messages)
        self._restarts = list(restarts)
        self.parameter_version = 1  # published once at construction

    def publish(self, module):
        self.parameter_version += 1
        return self.parameter_version

    def get(self):
        return self._messages.pop(0)

    def take_restarts(self):
        restarts, self._restarts = self._restarts, []
        return restarts


class _RecordingLearner(_FakeLearner):
    def __init__(self, on_policy):
        super().__init__(num_actors=2, synchronous=True)
        self.on_policy = on_policy
        self.batches = []

    def learn(self, payloads):
        self.batches.append([(p["actor"], p["version"]) for p in payloads])
        super().learn(payloads)


def _message(actor, version, steps=5):
    payload = {"actor": actor, "version": version, "steps": steps}
    return ActorMessage(actor, version, payload, steps, [], {})


def _run_scripted(tmp_path, learner, runtime, num_train_steps):
    logger = trackers.RunLogger(
        str(tmp_path), use_tensorboard=False, results_csv_path=str(tmp_path / "r.csv")
    )
    env = gym_env.create_classic_environment("CartPole-v1", seed=99)
    try:
        state = run_distributed_training_iterations(
            num_iterations=1, num_train_steps=num_train_steps, num_eval_steps=5, learner=learner,
            runtime=runtime, eval_agent=_RandomAgent(), eval_env=env, seed=0, logger=logger,
            save_checkpoint=lambda iteration, state: "nowhere", loop_state=main_loop.LoopState(),
            show_progress=False,
        )  # fmt: skip
    finally:
        env.close()
        logger.close()
    with open(tmp_path / "r.csv") as f:
        return state, next(csv.DictReader(f))


def test_on_policy_learner_gets_only_data_of_the_newest_parameters_but_every_env_step_counts(
    tmp_path, capsys
):
    # Step 1 at version 1: actors 0 and 1. Then actor 1 was replaced after sending its version-1 unroll,
    # and its replacement sends again: that old unroll (version 1, the learner is at 2) is dropped.
    restart = ActorRestart(1, "was killed by signal SIGKILL", restart_count=1, seed=7)
    runtime = _ScriptedRuntime(
        [_message(0, 1), _message(1, 1), _message(1, 1), _message(0, 2), _message(1, 2)], [restart]
    )
    learner = _RecordingLearner(on_policy=True)
    state, row = _run_scripted(tmp_path, learner, runtime, num_train_steps=25)
    assert learner.batches == [[(0, 1), (1, 1)], [(0, 2), (1, 2)]]
    assert state.train_env_steps == 5 * 5  # the dropped unroll's 5 env steps happened: they count
    assert "learner_mean_parameter_lag" not in row  # always 0 for an on-policy learner
    assert "actor 1 was killed by signal SIGKILL; restarted it with seed 7 (restart 1 of this run)" in (
        capsys.readouterr().out
    )


class _OwingLearner(_FakeLearner):
    """Owes 1,000 gradient steps per learner step; a stop request arrives during its 3rd."""

    def __init__(self, stop):
        super().__init__(num_actors=2, synchronous=False)
        self.should_stop = lambda: False  # the loop sets it
        self.gradient_steps = 0
        self._stop = stop

    def learn(self, payloads):
        super().learn(payloads)
        for _ in range(1000):
            if self.should_stop():
                return
            self.gradient_steps += 1
            if self.gradient_steps == 3:
                self._stop.signal = signal.SIGTERM


def test_a_stop_request_reaches_a_learner_owing_gradient_steps_and_the_run_saves_and_stops(tmp_path):
    stop = main_loop.StopRequest()
    learner = _OwingLearner(stop)
    runtime = _ScriptedRuntime([_message(0, 1), _message(1, 1)])
    logger = trackers.RunLogger(
        str(tmp_path), use_tensorboard=False, results_csv_path=str(tmp_path / "r.csv")
    )
    saved = []
    with pytest.raises(errors.RunInterrupted, match="stopped in iteration 0"):
        run_distributed_training_iterations(
            num_iterations=1, num_train_steps=1000, num_eval_steps=5, learner=learner, runtime=runtime,
            eval_agent=_RandomAgent(), eval_env=None, seed=0, logger=logger,
            save_checkpoint=lambda iteration, state, interrupted=False: saved.append(interrupted) or "x.ckpt",
            loop_state=main_loop.LoopState(), show_progress=False, stop=stop,
        )  # fmt: skip
    logger.close()
    assert learner.gradient_steps == 3 and saved == [True]  # not the 997 steps still owed


def test_off_policy_learner_gets_everything_and_the_loop_reports_the_lag(tmp_path):
    runtime = _ScriptedRuntime([_message(0, 1), _message(1, 1), _message(0, 1), _message(1, 2)])
    learner = _RecordingLearner(on_policy=False)
    _, row = _run_scripted(tmp_path, learner, runtime, num_train_steps=20)
    assert learner.batches == [[(0, 1), (1, 1)], [(0, 1), (1, 2)]]
    # Second step, at version 2: lags (2 - 1) and (2 - 2): mean 0.5.
    assert float(row["learner_mean_parameter_lag"]) == 0.5


# ----------------------------------------------------------------------------------------------------
# Where the time goes: the actors' and the learner's split of a training phase, on a fake clock.


class _FakeClock:
    """Stands in for the `time` module of the code under test: wall and CPU seconds move only when
    the test says so (`spend`)."""

    def __init__(self):
        self.wall = self.cpu = 100.0

    def perf_counter(self):
        return self.wall

    def process_time(self):
        return self.cpu

    def spend(self, wall, cpu):
        self.wall += wall
        self.cpu += cpu


class _ClockedLink(ActorLinkBase):
    """An actor-side link whose waits and sends take fake time: waiting for parameters 3 s of wall
    and no CPU, a send (pickling) 0.5 s of both."""

    def __init__(self, clock):
        super().__init__(actor_index=0)
        self.clock, self.sent, self.published = clock, [], 1

    def should_stop(self):
        return False

    def _transmit(self, message):
        self.clock.spend(wall=0.5, cpu=0.5)
        self.sent.append(message)

    def _published_version(self):
        return self.published

    def _copy_parameters(self, module):
        return self.published

    def _wait_for_version_above(self, version):
        self.clock.spend(wall=3.0, cpu=0.0)


def test_an_actor_reports_its_time_waiting_sending_and_acting_since_its_previous_message(monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(runtime_interface, "time", clock)
    link = _ClockedLink(clock)
    clock.spend(wall=7.0, cpu=7.0)  # building the env and the network: before the actor's clock starts
    link.attach(nn.Linear(1, 1))
    link.wait_for_new_parameters()
    clock.spend(wall=2.0, cpu=1.5)  # acting: env steps and forwards
    link.send("unroll 1")
    clock.spend(wall=1.0, cpu=2.0)  # acting with two env threads busy
    link.send("unroll 2")
    times = [{key: m.statistics[key] for key in ACTOR_TIME_KEYS} for m in link.sent]
    assert times == [
        {"seconds_waiting": 3.0, "seconds_sending": 0.0, "seconds_acting": 2.0, "cpu_seconds_acting": 1.5},
        # unroll 1's send (0.5 s of pickling) falls in unroll 2's window, and is not acting
        {"seconds_waiting": 0.0, "seconds_sending": 0.5, "seconds_acting": 1.0, "cpu_seconds_acting": 2.0},
    ]


class _SlowLearner(_FakeLearner):
    def learn(self, payloads):
        time.sleep(0.05)  # an update of 50 ms against the actor's 4 CartPole steps of well under 1 ms
        super().learn(payloads)


@pytest.mark.slow
def test_a_synchronous_actor_waiting_for_a_slow_learner_says_so_through_a_real_pipe(tmp_path):
    learner = _SlowLearner(num_actors=1, synchronous=True)
    _run(tmp_path, learner, _make_pool(1, learner, unroll_length=4), num_iterations=2, num_train_steps=40)
    with open(tmp_path / "r.csv") as f:
        last = list(csv.DictReader(f))[-1]
    assert float(last["learner_learning_share"]) > 0.5  # the learner's turn is the long one ...
    assert float(last["learner_actor_waiting_share"]) > 0.5  # ... and the actor waits through it
    assert float(last["learner_actor_cores_while_acting"]) > 0.0


class _ClockedRuntime(_ScriptedRuntime):
    """Each message takes 1 s of the learner's wall-clock to arrive, 0.25 s of CPU to read."""

    def __init__(self, clock, messages):
        super().__init__(messages)
        self.clock = clock

    def get(self):
        self.clock.spend(wall=1.0, cpu=0.25)  # mostly waiting, a little unpickling
        return super().get()


class _ClockedLearner(_RecordingLearner):
    """Each learner step takes 2 s of wall-clock and 3 s of CPU: 1.5 cores busy."""

    def __init__(self, clock):
        super().__init__(on_policy=False)
        self.clock = clock

    def learn(self, payloads):
        self.clock.spend(wall=2.0, cpu=3.0)
        super().learn(payloads)


def test_the_loop_reports_where_a_training_phase_went_learner_and_actors(tmp_path, monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(runtime_loop, "time", clock)
    monkeypatch.setattr(runtime_interface, "time", clock)  # its TimeSpent
    actor_times = {
        "seconds_waiting": 2.0,
        "seconds_sending": 1.0,
        "seconds_acting": 5.0,
        "cpu_seconds_acting": 4.0,
    }
    messages = [
        ActorMessage(actor, 1, {"actor": actor, "version": 1, "steps": 5}, 5, [], dict(actor_times))
        for actor in (0, 1, 0, 1)
    ]
    learner = _ClockedLearner(clock)
    logged = []
    real_scalars = trackers.RunLogger.scalars
    monkeypatch.setattr(
        trackers.RunLogger,
        "scalars",
        lambda self, prefix, values, step: (
            logged.append((prefix, set(values))) or real_scalars(self, prefix, values, step)
        ),
    )
    _, row = _run_scripted(tmp_path, learner, _ClockedRuntime(clock, messages), num_train_steps=20)
    actor_keys = set().union(*(keys for prefix, keys in logged if prefix.startswith("actor_")))
    assert "parameter_version" in actor_keys and not actor_keys & set(ACTOR_TIME_KEYS)
    assert len(learner.batches) == 2
    # The phase: 4 messages of 1 s each awaited, 2 learner steps of 2 s: 8 s, half of them waiting.
    assert float(row["learner_waiting_share"]) == 0.5
    assert float(row["learner_learning_share"]) == 0.5
    assert float(row["learner_cores_while_waiting"]) == 0.25
    assert float(row["learner_cores_while_learning"]) == 1.5
    # The actors, summed over the 4 messages: 8 s waiting, 4 sending, 20 acting with 16 CPU seconds
    # (which go into these figures only: not a TensorBoard curve per actor message).
    assert float(row["learner_actor_waiting_share"]) == 0.25
    assert float(row["learner_actor_sending_share"]) == 0.125
    assert float(row["learner_actor_cores_while_acting"]) == 0.8


# ----------------------------------------------------------------------------------------------------
# Faults: actors killed at random moments (mid-send included), crash loops, a killed learner.

_ATARI_UNROLL_SHAPE = (129, 4, 84, 84)  # T + 1 = 129 stacks of 4 frames of 84 x 84 bytes: 3.6 MB


class _FloodingActor:
    """Sends an Atari-sized unroll every 4 env steps without waiting; every byte of message k is k % 251,
    so a message stitched from two actors' or two incarnations' bytes would be caught."""

    agent_name = "FAKE"

    def __init__(self, link):
        self._link = link
        self._frames = np.zeros(_ATARI_UNROLL_SHAPE, np.uint8)
        self._count = 0
        self._steps = 0

    def step(self, timestep):
        self._steps += 1
        if self._steps % 4 == 0:
            self._frames.fill(self._count % 251)
            self._link.send({"count": self._count, "frames": self._frames})
            self._count += 1
            self._link.pull_parameters()
        return 0

    def reset(self):
        pass


def _build_flooding_actor(actor_index, seed, device, link):
    return gym_env.create_classic_environment("CartPole-v1", seed=seed), _FloodingActor(link), nn.Linear(2, 1)


def _flooding_runtime(num_actors, max_actor_restarts, **options):
    return LocalActorRuntime(
        nn.Linear(2, 1),
        _build_flooding_actor,
        seeds=list(range(num_actors)),
        devices=[torch.device("cpu")] * num_actors,
        max_actor_restarts=max_actor_restarts,
        **options,
    )


def _check_intact(message):
    payload = message.payload
    assert payload["frames"].shape == _ATARI_UNROLL_SHAPE
    assert (payload["frames"] == payload["count"] % 251).all(), "a message was stitched from torn bytes"


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie is reaped by init, not by this test)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_until_the_pipe_is_full(runtime, index):
    """White-box: consume what the learner already read (credits back to the actors), then read nothing
    until actor `index`'s pipe is full, so it is blocked half-way through writing a message."""
    while runtime._ready:
        _check_intact(runtime.get())
    fd = runtime._slots[index].messages.fileno()
    capacity = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    filled = Deadline(60)
    while True:
        level = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if level >= capacity // 2:  # (a non-blocking writer stops a little short of the capacity)
            return
        assert not filled.passed(), f"the actor never filled its pipe ({level} of {capacity} bytes)"
        time.sleep(0.01)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ"), reason="Linux pipes: reads a pipe's fill level")
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc")
def test_actors_killed_at_random_moments_mid_send_included_are_replaced_and_the_run_goes_on():
    rng = np.random.default_rng(0)
    num_kills = 12
    runtime = _flooding_runtime(num_actors=2, max_actor_restarts=num_kills)
    with runtime:
        for _ in range(2):  # both actors are up and sending
            _check_intact(runtime.get())
        for kill in range(num_kills):
            victim = int(rng.integers(2))
            if kill % 2 == 0:
                # The learner stops reading until the victim's pipe is full: the victim is then blocked
                # half-way through a 3.6 MB message (the pipe holds at most 1 MiB). The kill tears it.
                _wait_until_the_pipe_is_full(runtime, victim)
            else:
                for _ in range(int(rng.integers(0, 4))):  # a random point of the stream
                    _check_intact(runtime.get())
            os.kill(runtime.processes[victim].pid, signal.SIGKILL)
            noticed = Deadline(30)
            restarts = []
            while not restarts:  # the learner notices, drops the torn tail and starts a replacement
                _check_intact(runtime.get())
                restarts = runtime.take_restarts()
                assert not noticed.passed(), "the learner did not notice the killed actor"
            assert restarts[0].how == "was killed by signal SIGKILL" and restarts[0].restart_count == kill + 1
        senders = set()
        while senders != {0, 1}:  # both slots, replaced several times, still deliver intact messages
            message = runtime.get()
            _check_intact(message)
            senders.add(message.actor_index)
        # Most kills of a sender found with a half-full pipe tear a message; one that had just written a
        # message's last bytes when the pipe reached half is not mid-message, so not every one does.
        assert runtime.torn_messages >= num_kills // 4
    assert not any(_running(pid) for pid in runtime.started_pids)
    assert len(runtime.started_pids) == 2 + num_kills


@pytest.mark.slow
def test_an_actor_that_dies_after_the_last_message_is_still_reported(capsys):
    runtime = _flooding_runtime(num_actors=2, max_actor_restarts=1)
    with runtime:
        runtime.get()
        victim = runtime.processes[1]
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(timeout=30)  # dead, and the learner asks for nothing more: the run's last moments
    out = capsys.readouterr().out
    assert "actor 1 was killed by signal SIGKILL as the run ended; not restarted" in out
    assert "actor 0" not in out
    assert len(runtime.started_pids) == 2  # nothing was restarted after the end


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc")
def test_a_hung_actor_is_killed_after_actor_timeout_and_replaced_but_a_waiting_one_is_not():
    runtime = _flooding_runtime(num_actors=2, max_actor_restarts=1, actor_timeout_s=2)
    with runtime:
        for _ in range(2):
            _check_intact(runtime.get())
        time.sleep(3)  # the learner away (evaluating) longer than the timeout: the actors wait, blocked
        for _ in range(4):
            _check_intact(runtime.get())
        assert runtime.take_restarts() == []  # waiting for the learner is a sign of life, not a hang
        hung = runtime.processes[1].pid
        os.kill(hung, signal.SIGSTOP)  # like a deadlocked emulator: alive, silent
        noticed = Deadline(30)
        restarts = []
        while not restarts:
            _check_intact(runtime.get())
            restarts = runtime.take_restarts()
            assert not noticed.passed(), "the learner did not notice the hung actor"
        assert restarts[0].actor_index == 1 and restarts[0].restart_count == 1
        assert re.fullmatch(
            r"showed no sign of life for [23] s \(--actor_timeout=2\), so it was killed", restarts[0].how
        )
        assert not _running(hung)
        senders = set()
        while senders != {0, 1}:  # the replacement delivers
            senders.add(runtime.get().actor_index)


def test_a_non_positive_actor_timeout_is_a_one_line_config_error():
    from deep_rl_zoo.ppo import train

    with pytest.raises(errors.ConfigError, match="--actor_timeout must be positive, got 0"):
        train.PpoConfig(actor_timeout=0)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc")
@pytest.mark.parametrize("hung_for_s", [3, 0])
def test_closing_with_a_hung_actor_kills_it_and_says_so(capsys, hung_for_s):
    runtime = _flooding_runtime(num_actors=2, max_actor_restarts=1)
    with runtime:
        runtime.get()
        hung = runtime.processes[1].pid
        os.kill(hung, signal.SIGSTOP)
        time.sleep(hung_for_s)
        if hung_for_s == 0:  # too recent to look hung: it is told to stop, and cannot obey
            runtime._alive_at[1] = time.monotonic()
        closing = time.monotonic()
    took = time.monotonic() - closing
    out = capsys.readouterr().out  # killed, and said so: no actor disappears unreported
    if hung_for_s > 2:  # silent for more than 2 s: killed at once, not waited for
        assert took < 2 + under_load(2), (
            f"closing took {took:.1f} s (a stopped actor ignores EOF and SIGTERM)"
        )
        how = r"showed no sign of life for \d+ s, so it was killed"
    else:
        how = "did not stop within 10 s of the stop, so it was killed"
    assert re.search(rf"actor 1 {how} as the run ended; not restarted", out)
    assert not _running(hung)
    assert "actor 0" not in out


@pytest.mark.slow
def test_a_start_that_fails_part_way_stops_the_actors_it_started(monkeypatch):
    runtime = _flooding_runtime(num_actors=2, max_actor_restarts=1)
    start = runtime._start

    def start_then_fail_the_second(index, generation):
        if index == 1:
            raise OSError("fork failed")
        start(index, generation)

    monkeypatch.setattr(runtime, "_start", start_then_fail_the_second)
    with pytest.raises(OSError, match="fork failed"):
        with runtime:
            pass
    assert len(runtime.started_pids) == 1
    assert not any(_running(pid) for pid in runtime.started_pids)


@pytest.mark.slow
def test_past_max_actor_restarts_the_run_stops_within_seconds_naming_the_actor():
    runtime = _flooding_runtime(num_actors=2, max_actor_restarts=1)
    with pytest.raises(ActorError, match=r"actor 1 was killed by signal SIGKILL; no restarts left \(1 of"):
        with runtime:
            runtime.get()
            for _ in range(2):
                os.kill(runtime.processes[1].pid, signal.SIGKILL)
                noticed = Deadline(30)
                while not runtime.take_restarts():
                    runtime.get()
                    assert not noticed.passed()
    assert not any(_running(pid) for pid in runtime.started_pids)


@pytest.mark.slow
def test_an_actor_that_keeps_failing_is_restarted_up_to_the_cap_then_the_run_stops(tmp_path, capsys):
    learner = _FakeLearner(num_actors=3, synchronous=True)
    # Actor 1 raises at its 12th env step in every incarnation: 2 restarts, then the error.
    pool = _make_pool(3, learner, unroll_length=5, failing_actor=1, fail_after=12, max_actor_restarts=2)
    with pytest.raises(ActorError, match=r"actor 1 failed: RuntimeError: boom .*2 of --max_actor_restarts=2"):
        _run(tmp_path, learner, pool, num_iterations=1000, num_train_steps=1000)
    out = capsys.readouterr().out
    assert "actor 1 failed: RuntimeError: boom in the actor; restarted it with seed 100004 (restart 1" in out
    assert "(restart 2 of this run)" in out
    _assert_all_children_gone(pool)


class _ExplodingLearner(_FakeLearner):
    def learn(self, payloads):
        super().learn(payloads)
        if self.learner_steps == 3:
            raise errors.NonFiniteLossError(3, float("nan"))


@pytest.mark.slow
def test_an_exception_in_the_learner_stops_every_actor(tmp_path):
    learner = _ExplodingLearner(num_actors=2, synchronous=False)
    pool = _make_pool(2, learner, unroll_length=3, synchronous=False)
    with pytest.raises(errors.NonFiniteLossError):
        _run(tmp_path, learner, pool, num_iterations=10, num_train_steps=100)
    _assert_all_children_gone(pool)


# ----------------------------------------------------------------------------------------------------
# The run scripts, as a user runs them: an actor killed mid-run.


def _actor_pids(learner_pid: int) -> list[int]:
    """The learner's grandchildren: actors are forked by the fork server, the learner's child."""
    return [a for child in _direct_children(learner_pid) for a in _direct_children(child)]


def _direct_children(pid: int) -> list[int]:
    result = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if _parent(int(entry)) == pid:
                    result.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return result


@pytest.mark.smoke
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process trees from /proc")
@pytest.mark.parametrize(
    ("agent", "max_actor_restarts", "flags"),
    [("ppo", 0, ["--minibatch_size=32"]), ("impala", 10, [])],
    ids=["ppo-no-restarts", "impala-restarts"],
)
def test_a_run_script_survives_a_killed_actor_or_stops_naming_it(tmp_path, agent, max_actor_restarts, flags):
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    checkpoints = tmp_path / "checkpoints"
    num_iterations = 3
    process = subprocess.Popen(
        [sys.executable, "-m", f"deep_rl_zoo.{agent}.run_classic", "--num_actors=2", "--unroll_length=16",
         f"--num_iterations={num_iterations}", "--num_train_steps=1000", "--num_eval_steps=100",
         f"--max_actor_restarts={max_actor_restarts}", f"--checkpoint_dir={checkpoints}",
         f"--runs_dir={tmp_path / 'runs'}", "--nouse_tensorboard", "--noshow_progress", "--nostop_when_solved",
         "--seed=3", *flags],
        cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        first_saved = Deadline(120)
        while not list(checkpoints.rglob("*.ckpt")):  # the first iteration is saved
            assert process.poll() is None, process.communicate()
            assert not first_saved.passed(), "no checkpoint within 120 s (stretched by the load)"
            time.sleep(0.1)
        actors = _actor_pids(process.pid)
        assert len(actors) == 2, actors
        all_pids = actors + _direct_children(process.pid)
        os.kill(actors[1], signal.SIGKILL)
        stopped = Deadline(30)
        stdout, stderr = process.communicate(timeout=under_load(120))
    finally:
        if process.poll() is None:
            process.kill()
    if max_actor_restarts == 0:
        assert not stopped.passed()
        assert process.returncode == 4, stderr
        assert re.search(r"error: actor \d was killed by signal SIGKILL; no restarts left", stderr), stderr
        assert list(checkpoints.rglob("*_0.ckpt")), "the checkpoints written before the failure are kept"
    else:
        assert process.returncode == 0, stderr
        assert re.search(
            r"actor \d was killed by signal SIGKILL; restarted it with seed \d+ \(restart 1", stdout
        )
        assert list(checkpoints.rglob(f"*_{num_iterations - 1}.ckpt")), (
            "the run did not finish its iterations"
        )
    outlived = Deadline(20)
    while any(_running(pid) for pid in all_pids):
        assert not outlived.passed(), "a process of the run outlived it"
        time.sleep(0.2)
