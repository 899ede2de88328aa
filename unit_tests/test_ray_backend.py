"""The Ray backend: a one-line error without Ray; with it, a real two-node Ray cluster on this machine
(inside a fresh network namespace with only loopback up, so no byte of the test leaves 127.0.0.1) runs
PPO with its actors pinned to the second node, survives a killed actor, and learns CartPole; the IMPALA,
NGU and Agent57 scripts run there unchanged and finish through a killed actor."""

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import types

import pytest
import torch

from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.ppo import train
from deep_rl_zoo.runtime.interface import ActorRestart

HAS_RAY = importlib.util.find_spec("ray") is not None
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ray_backend_without_ray_is_a_one_line_config_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    config = train.PpoConfig(backend="ray", checkpoint_dir=str(tmp_path / "c"), runs_dir=str(tmp_path / "r"))
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[ray\]'"):
        train.main(config)
    assert not os.path.exists(tmp_path / "r")  # refused before any work


class _RayStandIn:
    """The few calls of Ray's API that RayActorRuntime's start makes, with actor 1's process dying while
    Ray creates it: the first start call fails as Ray's does then ("the actor is restarting"), and the
    next reaches the restarted process."""

    class exceptions:
        class RayActorError(Exception):
            pass

        class ActorUnavailableError(RayActorError):
            pass

        class RayTaskError(Exception):
            pass

        class GetTimeoutError(Exception):
            pass

    def __init__(self):
        self.start_calls = {0: 0, 1: 0}

    def is_initialized(self):
        return True

    def put(self, value):
        return value

    def remote(self, body):
        class Handle:
            def __init__(self, index):
                self.index = index
                self.start = types.SimpleNamespace(remote=lambda *args: ("start", self.index))
                self.next_message = types.SimpleNamespace(remote=lambda: ("next", self.index, object()))

        class Options:
            def options(self, **options):
                return types.SimpleNamespace(remote=lambda build, index, *args: Handle(index))

        return Options()

    def get(self, ref, timeout=None):
        _, index = ref
        self.start_calls[index] += 1
        if index == 1 and self.start_calls[index] == 1:
            raise self.exceptions.ActorUnavailableError("The actor is restarting")
        return ("node", 100 + index, index == 1)  # actor 1's answer comes from a reconstructed process


def test_an_actor_whose_process_dies_while_ray_creates_it_is_started_again_and_counted(monkeypatch):
    """Ray fails a call that reaches an actor while it restarts a process that died in creation; the
    runtime calls start again rather than ending the run, and counts the restart once."""
    from deep_rl_zoo.runtime import ray_backend

    stand_in = _RayStandIn()
    monkeypatch.setattr(ray_backend, "import_ray", lambda: stand_in)
    monkeypatch.setattr(ray_backend, "WAIT_SLICE_S", 0.01)
    runtime = ray_backend.RayActorRuntime(
        torch.nn.Linear(2, 2), build_actor=None, seeds=[7, 8], max_actor_restarts=3
    )
    runtime.__enter__()
    assert stand_in.start_calls == {0: 1, 1: 2}
    assert runtime._restarts == [ActorRestart(1, "died while starting (Ray restarted its process)", 1, 8)]
    assert runtime.locations == [("node", 100), ("node", 101)]


def test_unknown_backend_or_ray_flags_without_ray_backend_are_config_errors():
    with pytest.raises(ConfigError, match="--backend must be local or ray"):
        train.PpoConfig(backend="slurm")
    with pytest.raises(ConfigError, match="only with --backend=ray"):
        train.PpoConfig(ray_address="auto")


def _namespace_available() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    result = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True)
    return result.returncode == 0


# The driver: runs inside the namespace, after the two nodes started. It captures the runtime to learn
# where the actors run and to kill one of them mid-run.
_DRIVER = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    import ray
    from deep_rl_zoo import distributed
    from deep_rl_zoo.ppo import train

    address, checkpoint_dir, runs_dir, result_path = sys.argv[1:5]
    runtimes = []
    make_runtime = distributed.make_runtime
    distributed.make_runtime = lambda *a, **k: runtimes.append(make_runtime(*a, **k)) or runtimes[-1]

    def kill_an_actor():  # once the run is learning: SIGKILL actor 1's process
        while not runtimes or runtimes[0].parameter_version < 5:
            time.sleep(0.05)
        os.kill(runtimes[0].locations[1][1], signal.SIGKILL)

    threading.Thread(target=kill_an_actor, daemon=True).start()
    config = train.PpoConfig(
        backend="ray", ray_address=address, ray_actor_resource="actor_node", num_actors=4,
        num_iterations=10, num_train_steps=10_000, num_eval_steps=5_000,  # the local learning test's budget
        stop_when_solved=True, checkpoint_dir=checkpoint_dir, runs_dir=runs_dir, show_progress=False,
    )
    state = train.main(config)
    actor_nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "actor_node" in n["Resources"]]
    json.dump({"solved": state.solved, "steps": state.train_env_steps, "actor_nodes": actor_nodes,
               "locations": runtimes[0].locations}, open(result_path, "w"))
    """
)


def _run_on_a_two_node_cluster(tmp_path, driver: str, env: dict | None = None) -> str:
    """Starts a head node and a second node offering the custom resource `actor_node`, inside a fresh
    network namespace with only loopback up, runs the bash `driver` (which sees $ADDRESS) there, checks
    that every TCP socket of the namespace was on loopback, and stops every process of the namespace.
    Returns the output; fails the test if the driver failed."""
    ray = shutil.which("ray", path=os.path.dirname(sys.executable)) or "ray"
    port = 6390
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    script = (
        textwrap.dedent(
            f"""
        set -e
        ip link set lo up
        # Token auth off: a ~/.ray/auth_token left by any earlier local Ray run made the nodes demand a token
        # the driver did not send (InvalidAuthToken). Loopback inside a private namespace needs none.
        export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled PYTHONPATH={REPO_ROOT} ADDRESS=127.0.0.1:{port}
        {ray} start --head --port={port} --node-ip-address=127.0.0.1 --num-cpus=1 \\
            --include-dashboard=false --disable-usage-stats --temp-dir={ray_dir} > {tmp_path}/head.log 2>&1
        {ray} start --address=127.0.0.1:{port} --node-ip-address=127.0.0.1 --num-cpus=4 \\
            --resources='{{"actor_node": 4}}' --disable-usage-stats > {tmp_path}/worker.log 2>&1
        """
        )
        + textwrap.dedent(driver)
        + textwrap.dedent(
            f"""
        # Every TCP socket of the namespace (the nodes, the driver, the actors): loopback only.
        cat /proc/net/tcp /proc/net/tcp6 > {tmp_path}/sockets
        """
        )
    )
    process = subprocess.Popen(
        ["unshare", "-n", "bash", "-c", script],
        env={**os.environ, **(env or {})},
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    namespace = None
    try:
        deadline = time.monotonic() + 30
        while namespace is None and time.monotonic() < deadline:
            try:
                namespace = os.readlink(f"/proc/{process.pid}/ns/net")
            except FileNotFoundError:
                break
            if namespace == os.readlink("/proc/self/ns/net"):
                namespace = None  # unshare has not switched yet
                time.sleep(0.01)
        output, _ = process.communicate(timeout=900)
    finally:
        if process.poll() is None:
            process.kill()
        _kill_everything_in(namespace)  # the Ray nodes daemonise: stop exactly the ones of this namespace
        shutil.rmtree(ray_dir, ignore_errors=True)
    logs = "".join(
        p.read_text()[-2000:] for p in (tmp_path / "head.log", tmp_path / "worker.log") if p.exists()
    )
    assert process.returncode == 0, output[-5000:] + logs
    for line in (tmp_path / "sockets").read_text().splitlines():
        fields = line.split()
        if fields[0].endswith(":"):  # an entry: local and remote address are fields 1 and 2 (hex)
            for address in fields[1:3]:
                assert address.split(":")[0] in _LOOPBACK_OR_ANY, line
    return output


_NEEDS_RAY = pytest.mark.skipif(not HAS_RAY, reason="Ray is an optional extra: pip install -e '.[ray]'")
_NEEDS_NAMESPACE = pytest.mark.skipif(
    not _namespace_available(), reason="needs unshare -n (a private network namespace)"
)


@pytest.mark.learning
@_NEEDS_RAY
@_NEEDS_NAMESPACE
def test_two_node_ray_cluster_pins_actors_survives_a_killed_actor_and_learns_cartpole(tmp_path):
    import json

    result_path = tmp_path / "result.json"
    driver = f"""
        {sys.executable} -c "$DRIVER" $ADDRESS {tmp_path}/checkpoints {tmp_path}/runs {result_path}
        """
    output = _run_on_a_two_node_cluster(tmp_path, driver, {"DRIVER": _DRIVER})
    result = json.loads(result_path.read_text())
    assert result["solved"], f"PPO on Ray did not reach 475 within 100k env steps ({result['steps']})"
    assert len(result["locations"]) == 4 + 1, "the killed actor was not restarted exactly once"
    assert {node for node, _ in result["locations"]} == set(result["actor_nodes"]), (
        "actors ran off the pinned node"
    )
    assert output.count("restarted it with seed") == 1, output[-3000:]


@pytest.mark.smoke
@_NEEDS_RAY
@_NEEDS_NAMESPACE
@pytest.mark.parametrize(
    ("package", "agent_name", "flags"),
    [
        ("impala", "IMPALA", "--unroll_length=16"),
        # NGU's actors keep per-actor state the learner checkpoints (episodic memory, distance mean):
        # the same script runs on Ray with no special case, a killed actor restarting with fresh memory
        ("ngu", "NGU", "--min_replay_size=200 --burn_in=5 --trace_length=4 --replay_period=5 --batch_size=8"),
        # and Agent57's actors their bandit's window of episode returns
        (
            "agent57",
            "Agent57",
            "--min_replay_size=200 --burn_in=5 --trace_length=4 --replay_period=5 --batch_size=8",
        ),
    ],
)
def test_script_on_ray_survives_a_killed_ray_actor(tmp_path, package, agent_name, flags):
    checkpoints = tmp_path / "checkpoints"
    driver = f"""
        {sys.executable} -m deep_rl_zoo.{package}.run_classic --backend=ray --ray_address=$ADDRESS \\
            --ray_actor_resource=actor_node --num_actors=2 {flags} --num_iterations=4 \\
            --num_train_steps=1000 --num_eval_steps=100 --checkpoint_dir={checkpoints} \\
            --runs_dir={tmp_path}/runs --nouse_tensorboard --noshow_progress --nostop_when_solved \\
            --noactors_on_gpu &
        run=$!
        until ls {checkpoints}/*/*_0.ckpt > /dev/null 2>&1; do kill -0 $run; sleep 0.05; done
        # The driver is paused while an actor is killed, so the kill lands mid-run however fast the CPU
        # (a run of 3 more iterations can otherwise end first); it may still end before the restart.
        kill -STOP $run
        namespace=$(readlink /proc/self/ns/net)
        for pid in $(pgrep -f '^ray::_ActorBody' || true); do  # a Ray actor of this run (this namespace)
            if [ "$(readlink /proc/$pid/ns/net)" = "$namespace" ]; then kill -9 $pid; break; fi
        done
        kill -CONT $run
        wait $run
        """
    output = _run_on_a_two_node_cluster(tmp_path, driver)
    # Either restarted mid-run, or (the death noticed only at the end) reported as the run ended.
    assert re.search(r"actor \d .*(restarted it with seed|as the run ended; not restarted)", output), output[
        -3000:
    ]
    assert list(checkpoints.rglob(f"{agent_name}_*_3.ckpt")), "the run did not finish its 4 iterations"


# /proc/net/tcp{,6} hex: 127.0.0.1, 0.0.0.0 (listening), ::1, ::, and ::ffff:127.0.0.1 (IPv4-mapped).
_LOOPBACK_OR_ANY = (
    "0100007F",
    "00000000",
    "00000000000000000000000001000000",
    "0" * 32,
    "0000000000000000FFFF00000100007F",
)


def _kill_everything_in(namespace: str | None) -> None:
    if namespace is None:
        return
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if os.readlink(f"/proc/{entry}/ns/net") == namespace:
                    os.kill(int(entry), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass


@pytest.mark.smoke
@_NEEDS_RAY
@_NEEDS_NAMESPACE
def test_script_on_ray_replaces_a_hung_ray_actor(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    driver = f"""
        {sys.executable} -m deep_rl_zoo.impala.run_classic --backend=ray --ray_address=$ADDRESS \\
            --ray_actor_resource=actor_node --num_actors=2 --unroll_length=16 --num_iterations=1000 \\
            --num_train_steps=1000 --num_eval_steps=100 --checkpoint_dir={checkpoints} --actor_timeout=5 \\
            --runs_dir={tmp_path}/runs --nouse_tensorboard --noshow_progress --nostop_when_solved \\
            --noactors_on_gpu > {tmp_path}/run.log 2>&1 &
        run=$!
        until ls {checkpoints}/*/*_0.ckpt > /dev/null 2>&1; do kill -0 $run; sleep 0.05; done
        namespace=$(readlink /proc/self/ns/net)
        for pid in $(pgrep -f '^ray::_ActorBody' || true); do  # a Ray actor of this run (this namespace)
            if [ "$(readlink /proc/$pid/ns/net)" = "$namespace" ]; then kill -STOP $pid; break; fi
        done
        until grep -q "restarted it with seed" {tmp_path}/run.log; do kill -0 $run; sleep 0.2; done
        kill -TERM $run
        wait $run || true
        cat {tmp_path}/run.log
        """
    output = _run_on_a_two_node_cluster(tmp_path, driver)
    hung = r"actor \d showed no sign of life for \d+ s \(--actor_timeout=5\), so it was killed; restarted"
    assert len(re.findall(hung, output)) == 1, output[-3000:]  # the stopped one, and no other


# An actor whose first process dies before the driver has started it: Ray restarts it by itself and the
# driver's start() reaches the new process, so no call of the driver fails. The death must still be said.
_DIES_BEFORE_START = textwrap.dedent(
    """
    import os, signal, sys
    import ray
    from deep_rl_zoo.ppo import train
    from deep_rl_zoo.runtime import ray_backend

    class DiesOnceWhileCreated(ray_backend._ActorBody):
        def __init__(self, build_actor, actor_index, *args):
            super().__init__(build_actor, actor_index, *args)
            if actor_index == 1 and not ray.get_runtime_context().was_current_actor_reconstructed:
                os.kill(os.getpid(), signal.SIGKILL)

    ray_backend._ActorBody = DiesOnceWhileCreated
    address, checkpoint_dir, runs_dir = sys.argv[1:4]
    train.main(train.PpoConfig(
        backend="ray", ray_address=address, ray_actor_resource="actor_node", num_actors=2,
        num_iterations=1, num_train_steps=2_000, num_eval_steps=100, stop_when_solved=False,
        checkpoint_dir=checkpoint_dir, runs_dir=runs_dir, show_progress=False, use_tensorboard=False,
    ))
    """
)


@pytest.mark.smoke
@_NEEDS_RAY
@_NEEDS_NAMESPACE
def test_an_actor_that_dies_before_it_is_started_is_reported_and_counted(tmp_path):
    driver = f"""
        {sys.executable} -c "$DRIVER" $ADDRESS {tmp_path}/checkpoints {tmp_path}/runs
        """
    output = _run_on_a_two_node_cluster(tmp_path, driver, {"DRIVER": _DIES_BEFORE_START})
    restarts = re.findall(
        r"actor (\d) died while starting \(Ray restarted its process\); restarted it", output
    )
    assert restarts == ["1"], output[-3000:]
