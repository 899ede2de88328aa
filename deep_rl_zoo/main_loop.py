"""The environment loop and the single-process train/evaluate iterations.

One iteration = `num_train_steps` env steps of training, then `num_eval_steps` env steps of greedy
evaluation on a separate environment, then one CSV row and one checkpoint:

    iteration 0                      iteration 1
    |--- train ---|-- eval --|ckpt   |--- train ---|-- eval --|ckpt   ...

The training environment keeps running across iterations (an episode may span two of them); each
evaluation phase starts fresh episodes. A distributed loop (actors + learner) sits beside this one and
reuses `run_env_loop`.
"""

import dataclasses
import math
import queue as queue_lib
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol

import gymnasium as gym
import numpy as np
import torch
import torch.multiprocessing as torch_mp
from torch import nn
from tqdm import tqdm

from deep_rl_zoo import trackers
from deep_rl_zoo.errors import ZooError
from deep_rl_zoo.types_ import Agent, TimeStep

LEARNER_LOG_INTERVAL = 1000  # env steps between two writes of the agent's statistics


def run_env_loop(env: gym.Env, agent: Agent, seed: int | None = None) -> Iterator[tuple[TimeStep, object]]:
    """Yields (timestep, action) forever, resetting the env and agent between episodes.

    The last timestep of an episode is shown to the agent too (so it can learn from it); the action it
    returns there is not used. Only the very first reset receives `seed`.
    """
    reset_seed = seed
    while True:
        agent.reset()
        observation, info = env.reset(seed=reset_seed)
        reset_seed = None
        timestep = TimeStep(observation, 0.0, False, False, True, info)
        while True:
            action = agent.step(timestep)
            yield timestep, action
            if timestep.last:
                break
            observation, reward, terminated, truncated, info = env.step(action)
            timestep = TimeStep(observation, float(reward), bool(terminated), bool(truncated), False, info)


def run_env_steps(
    num_steps: int,
    env_loop: Iterator[tuple[TimeStep, object]],
    stats: trackers.PhaseStats,
    on_step: Callable[[TimeStep, dict | None], None] | None = None,
    progress: tqdm | None = None,
) -> None:
    """Runs `env_loop` for `num_steps` env steps, recording them in `stats`."""
    if num_steps <= 0:
        return
    steps_taken = 0
    for timestep, _ in env_loop:
        if timestep.first:
            continue  # a reset, not an env step
        steps_taken += 1
        episode = stats.step(timestep)
        if on_step is not None:
            on_step(timestep, episode)
        if progress is not None:
            progress.update(1)
            if episode is not None or stats.num_steps % 500 == 0:
                progress.set_postfix(
                    steps_per_s=f"{stats.steps_per_second:.0f}",
                    last_return=f"{stats.episode_returns[-1]:.1f}" if stats.episode_returns else "-",
                    refresh=False,
                )
        if steps_taken >= num_steps:
            return


@dataclasses.dataclass
class LoopState:
    """Where a run stands between iterations; saved in every checkpoint for `--resume`."""

    next_iteration: int = 0
    train_env_steps: int = 0  # env steps of training done so far: the x-axis of every curve
    run_dir: str = ""
    solved: bool = False

    def state_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_state_dict(cls, state: dict) -> "LoopState":
        return cls(**state)


def run_single_thread_training_iterations(
    *,
    num_iterations: int,
    num_train_steps: int,
    num_eval_steps: int,
    train_agent: Agent,
    train_env: gym.Env,
    eval_agent: Agent,
    eval_env: gym.Env,
    seed: int,
    logger: trackers.RunLogger,
    save_checkpoint: Callable[[int, LoopState], str],
    loop_state: LoopState,
    solved_return: float | None = None,
    show_progress: bool = True,
) -> LoopState:
    """Trains and evaluates for the iterations left in `loop_state`; returns the final state.

    Args:
      solved_return: stop after the first iteration whose greedy evaluation mean reaches it.
    """
    # A resumed run re-seeds its environments differently, so it does not replay the same episodes.
    train_loop = run_env_loop(train_env, train_agent, seed=seed + 1000 * loop_state.next_iteration)
    train_stats, eval_stats = trackers.PhaseStats(), trackers.PhaseStats()
    train_episode_count = 0

    def on_train_step(timestep: TimeStep, episode: dict | None) -> None:
        nonlocal train_episode_count
        loop_state.train_env_steps += 1
        step = loop_state.train_env_steps
        if episode is not None:
            train_episode_count += 1
            logger.scalars("train", episode, step)
            interval = logger.debug_screenshots_interval
            if interval > 0 and train_episode_count % interval == 0:
                frame = train_env.render() if train_env.render_mode == "rgb_array" else timestep.observation
                logger.screenshot("train", frame, step, train_episode_count)
        if step % LEARNER_LOG_INTERVAL == 0:
            logger.scalars("learner", train_agent.statistics, step)

    for iteration in range(loop_state.next_iteration, num_iterations):
        train_stats.reset()
        with tqdm(
            total=num_train_steps,
            desc=f"iteration {iteration} train",
            unit="step",
            disable=not show_progress,
            leave=False,
            mininterval=1.0,
        ) as bar:
            run_env_steps(num_train_steps, train_loop, train_stats, on_train_step, bar)

        eval_summary = run_evaluation_phase(
            num_eval_steps,
            eval_env,
            eval_agent,
            seed + 7919 + iteration,
            iteration,
            show_progress,
            eval_stats,
        )
        train_summary = train_stats.summary()
        solved = finish_iteration(
            iteration=iteration,
            train_mean_return=train_summary["mean_episode_return"],
            train_num_episodes=train_summary["num_episodes"],
            train_steps_per_second=train_summary["steps_per_second"],
            eval_summary=eval_summary,
            learner_statistics=train_agent.statistics,
            logger=logger,
            save_checkpoint=save_checkpoint,
            loop_state=loop_state,
            solved_return=solved_return,
        )
        if solved:
            break
    train_loop.close()
    return loop_state


def run_evaluation_phase(
    num_eval_steps: int,
    eval_env: gym.Env,
    eval_agent: Agent,
    seed: int,
    iteration: int,
    show_progress: bool,
    eval_stats: trackers.PhaseStats,
) -> dict[str, float]:
    """Plays `num_eval_steps` greedy env steps from fresh episodes; returns the phase's summary."""
    eval_stats.reset()
    eval_loop = run_env_loop(eval_env, eval_agent, seed=seed)
    with tqdm(
        total=num_eval_steps,
        desc=f"iteration {iteration} eval",
        unit="step",
        disable=not show_progress,
        leave=False,
        mininterval=1.0,
    ) as bar:
        run_env_steps(num_eval_steps, eval_loop, eval_stats, progress=bar)
    eval_loop.close()
    eval_summary = eval_stats.summary()
    if eval_summary["num_episodes"] == 0:
        # Not one whole episode fitted in the evaluation budget: report the partial return.
        eval_summary["mean_episode_return"] = eval_stats.current_return
    return eval_summary


def finish_iteration(
    *,
    iteration: int,
    train_mean_return: float,
    train_num_episodes: int,
    train_steps_per_second: float,
    eval_summary: dict[str, float],
    learner_statistics: Mapping[str, float],
    logger: trackers.RunLogger,
    save_checkpoint: Callable[[int, "LoopState"], str],
    loop_state: "LoopState",
    solved_return: float | None,
) -> bool:
    """What ends every iteration: TensorBoard, a CSV row, a checkpoint and a console line.

    Returns whether the evaluation mean reached `solved_return` (the run then stops).
    """
    step = loop_state.train_env_steps
    logger.scalars("train", {"steps_per_second": train_steps_per_second}, step)
    logger.scalars("eval", eval_summary, step)
    logger.scalars("learner", learner_statistics, step)  # at least once per iteration, however few updates
    row = {
        "iteration": iteration,
        "train_env_steps": step,
        "train_mean_episode_return": train_mean_return,
        "train_num_episodes": train_num_episodes,
        "train_steps_per_second": round(train_steps_per_second, 1),
        "eval_mean_episode_return": eval_summary["mean_episode_return"],
        "eval_num_episodes": eval_summary["num_episodes"],
    }
    row.update({f"learner_{k}": v for k, v in learner_statistics.items()})
    logger.csv_row(row)
    logger.flush()

    loop_state.next_iteration = iteration + 1
    solved = solved_return is not None and eval_summary["mean_episode_return"] >= solved_return
    loop_state.solved = bool(solved)
    path = save_checkpoint(iteration, loop_state)
    tqdm.write(
        f"iteration {iteration}: env steps {step}, train return {_fmt(train_mean_return)}"
        f" ({train_steps_per_second:.0f} steps/s), eval return "
        f"{_fmt(eval_summary['mean_episode_return'])} over {eval_summary['num_episodes']} episodes, saved {path}"
    )
    if solved:
        tqdm.write(f"solved: evaluation mean {eval_summary['mean_episode_return']:.1f} >= {solved_return}")
    return bool(solved)


def _fmt(x: float) -> str:
    return "-" if isinstance(x, float) and math.isnan(x) else f"{x:.1f}"


def evaluate_episodes(env: gym.Env, agent: Agent, num_episodes: int, seed: int) -> list[float]:
    """Plays `num_episodes` whole episodes and returns their (raw) returns."""
    stats = trackers.PhaseStats()
    for _timestep, _ in _episodes(run_env_loop(env, agent, seed=seed), stats, num_episodes):
        pass
    return stats.episode_returns


def _episodes(env_loop, stats: trackers.PhaseStats, num_episodes: int):
    for timestep, action in env_loop:
        if not timestep.first:
            stats.step(timestep)
        yield timestep, action
        if len(stats.episode_returns) >= num_episodes:
            return


def np_rng_state(rng: np.random.Generator) -> dict:
    """A numpy Generator's state as plain data (safe for weights_only checkpoints)."""
    return rng.bit_generator.state


def set_np_rng_state(rng: np.random.Generator, state: dict) -> None:
    rng.bit_generator.state = state


# --- Distributed: actors feeding one learner ---
#
# Processes and what travels between them:
#
#     learner process                                   actor process i (one per --num_actors)
#     ---------------                                   ---------------------------------------
#     learner.learn(payloads)                           own env, own network copy, torch threads = 1
#     SharedParameters.publish(module) --(shared memory: flat tensors + version + condition)--> pull
#     ActorPool.get()            <--(bounded queue: ActorMessage(payload = unroll or gradient))-- send
#     greedy evaluation between iterations (in the learner, on its own env)
#
# Parameters never go through a pipe: the learner copies them into one flat shared-memory tensor per
# dtype and bumps a version number; an actor copies them out only when the version changed. Nothing
# spins: actors block on the queue (put) or on the condition (new parameters), the learner on the
# queue (get), each with a one-second timeout only to notice that the run is stopping or that the
# other side has died.

LEARNER_STATISTICS_INTERVAL = 100  # learner steps between two writes of the learner's statistics
MAX_LOGGED_ACTORS = 8  # actors whose own curves go to TensorBoard (actor_0/ ... actor_7/)
_WAIT_SLICE_S = 1.0  # longest a blocked process sleeps before checking whether the run stopped


class ActorError(ZooError):
    """An actor process raised an exception or died; the whole run stops."""

    exit_code = 4


class ActorMessage(NamedTuple):
    """What an actor sends to the learner."""

    actor_index: int
    payload: Any  # what the learner consumes: an unroll, a gradient, ... (numpy arrays, plain data)
    num_env_steps: int  # env steps the actor took since its previous message
    episodes: list  # [{"episode_return", "episode_length"}] of whole games finished since then
    statistics: dict  # the actor's own scalars, e.g. steps_per_second, parameter_version


class _ActorFailure(NamedTuple):
    actor_index: int
    error: str  # "ExceptionType: message"
    traceback: str


class _StopActor(Exception):
    """Raised inside an actor when the learner asked everyone to stop, or has gone away."""


def _state_tensors(module: nn.Module) -> list[torch.Tensor]:
    """Parameters and buffers (e.g. observation-normaliser statistics), in a fixed order."""
    return list(module.state_dict().values())


class SharedParameters:
    """A module's parameters and buffers in shared memory, plus a version number.

    The learner `publish`es a module after each update; actors copy the values into their own copy of
    the same architecture. Values are kept in one flat CPU tensor per dtype (one contiguous block to
    copy), guarded by a condition variable that also wakes actors waiting for a newer version.
    """

    def __init__(self, module: nn.Module, context: Any):
        tensors = _state_tensors(module)
        self._layout = [(tuple(t.shape), t.dtype) for t in tensors]
        sizes: dict[torch.dtype, int] = {}
        for tensor in tensors:
            sizes[tensor.dtype] = sizes.get(tensor.dtype, 0) + tensor.numel()
        self._flat = {dtype: torch.zeros(size, dtype=dtype).share_memory_() for dtype, size in sizes.items()}
        self._version = context.Value("q", 0, lock=False)  # writes happen under `_condition`
        self._condition = context.Condition()

    @property
    def version(self) -> int:
        return int(self._version.value)

    def _pairs(self, module: nn.Module) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        tensors = _state_tensors(module)
        if [(tuple(t.shape), t.dtype) for t in tensors] != self._layout:
            raise ValueError("the module does not have the architecture the shared parameters were made for")
        offsets = dict.fromkeys(self._flat, 0)
        for tensor in tensors:
            flat, start = self._flat[tensor.dtype], offsets[tensor.dtype]
            offsets[tensor.dtype] = start + tensor.numel()
            yield tensor, flat[start : start + tensor.numel()].view(tensor.shape)

    @torch.no_grad()
    def publish(self, module: nn.Module) -> int:
        """Copies `module`'s state into shared memory, bumps the version and wakes waiting actors."""
        with self._condition:
            for tensor, shared in self._pairs(module):
                shared.copy_(tensor)
            self._version.value += 1
            self._condition.notify_all()
            return int(self._version.value)

    @torch.no_grad()
    def copy_to(self, module: nn.Module) -> int:
        """Copies the published state into `module` (of the same architecture); returns its version."""
        with self._condition:
            for tensor, shared in self._pairs(module):
                tensor.copy_(shared)
            return int(self._version.value)

    def wait_newer_than(self, version: int, should_stop: Callable[[], bool]) -> None:
        """Blocks until the published version exceeds `version`; raises _StopActor if told to stop."""
        with self._condition:
            while self._version.value <= version:
                if should_stop():
                    raise _StopActor()
                self._condition.wait(timeout=_WAIT_SLICE_S)

    def wake_all(self) -> None:
        with self._condition:
            self._condition.notify_all()


class _Hub(NamedTuple):
    """Everything the actors share with the learner; passed to each actor process at start."""

    parameters: SharedParameters
    messages: Any  # bounded multiprocessing queue of ActorMessage / _ActorFailure
    stop: Any  # multiprocessing Event: set by the learner when the run ends, for whatever reason
    learner_alive: Any  # read end of a pipe only the learner writes to: it reads EOF once the learner died


def _learner_gone(hub: _Hub) -> bool:
    """Whether the learner process died (was killed: it could not set `stop`).

    Not `os.getppid()`: an actor's parent may be the fork server, which outlives the learner for as long
    as any actor runs. The pipe's write end lives only in the learner, so the kernel closes it when the
    learner dies, however it dies, and the read end then polls as ready (EOF).
    """
    return hub.learner_alive.poll()


class LearnerLink:
    """An actor's connection to the learner: send payloads, pick up parameters when the algorithm says.

    `env_step` is called by the actor loop for every env step, so that each message carries the env
    steps and finished games since the previous one (the learner's x-axis and actor curves).
    """

    def __init__(self, actor_index: int, hub: _Hub):
        self.actor_index = actor_index
        self._hub = hub
        self._module: nn.Module | None = None  # the actor's copy, known once the actor is built
        self._version = 0
        self._num_env_steps = 0
        self._episodes: list[dict] = []
        self._total_steps = 0
        self._start_time = time.perf_counter()

    def attach(self, module: nn.Module) -> None:
        """Sets the module that `pull_parameters` copies into."""
        self._module = module

    @property
    def parameter_version(self) -> int:
        """Version of the parameters now in the actor's module (0: none yet)."""
        return self._version

    def should_stop(self) -> bool:
        return self._hub.stop.is_set() or _learner_gone(self._hub)

    def pull_parameters(self) -> bool:
        """Copies the latest parameters if they changed since the last copy; returns whether it did."""
        if self._hub.parameters.version == self._version:
            return False
        self._version = self._hub.parameters.copy_to(self._module)
        return True

    def wait_for_new_parameters(self) -> None:
        """Blocks until the learner publishes parameters newer than the actor's, then copies them."""
        self._hub.parameters.wait_newer_than(self._version, self.should_stop)
        self.pull_parameters()

    def env_step(self, timestep: TimeStep) -> None:
        self._num_env_steps += 1
        self._total_steps += 1
        episode = timestep.info.get("episode")
        if episode is not None:
            self._episodes.append(
                {
                    "episode_return": float(np.asarray(episode["r"])),
                    "episode_length": int(np.asarray(episode["l"])),
                }
            )
        if self._total_steps % 256 == 0 and self.should_stop():
            raise _StopActor()  # an actor that rarely sends still ends promptly

    def send(self, payload: Any) -> None:
        """Puts `payload` on the learner's queue; blocks while the queue is full."""
        statistics = {
            "steps_per_second": self._total_steps / max(time.perf_counter() - self._start_time, 1e-9),
            "parameter_version": self._version,
        }
        message = ActorMessage(self.actor_index, payload, self._num_env_steps, self._episodes, statistics)
        self._num_env_steps, self._episodes = 0, []
        while True:
            if self.should_stop():
                raise _StopActor()
            try:
                self._hub.messages.put(message, timeout=_WAIT_SLICE_S)
                return
            except queue_lib.Full:
                pass


class _StepCounter:
    """Wraps an actor so the link sees each env step before the actor acts on it."""

    def __init__(self, actor: Agent, link: LearnerLink):
        self._actor, self._link = actor, link

    def step(self, timestep: TimeStep):
        if not timestep.first:
            self._link.env_step(timestep)
        return self._actor.step(timestep)

    def reset(self) -> None:
        self._actor.reset()


# build_actor(actor_index, device, link) -> (env, actor, actor_module). It runs inside the actor process,
# so it must be picklable (a module-level function or a functools.partial of one). The actor gets `link`;
# `actor_module` is the actor's copy of the learner's shared module, into which parameters are copied.
ActorBuilder = Callable[[int, torch.device, "LearnerLink"], tuple[gym.Env, Agent, nn.Module]]


def _actor_process_main(
    actor_index: int, build_actor: ActorBuilder, hub: _Hub, seed: int, device: str
) -> None:
    """Entry point of an actor process: build env and actor, then act until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle
    torch.set_num_threads(1)  # many small processes: one thread each beats oversubscribed cores
    env = None
    try:
        link = LearnerLink(actor_index, hub)
        env, actor, module = build_actor(actor_index, torch.device(device), link)
        link.attach(module)
        link.wait_for_new_parameters()
        for _ in run_env_loop(env, _StepCounter(actor, link), seed=seed):
            pass
    except _StopActor:
        pass
    except BaseException as e:  # report anything, even SystemExit, so the learner can name it
        failure = _ActorFailure(actor_index, f"{type(e).__name__}: {e}", traceback.format_exc())
        while not (hub.stop.is_set() or _learner_gone(hub)):
            try:
                hub.messages.put(failure, timeout=_WAIT_SLICE_S)
                hub.messages.close()
                hub.messages.join_thread()  # make sure the report left before this process exits
                break
            except queue_lib.Full:
                pass
        sys.exit(1)
    finally:
        if env is not None:
            env.close()
    # Exit only once every message is wholly in the pipe: a process that exits while its queue's feeder
    # thread is half-way through a message leaves the learner's next read blocked forever. The learner
    # keeps draining the queue until every actor has exited (ActorPool.close). An orphan (the learner was
    # killed) has no reader left and must not wait to flush.
    if _learner_gone(hub):
        hub.messages.cancel_join_thread()


def _actor_process_context(build_actor: ActorBuilder) -> Any:
    """How actor processes start: from a fork server where the platform has one, else spawned.

    Forking the learner itself is unsafe (torch's and CUDA's threads do not survive a fork), and a spawned
    process imports torch afresh: ~1.5 s of CPU per actor, longer than a whole CartPole update. A fork
    server is a clean single-threaded process, started once per learner, that imports torch, gymnasium
    and the actor's code before it forks each actor, so an actor starts in milliseconds and nothing
    unsafe is inherited (CUDA is only initialised inside the actor).
    """
    if "forkserver" not in torch_mp.get_all_start_methods():
        return torch_mp.get_context("spawn")
    context = torch_mp.get_context("forkserver")
    builder_module = getattr(getattr(build_actor, "func", build_actor), "__module__", None)
    preload = ["torch", "gymnasium", __name__]
    if builder_module and builder_module != "__main__":
        preload.append(builder_module)
    context.set_forkserver_preload(preload)  # applies when the server starts (the first pool only)
    return context


class ActorPool:
    """Starts the actor processes and gives the learner their messages; stops them all on exit.

    Use as a context manager: whatever ends the `with` block (the last iteration, an error, an actor's
    failure, Ctrl-C), every actor process is stopped and joined before it returns.
    """

    def __init__(
        self,
        module: nn.Module,
        build_actor: ActorBuilder,
        seeds: list[int],
        devices: list[torch.device],
        queue_size: int,
    ):
        """
        Args:
          module: the learner's module whose parameters and buffers the actors use; published now.
          build_actor: picklable `(actor_index, device, link) -> (env, actor, actor_module)`; runs in
            the actor process.
          seeds: one seed per actor (its env's first reset).
          devices: one device per actor.
          queue_size: messages that may wait for the learner before actors block.
        """
        if len(seeds) != len(devices):
            raise ValueError(f"{len(seeds)} seeds for {len(devices)} devices")
        self.num_actors = len(seeds)
        context = _actor_process_context(build_actor)
        alive_reader, self._alive_writer = context.Pipe(duplex=False)  # the writer never leaves this process
        self._hub = _Hub(
            parameters=SharedParameters(module, context),
            messages=context.Queue(maxsize=queue_size),
            stop=context.Event(),
            learner_alive=alive_reader,
        )
        self._hub.parameters.publish(module)
        self._processes = [
            context.Process(
                target=_actor_process_main,
                args=(index, build_actor, self._hub, seeds[index], str(devices[index])),
                name=f"actor_{index}",
                daemon=True,  # belt and braces: never outlive the learner
            )
            for index in range(self.num_actors)
        ]

    def __enter__(self) -> "ActorPool":
        # Children inherit an ignored SIGINT (spawned ones through exec; forked ones from the fork server,
        # which is started by the first `start` here), so a terminal's Ctrl-C (sent to the whole process
        # group) reaches only the learner, which then stops the actors in order.
        in_main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main_thread else None
        try:
            for process in self._processes:
                process.start()
        finally:
            if in_main_thread:
                signal.signal(signal.SIGINT, previous)
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def parameter_version(self) -> int:
        return self._hub.parameters.version

    def publish(self, module: nn.Module) -> int:
        return self._hub.parameters.publish(module)

    def get(self) -> ActorMessage:
        """The next actor message; raises ActorError as soon as an actor has failed or died."""
        while True:
            try:
                message = self._hub.messages.get(timeout=_WAIT_SLICE_S)
            except queue_lib.Empty:
                self._raise_if_an_actor_died()
                continue
            if isinstance(message, _ActorFailure):
                self._raise_failure(message)
            return message

    def _raise_failure(self, failure: _ActorFailure) -> None:
        print(f"actor {failure.actor_index} failed:\n{failure.traceback}", file=sys.stderr)
        raise ActorError(f"actor {failure.actor_index} failed: {failure.error}")

    def _raise_if_an_actor_died(self) -> None:
        for index, process in enumerate(self._processes):
            if process.exitcode is None:
                continue
            # Its own report may still be in the queue, behind other messages: prefer it.
            while True:
                try:
                    message = self._hub.messages.get(timeout=0.5)
                except queue_lib.Empty:
                    break
                if isinstance(message, _ActorFailure):
                    self._raise_failure(message)
            code = process.exitcode
            how = (
                f"was killed by signal {signal.Signals(-code).name}"
                if code < 0
                else f"exited with code {code}"
            )
            raise ActorError(f"actor {index} {how}")

    def close(self, timeout_s: float = 10.0) -> None:
        """Stops every actor: ask, wait up to `timeout_s`, then terminate, then kill. Idempotent."""
        self._hub.stop.set()
        self._hub.parameters.wake_all()
        deadline = time.monotonic() + timeout_s
        for process in self._processes:
            if process.pid is None:
                continue  # never started
            while process.is_alive() and time.monotonic() < deadline:
                self._drain()  # an actor blocked on a full queue, or flushing it, can then exit
                process.join(timeout=0.1)
        for process in self._processes:
            if process.pid is not None and process.is_alive():
                process.terminate()
                process.join(timeout=2.0)
            if process.pid is not None and process.is_alive():
                process.kill()
                process.join()
        # No draining after a terminate or kill: a message cut off mid-write would block the read.
        self._hub.messages.close()
        self._hub.messages.cancel_join_thread()

    def _drain(self) -> None:
        while True:
            try:
                self._hub.messages.get_nowait()
            except (queue_lib.Empty, OSError, ValueError):
                return


class DistributedLearner(Protocol):
    """What the distributed loop needs from a learner."""

    agent_name: str
    messages_per_step: int  # actor messages one learner step consumes (e.g. one unroll per actor)

    @property
    def shared_module(self) -> nn.Module:
        """The module published to the actors after every learner step."""

    def learn(self, payloads: list) -> None:
        """One learner step from `messages_per_step` payloads (in arrival order)."""

    @property
    def statistics(self) -> dict[str, float]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


def run_distributed_training_iterations(
    *,
    num_iterations: int,
    num_train_steps: int,
    num_eval_steps: int,
    learner: DistributedLearner,
    actor_pool: ActorPool,
    eval_agent: Agent,
    eval_env: gym.Env,
    seed: int,
    logger: trackers.RunLogger,
    save_checkpoint: Callable[[int, LoopState], str],
    loop_state: LoopState,
    solved_return: float | None = None,
    show_progress: bool = True,
) -> LoopState:
    """Iterations of distributed training, then greedy evaluation in the learner, then a checkpoint.

    A training phase consumes actor messages until at least `num_train_steps` env steps (summed over
    all actors) arrived; it ends on a learner step, so it can overrun by up to one learner step's worth
    of env steps. Actors keep their episodes running across iterations, as in the single-process loop.
    While the learner evaluates, actors of synchronous algorithms wait for new parameters and
    asynchronous ones fill the bounded queue and then wait: no message is ever lost or double-counted.
    """
    eval_stats = trackers.PhaseStats()
    learner_steps = 0
    for iteration in range(loop_state.next_iteration, num_iterations):
        phase_start_steps = loop_state.train_env_steps
        phase_start_time = time.perf_counter()
        train_returns: list[float] = []
        with tqdm(
            total=num_train_steps,
            desc=f"iteration {iteration} train",
            unit="step",
            disable=not show_progress,
            leave=False,
            mininterval=1.0,
        ) as bar:
            while loop_state.train_env_steps - phase_start_steps < num_train_steps:
                payloads = []
                while len(payloads) < learner.messages_per_step:
                    message = actor_pool.get()
                    payloads.append(message.payload)
                    loop_state.train_env_steps += message.num_env_steps
                    bar.update(message.num_env_steps)
                    _log_actor_message(logger, message, loop_state.train_env_steps, train_returns)
                learner.learn(payloads)
                actor_pool.publish(learner.shared_module)
                learner_steps += 1
                if learner_steps % LEARNER_STATISTICS_INTERVAL == 0:
                    logger.scalars("learner", learner.statistics, loop_state.train_env_steps)
        train_steps = loop_state.train_env_steps - phase_start_steps
        train_steps_per_second = train_steps / max(time.perf_counter() - phase_start_time, 1e-9)

        eval_summary = run_evaluation_phase(
            num_eval_steps,
            eval_env,
            eval_agent,
            seed + 7919 + iteration,
            iteration,
            show_progress,
            eval_stats,
        )
        solved = finish_iteration(
            iteration=iteration,
            train_mean_return=float(np.mean(train_returns)) if train_returns else math.nan,
            train_num_episodes=len(train_returns),
            train_steps_per_second=train_steps_per_second,
            eval_summary=eval_summary,
            learner_statistics=learner.statistics,
            logger=logger,
            save_checkpoint=save_checkpoint,
            loop_state=loop_state,
            solved_return=solved_return,
        )
        if solved:
            break
    return loop_state


def _log_actor_message(
    logger: trackers.RunLogger, message: ActorMessage, step: int, train_returns: list[float]
) -> None:
    for episode in message.episodes:
        train_returns.append(episode["episode_return"])
        logger.scalars("train", episode, step)
        if message.actor_index < MAX_LOGGED_ACTORS:
            logger.scalars(f"actor_{message.actor_index}", episode, step)
    if message.actor_index < MAX_LOGGED_ACTORS:
        logger.scalars(f"actor_{message.actor_index}", message.statistics, step)
