"""What the distributed loop, the agents and a runtime backend agree on.

A *runtime* runs the actors somewhere (processes on this machine, Ray actors on a cluster) and gives
the learner their messages; the learner never learns which one runs it:

    learner process (the loop)                         actor i (somewhere)
    --------------------------                         -------------------
    runtime.get() -> ActorMessage         <-- send --   link.send(payload)
    learner.learn(payloads)
    runtime.publish(module)               -- params ->  link.pull_parameters() / wait_for_new_parameters()
    runtime.take_restarts() -> [ActorRestart]          (a dead actor is replaced in its slot)

Agents see only `LearnerLink` (actor side) and implement `DistributedLearner` (learner side). A backend
implements `ActorRuntime` and gives its actors a `LearnerLink`, usually by subclassing `ActorLinkBase`,
which keeps the per-message bookkeeping (env steps, finished games, statistics) in one place, and by
running `run_actor` as the body of each actor.
"""

import abc
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import gymnasium as gym
import torch
from torch import nn
from tqdm import tqdm

from deep_rl_zoo import trackers
from deep_rl_zoo.main_loop import run_env_loop, run_vector_env_loop
from deep_rl_zoo.types_ import Agent, TimeStep

WAIT_SLICE_S = 1.0  # longest any blocked call sleeps before it checks that the other side is still there
# --actor_timeout's default: an actor that shows no sign of life (no env step, no wake-up of a wait) for
# this long is taken for hung and replaced. Building an Atari actor and its first steps take seconds
# (CUDA's start in an actor on a GPU tens of seconds); 5 minutes leaves room for a machine many times
# slower and costs a week-long run at most 5 minutes of one actor per hang.
DEFAULT_ACTOR_TIMEOUT_S = 300.0
RESTART_SEED_STRIDE = 100_003  # a restarted actor's seed: slot seed + stride * (restarts of that slot)


class ActorMessage(NamedTuple):
    """What an actor sends to the learner."""

    actor_index: int  # the actor's slot (a restarted actor keeps its slot's index)
    parameter_version: int  # version of the parameters the actor held when it sent this
    payload: Any  # what the learner consumes: an unroll, a gradient, ... (numpy arrays, plain data)
    num_env_steps: int  # env steps the actor took since its previous message
    episodes: list  # [{"episode_return", "episode_length"}] of whole games finished since then
    statistics: dict  # the actor's own scalars, e.g. steps_per_second (`ActorLinkBase.send`)


class ActorRestart(NamedTuple):
    """A dead actor that the runtime replaced."""

    actor_index: int
    how: str  # how it ended: "was killed by signal SIGKILL", "failed: RuntimeError: ..."
    restart_count: int  # restarts of the whole run so far, this one included
    seed: int  # the new actor's seed


def report_death_at_close(actor_index: int, how: str) -> None:
    """Says on the console that an actor died after the learner's last message, too late to be replaced
    (a run's last moments, or a stop): the same words as a restart, so no death goes unreported."""
    tqdm.write(f"actor {actor_index} {how} as the run ended; not restarted")


class StopActor(Exception):
    """Raised inside an actor when the learner asked everyone to stop, or has gone away."""


class LearnerLink(Protocol):
    """An actor's connection to the learner, as agents' actors use it."""

    actor_index: int

    @property
    def parameter_version(self) -> int:
        """Version of the parameters now in the actor's module (0: none yet)."""

    def send(self, payload: Any, statistics: dict | None = None) -> None:
        """Sends `payload` to the learner (blocks while the learner is `max_in_flight` messages behind).

        `statistics`: the actor's own scalars (e.g. its epsilon), logged under `actor_<i>/` with the link's.
        """

    def pull_parameters(self) -> bool:
        """Copies the newest parameters into the actor's module if they changed; returns whether."""

    def wait_for_new_parameters(self) -> None:
        """Blocks until parameters newer than the actor's are published, then copies them."""


# build_actor(actor_index, seed, device, link) -> (env, actor, actor_module). It runs where the actor
# runs, so it must be picklable (a module-level function or a functools.partial of one). `actor_module`
# is the actor's copy of the learner's shared module, into which published parameters are copied.
ActorBuilder = Callable[[int, int, torch.device, LearnerLink], tuple[gym.Env, Agent, nn.Module]]


class DistributedLearner(Protocol):
    """What the distributed loop needs from a learner."""

    agent_name: str
    messages_per_step: int  # actor messages one learner step consumes (e.g. one unroll per actor)
    # True for synchronous algorithms (PPO, A2C): the loop gives `learn` only messages collected with
    # the parameters published last (after an actor restart, a replaced actor's data may be older).
    on_policy: bool

    @property
    def shared_module(self) -> nn.Module:
        """The module published to the actors after every learner step."""

    def learn(self, payloads: list) -> None:
        """One learner step from `messages_per_step` payloads (in arrival order).

        A learner whose step can take many gradient steps (a replay ratio's credit: R2D2, NGU, SAC) has a
        `should_stop: Callable[[], bool]` attribute, which the loop sets to its stop request; `learn`
        then returns after the gradient step in progress, the rest owed kept in its state."""

    @property
    def statistics(self) -> dict[str, float]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class ActorRuntime(Protocol):
    """Runs `num_actors` actors and connects them to the learner; implemented by each backend.

    Use as a context manager: entering starts the actors, leaving (for whatever reason: the last
    iteration, an error, Ctrl-C) stops every one of them and leaves no process behind. Every call
    returns or raises within bounded time whatever the actors do (die, hang, get killed mid-message).
    """

    num_actors: int

    def __enter__(self) -> "ActorRuntime": ...

    def __exit__(self, *exc_info) -> None: ...

    @property
    def parameter_version(self) -> int:
        """How many times parameters were published (the first publish, at construction, is 1)."""

    def publish(self, module: nn.Module) -> int:
        """Makes `module`'s parameters and buffers the actors' newest; returns the new version."""

    def get(self) -> ActorMessage:
        """The next actor message, blocking until one arrives.

        A dead actor is replaced in its slot meanwhile (see `take_restarts`), and so is a hung one: no
        sign of life (`ActorLinkBase.alive`) for `actor_timeout_s`; it is killed first. Once the run's
        `max_actor_restarts` are used up, the next death raises `errors.ActorError` naming the actor.
        """

    def take_restarts(self) -> list[ActorRestart]:
        """Restarts since the previous call (for the console and TensorBoard)."""

    def close(self) -> None:
        """Stops every actor (ask, wait, then kill). Idempotent. An actor found dead that was never
        replaced (it died after the learner's last `get`) is reported first (`report_death_at_close`)."""


class ActorLinkBase(abc.ABC):
    """The backend-independent part of a `LearnerLink`: message bookkeeping and parameter versions.

    A backend supplies how a message travels (`_transmit`), where parameters are read from
    (`_published_version`, `_copy_parameters`), how to sleep until something changes (`_wait`) and
    whether the run is stopping (`should_stop`). `env_step` is called by `run_actor` for every env step
    (`record_game` for a first timestep), so that each message carries the env steps and finished games
    since the previous one.
    """

    def __init__(self, actor_index: int):
        self.actor_index = actor_index
        self._module: nn.Module | None = None  # the actor's copy, known once the actor is built
        self._version = 0
        self._num_env_steps = 0
        self._episodes: list[dict] = []
        self._total_steps = 0
        self._start_time = time.perf_counter()
        self._times = _ActorTimes()

    # --- what a backend provides ---

    def alive(self) -> None:  # noqa: B027 - optional: a no-op for links that no runtime watches
        """Tells the runtime this actor is making progress (an env step, a wake-up while it waits): one
        silent for --actor_timeout is hung. Backends that watch for hung actors override this."""

    @abc.abstractmethod
    def should_stop(self) -> bool:
        """Whether the learner asked the actors to stop or has gone away."""

    @abc.abstractmethod
    def _transmit(self, message: ActorMessage) -> None:
        """Delivers `message`; raises StopActor if the run stops meanwhile."""

    @abc.abstractmethod
    def _published_version(self) -> int: ...

    @abc.abstractmethod
    def _copy_parameters(self, module: nn.Module) -> int:
        """Copies the published parameters into `module`; returns their version."""

    @abc.abstractmethod
    def _wait_for_version_above(self, version: int) -> None:
        """Blocks until the published version exceeds `version`; raises StopActor if the run stops."""

    # --- the LearnerLink protocol ---

    def attach(self, module: nn.Module) -> None:
        """Sets the module that `pull_parameters` copies into; the actor is built, its time split starts."""
        self._module = module
        self._times = _ActorTimes()

    @property
    def parameter_version(self) -> int:
        return self._version

    def pull_parameters(self) -> bool:
        if self._published_version() == self._version:
            return False
        self._version = self._copy_parameters(self._module)
        return True

    def wait_for_new_parameters(self) -> None:
        with self._times.waiting:
            self._wait_for_version_above(self._version)
            self.pull_parameters()

    def send(self, payload: Any, statistics: dict | None = None) -> None:
        statistics = {
            **(statistics or {}),
            "steps_per_second": self._total_steps / max(time.perf_counter() - self._start_time, 1e-9),
            **self._times.take(),
        }
        message = ActorMessage(
            self.actor_index, self._version, payload, self._num_env_steps, self._episodes, statistics
        )
        self._num_env_steps, self._episodes = 0, []
        with self._times.sending:
            self._transmit(message)

    def env_step(self, timestep: TimeStep) -> None:
        self.alive()
        self._num_env_steps += 1
        self._total_steps += 1
        self.record_game(timestep)
        if self._total_steps % 256 == 0 and self.should_stop():
            raise StopActor()  # an actor that rarely sends still ends promptly

    def record_game(self, timestep: TimeStep) -> None:
        """Keeps the game `timestep` reports as ended (`trackers.finished_game`), if any, for the next
        message; called for every env step, and for a `first` timestep (a game that ended on a step no
        agent took: `vector_env`)."""
        game = trackers.finished_game(timestep)
        if game is None:
            return
        self._episodes.append(game)
        if "terminal_frame" in timestep.info:  # --debug_screenshots_interval (gym_env.TerminalFrames)
            game["terminal_frame"] = timestep.info["terminal_frame"]
            game["terminal_frame_episode"] = timestep.info["terminal_frame_episode"]


class TimeSpent:
    """Wall-clock and CPU seconds (this process's, all its threads) spent inside `with` blocks of it."""

    def __init__(self):
        self.wall = self.cpu = 0.0

    def __enter__(self) -> "TimeSpent":
        self._entered = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc_info) -> None:
        self.wall += time.perf_counter() - self._entered[0]
        self.cpu += time.process_time() - self._entered[1]


class _ActorTimes:
    """Where an actor's wall-clock went since its previous message: waiting for new parameters (in
    `wait_for_new_parameters`, a synchronous actor's wait and copy; an asynchronous actor's copies in
    `pull_parameters` count as acting), handing its previous message over (`_transmit`: with the local
    backend pickling it and, if the learner lags, waiting for room; with Ray a put on a queue that Ray's
    own threads drain), or acting (the env steps and forward passes in between), with the process's CPU
    seconds while acting (all its threads: the env's C++ threads, and Ray's where Ray runs it). `take`
    returns them, as ACTOR_TIME_KEYS, and starts the next window; `runtime.loop.PhaseTimes` sums them
    over a training phase."""

    def __init__(self):
        self._start_window()

    def _start_window(self) -> None:
        self._start = time.perf_counter(), time.process_time()
        self.waiting, self.sending = TimeSpent(), TimeSpent()

    def take(self) -> dict[str, float]:
        wall, cpu = time.perf_counter() - self._start[0], time.process_time() - self._start[1]
        times = {
            "seconds_waiting": self.waiting.wall,
            "seconds_sending": self.sending.wall,
            "seconds_acting": wall - self.waiting.wall - self.sending.wall,
            "cpu_seconds_acting": cpu - self.waiting.cpu - self.sending.cpu,
        }
        self._start_window()
        return times


ACTOR_TIME_KEYS = ("seconds_waiting", "seconds_sending", "seconds_acting", "cpu_seconds_acting")


class _StepCounter:
    """Wraps an actor so the link sees each env step before the actor acts on it."""

    def __init__(self, actor: Agent, link: ActorLinkBase):
        self._actor, self._link = actor, link

    def step(self, timestep: TimeStep):
        self._count(timestep)
        return self._actor.step(timestep)

    def step_batch(self, timesteps: list[TimeStep]):
        for timestep in timesteps:
            self._count(timestep)
        return self._actor.step_batch(timesteps)

    def _count(self, timestep: TimeStep) -> None:
        if timestep.first:  # a reset, not an env step; it may still report a game (vector_env)
            self._link.record_game(timestep)
        else:
            self._link.env_step(timestep)

    def reset(self) -> None:
        self._actor.reset()


def run_actor(
    build_actor: ActorBuilder, actor_index: int, seed: int, device: str, link: ActorLinkBase
) -> None:
    """The body of every actor, whatever runs it: build env and actor, wait for parameters, act until
    told to stop (StopActor is swallowed; any other exception propagates to the backend)."""
    torch.set_num_threads(1)  # many small processes: one thread each beats oversubscribed cores
    env = None
    try:
        env, actor, module = build_actor(actor_index, seed, torch.device(device), link)
        link.attach(module)
        link.wait_for_new_parameters()
        env_loop = run_vector_env_loop if getattr(env, "num_envs", 1) > 1 else run_env_loop
        for _ in env_loop(env, _StepCounter(actor, link), seed=seed):
            pass
    except StopActor:
        pass
    finally:
        if env is not None:
            env.close()
