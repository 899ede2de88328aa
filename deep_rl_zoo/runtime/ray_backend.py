"""The Ray backend: actors are Ray actors placed anywhere in a Ray cluster; the learner stays in the
driver process. It implements the same `ActorRuntime` as the local backend, so agents do not change.

    driver (learner)                                          Ray actor i (any node)
    ----------------                                          ----------------------
    publish: ray.put(state) once, then set_parameters(v, ref) ->  kept; the acting thread copies it in
    get: ray.wait over one pending next_message() per actor  <-   an outbox of at most 2 messages
    a call that fails with RayActorError: Ray restarts the actor (max_restarts); the driver counts the
    restart against --max_actor_restarts and calls start(new seed) on the new incarnation

The acting loop (`interface.run_actor`) runs in a thread of the Ray actor, so that the driver's calls
(`set_parameters`, `next_message`, `stop`) are served while it acts (a threaded actor). Every wait on
either side is at most `WAIT_SLICE_S`; when the driver dies, Ray removes the actors it owns.
"""

import contextlib
import os
import queue
import signal
import sys
import threading
import time
import traceback
import warnings
from typing import Any

import torch
from torch import nn

from deep_rl_zoo.errors import ActorError, ConfigError
from deep_rl_zoo.runtime.interface import (
    DEFAULT_ACTOR_TIMEOUT_S,
    RESTART_SEED_STRIDE,
    WAIT_SLICE_S,
    ActorBuilder,
    ActorLinkBase,
    ActorMessage,
    ActorRestart,
    StopActor,
    report_death_at_close,
    run_actor,
)

_START_TIMEOUT_S = 120  # Ray may need to start a worker process (and import torch) first
_CLOSE_CHECK_S = 2 * WAIT_SLICE_S  # a live actor answers next_message within WAIT_SLICE_S
INSTALL_HINT = "--backend=ray needs Ray, an optional extra: pip install -e '.[ray]'"


def import_ray() -> Any:
    """The `ray` module, or a ConfigError saying in one line how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


class _ActorBody:
    """What runs inside each Ray actor (wrapped by `ray.remote` in `RayActorRuntime`)."""

    def __init__(
        self,
        build_actor: ActorBuilder,
        actor_index: int,
        device: str,
        max_in_flight: int,
        actor_timeout_s: float = DEFAULT_ACTOR_TIMEOUT_S,
    ):
        self._build_actor = build_actor
        self._actor_timeout_s = actor_timeout_s
        self.alive_at = time.monotonic()  # the acting thread's last sign of life (_RayLink.alive)
        self._actor_index = actor_index
        self._device = device
        self.outbox: queue.Queue = queue.Queue(maxsize=max_in_flight)
        self.condition = threading.Condition()
        self.parameters: tuple[int, dict | None] = (0, None)
        self.stopped = False
        self._failure: tuple[str, str] | None = None
        self._started = False

    def start(self, seed: int, version: int, state: dict) -> tuple[str, int, bool]:
        """Starts acting with `seed` from the given parameters; returns (node id, process id, whether Ray
        has restarted this actor's process since it was created)."""
        import ray

        if self._started:  # a call that reached an incarnation the driver has just killed
            raise RuntimeError("this actor incarnation is already acting")
        self._started = True
        self.alive_at = time.monotonic()
        self.set_parameters(version, state)
        context = ray.get_runtime_context()
        # Ray 2.60's own `was_current_actor_reconstructed` reads its deprecated `actor_id` and warns (three
        # lines per actor start on the driver's console); the warning is Ray's business, not the user's.
        # Read before the acting thread starts: catch_warnings changes the process's filters.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            reconstructed = context.was_current_actor_reconstructed
        link = _RayLink(self._actor_index, self)
        threading.Thread(target=self._act, args=(seed, link), daemon=True).start()
        return context.get_node_id(), os.getpid(), reconstructed

    def _act(self, seed: int, link: "_RayLink") -> None:
        try:
            run_actor(self._build_actor, self._actor_index, seed, self._device, link)
        except BaseException as e:  # reported by the next next_message call
            self._failure = (f"{type(e).__name__}: {e}", traceback.format_exc())

    def set_parameters(self, version: int, state: dict) -> None:
        with self.condition:
            if version > self.parameters[0]:
                self.parameters = (version, state)
                self.condition.notify_all()

    def next_message(self) -> ActorMessage | tuple | None:
        """The next message (None after WAIT_SLICE_S without one); ("failed", error, traceback) once the
        acting thread raised; ("restarted",) from an incarnation never started: Ray replaced a process
        that died between two calls, which no call saw fail; ("hung", seconds) once the acting thread
        showed no sign of life for the actor timeout (e.g. deadlocked in its emulator)."""
        if not self._started:
            return ("restarted",)
        if (silent_s := time.monotonic() - self.alive_at) > self._actor_timeout_s:
            return ("hung", silent_s)
        try:
            return self.outbox.get(timeout=WAIT_SLICE_S)
        except queue.Empty:
            return ("failed", *self._failure) if self._failure is not None else None

    def stop(self) -> None:
        with self.condition:
            self.stopped = True
            self.condition.notify_all()


class _RayLink(ActorLinkBase):
    """The actor-side LearnerLink of the Ray backend (inside the Ray actor's process)."""

    def __init__(self, actor_index: int, body: _ActorBody):
        super().__init__(actor_index)
        self._body = body

    def should_stop(self) -> bool:
        return self._body.stopped

    def alive(self) -> None:
        self._body.alive_at = time.monotonic()

    def _transmit(self, message: ActorMessage) -> None:
        while True:
            self.alive()  # waiting for the learner to take a message is a sign of life
            if self._body.stopped:
                raise StopActor()
            try:
                self._body.outbox.put(message, timeout=WAIT_SLICE_S)
                return
            except queue.Full:
                pass

    def _published_version(self) -> int:
        return self._body.parameters[0]

    @torch.no_grad()
    def _copy_parameters(self, module: nn.Module) -> int:
        version, state = self._body.parameters
        for tensor, value in zip(module.state_dict().values(), state.values(), strict=True):
            tensor.copy_(value)  # in place: numpy mirrors and traced graphs read the same memory
        return version

    def _wait_for_version_above(self, version: int) -> None:
        with self._body.condition:
            while self._body.parameters[0] <= version:
                self.alive()
                if self._body.stopped:
                    raise StopActor()
                self._body.condition.wait(WAIT_SLICE_S)


@contextlib.contextmanager
def _sigterm_blocked_in_started_processes():
    """Blocks SIGTERM in this thread while Ray starts its local processes, which inherit the mask.

    A local Ray instance (GCS, raylet, monitors, the workers that host the actors) is made of this
    process's children, in its process group: the SIGTERM that `timeout`, systemd or a batch scheduler
    sends to a job's group reaches them too, and some of them (the monitors, the dashboard agent) die of
    it at once; under load a run lost an object that way and ended with an error instead of saving. Ray
    already blocks SIGINT in the processes it starts, so that a terminal's Ctrl-C reaches only the driver;
    this does the same for SIGTERM. The learner alone answers the signal: it saves, then stops the actors;
    Ray's processes end with the driver (ray.shutdown kills them; they die with it besides). Joining a
    running cluster starts no process, and the mask is restored before anything else runs here.
    """
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks, no process groups to signal
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class RayActorRuntime:
    """`ActorRuntime` whose actors are Ray actors (see the module docstring)."""

    def __init__(
        self,
        module: nn.Module,
        build_actor: ActorBuilder,
        seeds: list[int],
        max_actor_restarts: int = 10,
        address: str = "",
        actors_on_gpu: bool = False,
        actor_resource: str = "",
        max_in_flight: int = 2,
        actor_timeout_s: float = DEFAULT_ACTOR_TIMEOUT_S,
    ):
        """
        Args:
          module: the learner's module whose parameters and buffers the actors use; published on enter.
          build_actor: picklable `(actor_index, seed, device, link) -> (env, actor, actor_module)`.
          seeds: one seed per slot; its k-th replacement gets seed + k * RESTART_SEED_STRIDE.
          max_actor_restarts: restarts allowed over the whole run (and Ray's max_restarts per actor).
          address: "" starts a local Ray instance; "auto" or "host:port" joins a running cluster.
          actors_on_gpu: ask Ray for a fraction of a GPU per actor (the cluster's GPUs shared evenly).
          actor_resource: a custom resource each actor needs one unit of ("" for none): pins the actors
            to the nodes started with it.
          actor_timeout_s: an actor whose acting thread shows no sign of life for this long, or whose
            process does not answer for this long (stopped, a stuck node), is killed and replaced.
        """
        self._ray = import_ray()
        self.num_actors = len(seeds)
        self._module = module
        self._build_actor = build_actor
        self._seeds = list(seeds)
        self._max_actor_restarts = max_actor_restarts
        self._address = address
        self._actors_on_gpu = actors_on_gpu
        self._actor_resource = actor_resource
        self._max_in_flight = max_in_flight
        self._actor_timeout_s = actor_timeout_s
        self._asked_at = [0.0] * self.num_actors  # when each slot's pending next_message was sent
        self._version = 0
        self._state_ref = None
        self._actors: list[Any] = []
        self._pending: dict[Any, int] = {}  # next_message ref -> slot
        self._generations = [0] * self.num_actors
        self._restarts: list[ActorRestart] = []
        self._restart_count = 0
        self.locations: list[tuple[str, int]] = []  # (node id, pid) of every actor incarnation started
        self._closed = False

    def __enter__(self) -> "RayActorRuntime":
        ray = self._ray
        if not ray.is_initialized():
            with _sigterm_blocked_in_started_processes():
                ray.init(
                    address=self._address or None,
                    include_dashboard=False,
                    configure_logging=False,
                    log_to_driver=True,
                )
        num_gpus = 0.0
        if self._actors_on_gpu:
            cluster_gpus = ray.cluster_resources().get("GPU", 0)
            if cluster_gpus == 0:
                print(
                    "--actors_on_gpu: the Ray cluster has no GPU, so every actor runs on a CPU",
                    file=sys.stderr,
                )
            num_gpus = min(1.0, cluster_gpus / self.num_actors)
        options = dict(
            max_restarts=self._max_actor_restarts,
            max_task_retries=0,
            max_concurrency=4,  # acting runs in its own thread; driver calls are served meanwhile
            num_cpus=1,
            num_gpus=num_gpus,
        )
        if self._actor_resource:
            options["resources"] = {self._actor_resource: 1}
        remote_body = ray.remote(_ActorBody).options(**options)
        device = "cuda" if num_gpus > 0 else "cpu"
        self._publish_state(self._module)
        self._actors = [
            remote_body.remote(self._build_actor, index, device, self._max_in_flight, self._actor_timeout_s)
            for index in range(self.num_actors)
        ]
        for index in range(self.num_actors):
            # A process that dies while Ray creates it fails this first call ("the actor is restarting"):
            # the retry reaches its new incarnation, which _start counts as a restart.
            self._start_retrying(index, "died while starting")
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _start_retrying(self, index: int, how: str) -> None:
        """Starts the actor in slot `index`, calling again while Ray restarts its process (calls fail
        until the new process is up)."""
        for attempt in range(60):
            try:
                self._start(index)
                return
            except (self._ray.exceptions.RayActorError, self._ray.exceptions.RayTaskError):
                if attempt == 59:
                    raise ActorError(f"actor {index} {how}; Ray could not restart it") from None
                time.sleep(WAIT_SLICE_S)

    def _start(self, index: int) -> None:
        seed = self._seeds[index] + RESTART_SEED_STRIDE * self._generations[index]
        actor = self._actors[index]
        started = actor.start.remote(seed, self._version, self._state_ref)
        try:
            node, pid, reconstructed = self._ray.get(started, timeout=_START_TIMEOUT_S)
        except self._ray.exceptions.GetTimeoutError:
            raise ActorError(
                f"actor {index} did not start within {_START_TIMEOUT_S} s (is the cluster full?)"
            ) from None
        self.locations.append((node, pid))
        if reconstructed and self._generations[index] == 0:
            # Its first process died before it was started (no call of the driver saw it fail), and Ray
            # started another, which this start reached: a restart all the same, counted and reported.
            self._record_restart(index, "died while starting (Ray restarted its process)", seed)
        self._ask(index)

    def _ask(self, index: int) -> None:
        self._pending[self._actors[index].next_message.remote()] = index
        self._asked_at[index] = time.monotonic()

    def _publish_state(self, module: nn.Module) -> None:
        state = {name: tensor.detach().cpu().clone() for name, tensor in module.state_dict().items()}
        self._state_ref = self._ray.put(state)  # once in the object store, whatever the number of actors
        self._version += 1

    @property
    def parameter_version(self) -> int:
        return self._version

    def publish(self, module: nn.Module) -> int:
        self._publish_state(module)
        for actor in self._actors:
            actor.set_parameters.remote(self._version, self._state_ref)  # the ref: fetched once per node
        return self._version

    def get(self) -> ActorMessage:
        ray = self._ray
        while True:
            self._replace_unanswering()  # first: the other actors' messages must not hide a hung one
            ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=WAIT_SLICE_S)
            for ref in ready:
                index = self._pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayActorError as e:
                    # Unavailable: Ray cannot reach a process that may still live (stopped, a stuck node),
                    # and will not restart it unless it is killed. Otherwise Ray is restarting it already.
                    unavailable = type(e).__name__ == "ActorUnavailableError"
                    self._replace(index, f"died ({type(e).__name__})", kill=unavailable)
                    continue
                how = self._death(index, result)
                if how is not None:
                    self._replace(index, how, kill=not how.startswith("died"))
                    continue
                self._ask(index)
                if result is not None:
                    return result

    def _replace_unanswering(self) -> None:
        """Replaces the actors that have not answered next_message (which answers within WAIT_SLICE_S)
        for the actor timeout: a stopped process, a stuck node."""
        overdue = [
            ref for ref, index in self._pending.items() if self._silent_s(index) > self._actor_timeout_s
        ]
        if not overdue:
            return
        # An answer that came while the driver was busy elsewhere (evaluating, restarting another actor)
        # is not a hang: only calls still unanswered now are.
        _, unanswered = self._ray.wait(overdue, num_returns=len(overdue), timeout=0)
        for ref in unanswered:
            index = self._pending.pop(ref)
            self._replace(index, self._hung(self._silent_s(index)), kill=True)

    def _silent_s(self, index: int) -> float:
        return time.monotonic() - self._asked_at[index]

    def _hung(self, silent_s: float) -> str:
        return f"showed no sign of life for {silent_s:.0f} s (--actor_timeout={self._actor_timeout_s:g}), so it was killed"

    def _death(self, index: int, result: Any) -> str | None:
        """How the actor in slot `index` ended, if `result` (of its next_message) says it did."""
        if isinstance(result, tuple) and result and result[0] == "failed":
            print(f"actor {index} failed:\n{result[2]}", file=sys.stderr)
            return f"failed: {result[1]}"
        if isinstance(result, tuple) and result == ("restarted",):
            return "died (Ray restarted its process)"
        if isinstance(result, tuple) and result and result[0] == "hung":
            return self._hung(result[1])
        return None

    def _replace(self, index: int, how: str, kill: bool) -> None:
        if self._restart_count >= self._max_actor_restarts:
            raise ActorError(
                f"actor {index} {how}; no restarts left ({self._restart_count} of "
                f"--max_actor_restarts={self._max_actor_restarts} used)"
            )
        if kill:  # its acting thread failed: let Ray restart the whole actor process
            self._ray.kill(self._actors[index], no_restart=False)
        self._generations[index] += 1
        self._start_retrying(index, how)
        self._record_restart(index, how, self._seeds[index] + RESTART_SEED_STRIDE * self._generations[index])

    def _record_restart(self, index: int, how: str, seed: int) -> None:
        """Counts a replaced actor against the run's restarts and queues its console report."""
        self._restart_count += 1
        self._restarts.append(ActorRestart(index, how, self._restart_count, seed))

    def _report_deaths_at_close(self) -> None:
        """Says which actors died after the learner's last message (too late to be replaced).

        Every live actor answers its pending next_message within WAIT_SLICE_S; one that died answers
        with RayActorError, or ("restarted",) from its new incarnation, or not at all while Ray restarts
        it (starting a process and importing torch take longer than this wait).
        """
        ray = self._ray
        pending = dict(self._pending)
        if not pending:
            return
        ready, not_ready = ray.wait(list(pending), num_returns=len(pending), timeout=_CLOSE_CHECK_S)
        for ref in ready:
            try:
                how = self._death(pending[ref], ray.get(ref))
            except ray.exceptions.RayActorError as e:
                how = f"died ({type(e).__name__})"
            except Exception as e:  # whatever else Ray raises: still a report, not a crash in close
                how = f"could not be reached ({type(e).__name__})"
            if how is not None:
                report_death_at_close(pending[ref], how)
        for ref in not_ready:
            report_death_at_close(
                pending[ref], f"did not answer within {_CLOSE_CHECK_S:.0f} s (died and restarting, or hung)"
            )

    def take_restarts(self) -> list[ActorRestart]:
        restarts, self._restarts = self._restarts, []
        return restarts

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._report_deaths_at_close()
        for actor in self._actors:
            try:
                actor.stop.remote()
            except Exception:
                pass
        for actor in self._actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:
                pass
        self._actors = []
        self._pending = {}
