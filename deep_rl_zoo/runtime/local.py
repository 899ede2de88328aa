"""The local backend: one process per actor on this machine, restarted in its slot when it dies.

What travels between the learner and actor i, and why nothing can block forever:

    learner process                                          actor process i
    ---------------                                          ---------------
    SharedParameters.publish  --(shared memory, seqlock)-->  copy_to (no lock: retries a torn copy)
    one byte, non-blocking    --(wake pipe i)------------->  select() with a timeout; EOF = stop
    read non-blocking, frame  <--(message pipe i)---------  length-prefixed pickles, non-blocking
    `consumed[i]` += 1        --(shared counter)---------->  sends while sent - consumed < in-flight cap

Each actor has its own pipes, so an actor killed half-way through a message tears only its own
channel: the learner reads every channel without blocking, assembles frames itself, and drops the torn
tail when that actor's process ends. No lock is shared with an actor: parameters are a seqlock (the
learner makes the sequence number odd while it writes; an actor retries a copy during which it
changed), so neither side can die holding something the other needs. (The old transport used a
`multiprocessing.Condition`, whose `notify` waits for every sleeper to acknowledge: an actor killed
while waiting for parameters hung the learner for good, and a learner killed inside `notify` left the
actors waiting for its lock.) The learner holds the only write end of every wake pipe, so an actor
reads EOF there once the learner stops (it closes them) or dies (the kernel closes them).
"""

import collections
import os
import pickle
import select
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing import connection as mp_connection
from typing import Any, NamedTuple

import torch
import torch.multiprocessing as torch_mp
from torch import nn

from deep_rl_zoo.errors import ActorError
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

_HEADER = struct.Struct("<Q")  # a frame is its length (8 bytes) then a pickle
_PIPE_BYTES = 1 << 20  # asked-for capacity of each message pipe (Linux caps unprivileged requests at 1 MiB)
_READ_CHUNK = 1 << 20
# The module the actors' fork server imports first, which makes it and every actor ignore Ctrl-C and SIGTERM.
STOP_SIGNALS_IGNORED = "deep_rl_zoo.runtime.stop_signals_ignored"


def _state_tensors(module: nn.Module) -> list[torch.Tensor]:
    """Parameters and buffers (e.g. observation-normaliser statistics), in a fixed order."""
    return list(module.state_dict().values())


class SharedParameters:
    """A module's parameters and buffers in shared memory, plus a version number; no lock.

    One flat CPU tensor per dtype. Only the learner writes. A sequence number makes it a seqlock:
    odd while the learner copies in, even (2 x version) when stable; a reader copies out and keeps the
    copy only if the sequence number was the same even value before and after.
    """

    def __init__(self, module: nn.Module, context: Any):
        tensors = _state_tensors(module)
        self._layout = [(tuple(t.shape), t.dtype) for t in tensors]
        sizes: dict[torch.dtype, int] = {}
        for tensor in tensors:
            sizes[tensor.dtype] = sizes.get(tensor.dtype, 0) + tensor.numel()
        self._flat = {dtype: torch.zeros(size, dtype=dtype).share_memory_() for dtype, size in sizes.items()}
        self._sequence = context.RawValue("q", 0)

    @property
    def version(self) -> int:
        return int(self._sequence.value) // 2

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
        """Copies `module`'s state into shared memory and bumps the version (learner only)."""
        pairs = list(self._pairs(module))  # raises before the sequence number turns odd
        self._sequence.value += 1
        for tensor, shared in pairs:
            shared.copy_(tensor)
        self._sequence.value += 1
        return self.version

    @torch.no_grad()
    def copy_to(self, module: nn.Module, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Copies the published state into `module`; returns its version. Raises StopActor if told to
        stop while the learner is (or was, when it died) half-way through a publish."""
        pairs = list(self._pairs(module))
        while True:
            before = int(self._sequence.value)
            if before % 2 == 0:
                for tensor, shared in pairs:
                    tensor.copy_(shared)
                if int(self._sequence.value) == before:
                    return before // 2
            if should_stop():
                raise StopActor()
            time.sleep(0.001)  # a publish takes well under a millisecond for the networks here


class _ActorFailure(NamedTuple):
    actor_index: int
    error: str  # "ExceptionType: message"
    traceback: str


class _ActorChannels(NamedTuple):
    """What an actor process gets at start: its ends of its own pipes, and the shared state."""

    parameters: SharedParameters
    messages: Any  # write end of this actor's message pipe (a multiprocessing Connection)
    wake: Any  # read end of this actor's wake pipe
    consumed: Any  # shared int64 array: messages of each slot's current actor the learner has consumed
    max_in_flight: int
    alive_at: Any  # shared float64 array: each slot's actor's last sign of life (time.monotonic, s)


class _ProcessLink(ActorLinkBase):
    """The actor-side LearnerLink of the local backend."""

    def __init__(self, actor_index: int, channels: _ActorChannels):
        super().__init__(actor_index)
        self._channels = channels
        self._out = channels.messages.fileno()
        self._wake = channels.wake.fileno()
        os.set_blocking(self._out, False)
        self._sent = 0
        self._stopped = False

    def alive(self) -> None:
        self._channels.alive_at[self.actor_index] = time.monotonic()  # one clock for every process

    def _poll(self, timeout: float, writable: bool = False) -> bool:
        """Sleeps until woken, the message pipe is writable (if asked) or `timeout`; raises StopActor
        when the wake pipe reads EOF (the learner stopped the run or died). Returns whether writable."""
        self.alive()  # a wait that wakes up every WAIT_SLICE_S is a sign of life too
        readable, ready_to_write, _ = select.select(
            [self._wake], [self._out] if writable else [], [], timeout
        )
        if readable and not os.read(self._wake, 4096):
            self._stopped = True
        if self._stopped:
            raise StopActor()
        return bool(ready_to_write)

    def should_stop(self) -> bool:
        try:
            self._poll(0.0)
        except StopActor:
            return True
        return False

    def _published_version(self) -> int:
        return self._channels.parameters.version

    def _copy_parameters(self, module: nn.Module) -> int:
        return self._channels.parameters.copy_to(module, self.should_stop)

    def _wait_for_version_above(self, version: int) -> None:
        while self._channels.parameters.version <= version:
            self._poll(WAIT_SLICE_S)

    def _transmit(self, message: ActorMessage) -> None:
        while self._sent - self._channels.consumed[self.actor_index] >= self._channels.max_in_flight:
            self._poll(WAIT_SLICE_S)  # the learner wakes this actor when it consumes a message
        self._write_frame(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
        self._sent += 1

    def _write_frame(self, data: bytes) -> None:
        for part in (_HEADER.pack(len(data)), data):
            view = memoryview(part)
            while view:
                try:
                    view = view[os.write(self._out, view) :]
                except BlockingIOError:
                    self._poll(WAIT_SLICE_S, writable=True)
                except BrokenPipeError:
                    raise StopActor() from None  # the learner is gone

    def report_failure(self, failure: _ActorFailure) -> None:
        """Best effort: the learner names the error if this arrives, the exit code otherwise."""
        try:
            self._write_frame(pickle.dumps(failure))
        except (StopActor, OSError):
            pass


def _actor_process_main(
    build_actor: ActorBuilder, actor_index: int, seed: int, device: str, channels: _ActorChannels
) -> None:
    """Entry point of an actor process."""
    # Ctrl-C and SIGTERM are the learner's to handle: importing the module ignores them (it says why). A
    # forked actor has it imported from the fork server already; a spawned one (no fork server on this
    # platform) imports it here. Only here: imported at the top of this file it would deafen the learner.
    from deep_rl_zoo.runtime import stop_signals_ignored  # noqa: F401

    link = _ProcessLink(actor_index, channels)
    try:
        run_actor(build_actor, actor_index, seed, device, link)
    except BaseException as e:  # report anything, even SystemExit, so the learner can name it
        link.report_failure(_ActorFailure(actor_index, f"{type(e).__name__}: {e}", traceback.format_exc()))
        sys.exit(1)


def _actor_process_context(build_actor: ActorBuilder) -> Any:
    """How actor processes start: from a fork server where the platform has one, else spawned.

    Forking the learner itself is unsafe (torch's and CUDA's threads do not survive a fork), and a spawned
    process imports torch afresh: ~1.5 s of CPU per actor, longer than a whole CartPole update. A fork
    server is a clean single-threaded process, started once per learner, that imports torch, gymnasium
    and the actor's code before it forks each actor, so an actor (or its replacement) starts in
    milliseconds and nothing unsafe is inherited (CUDA is only initialised inside the actor).
    """
    if "forkserver" not in torch_mp.get_all_start_methods():
        return torch_mp.get_context("spawn")
    context = torch_mp.get_context("forkserver")
    builder_module = getattr(getattr(build_actor, "func", build_actor), "__module__", None)
    preload = [STOP_SIGNALS_IGNORED, "torch", "gymnasium", __name__]  # in this order
    if builder_module and builder_module != "__main__":
        preload.append(builder_module)
    context.set_forkserver_preload(preload)  # applies when the server starts (the first runtime only)
    return context


class _FrameReader:
    """Reassembles length-prefixed frames from the chunks a non-blocking read returns."""

    def __init__(self):
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        frames = []
        while len(self._buffer) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(self._buffer)
            end = _HEADER.size + length
            if len(self._buffer) < end:
                break
            frames.append(bytes(self._buffer[_HEADER.size : end]))
            del self._buffer[:end]
        return frames

    @property
    def torn_bytes(self) -> int:
        """Bytes of an incomplete frame (left behind by a writer that died half-way through)."""
        return len(self._buffer)


class _Slot:
    """One actor slot: the process now in it and the learner's ends of its pipes."""

    def __init__(self, process: Any, messages: Any, wake: Any, generation: int):
        self.process = process
        self.messages = messages  # read end, non-blocking
        self.wake = wake  # write end, non-blocking
        self.generation = generation  # how many actors this slot has had before this one
        self.reader = _FrameReader()
        self.failure: _ActorFailure | None = None
        self.eof = False
        self.silent_s: float | None = None  # set when the learner killed it for showing no sign of life


class LocalActorRuntime:
    """`ActorRuntime` with one process per actor on this machine (see the module docstring)."""

    def __init__(
        self,
        module: nn.Module,
        build_actor: ActorBuilder,
        seeds: list[int],
        devices: list[torch.device],
        max_actor_restarts: int = 10,
        max_in_flight: int = 2,
        actor_timeout_s: float = DEFAULT_ACTOR_TIMEOUT_S,
    ):
        """
        Args:
          module: the learner's module whose parameters and buffers the actors use; published now.
          build_actor: picklable `(actor_index, seed, device, link) -> (env, actor, actor_module)`; runs
            in the actor process.
          seeds: one seed per slot, for its first actor; its k-th replacement gets
            seed + k * RESTART_SEED_STRIDE.
          devices: one device per slot.
          max_actor_restarts: replacements of dead actors allowed over the whole run; the next death
            raises ActorError.
          max_in_flight: messages an actor may have sent that the learner has not consumed yet.
          actor_timeout_s: an actor with no sign of life (env step, wake-up in a wait) for this long is
            hung (stopped, deadlocked in its emulator): killed, then replaced like a dead one.
        """
        if len(seeds) != len(devices):
            raise ValueError(f"{len(seeds)} seeds for {len(devices)} devices")
        if max_actor_restarts < 0:
            raise ValueError(f"max_actor_restarts must be >= 0, got {max_actor_restarts}")
        self.num_actors = len(seeds)
        self._build_actor = build_actor
        self._seeds = list(seeds)
        self._devices = [str(d) for d in devices]
        self._max_actor_restarts = max_actor_restarts
        self._max_in_flight = max_in_flight
        if actor_timeout_s <= 0:
            raise ValueError(f"actor_timeout_s must be > 0, got {actor_timeout_s}")
        self._actor_timeout_s = actor_timeout_s
        self._context = _actor_process_context(build_actor)
        self._parameters = SharedParameters(module, self._context)
        self._parameters.publish(module)
        self._consumed = self._context.RawArray("q", self.num_actors)
        self._alive_at = self._context.RawArray("d", self.num_actors)
        self._slots: list[_Slot | None] = [None] * self.num_actors
        self._ready: collections.deque[tuple[int, int, ActorMessage]] = collections.deque()
        self._restarts: list[ActorRestart] = []
        self._restart_count = 0
        self._closed = False
        self.started_pids: list[int] = []  # every actor process ever started (tests, diagnostics)
        self.torn_messages = 0  # messages cut off by their actor's death, dropped (tests, diagnostics)

    # --- starting actors ---

    def _start(self, index: int, generation: int) -> None:
        messages_read, messages_write = self._context.Pipe(duplex=False)
        wake_read, wake_write = self._context.Pipe(duplex=False)
        try:
            import fcntl

            fcntl.fcntl(messages_read.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        except (ImportError, AttributeError, OSError):
            pass  # not Linux, or over the system's limit: the default capacity works, a little slower
        os.set_blocking(messages_read.fileno(), False)
        os.set_blocking(wake_write.fileno(), False)
        self._consumed[index] = 0
        channels = _ActorChannels(
            self._parameters, messages_write, wake_read, self._consumed, self._max_in_flight, self._alive_at
        )
        seed = self._seeds[index] + RESTART_SEED_STRIDE * generation
        process = self._context.Process(
            target=_actor_process_main,
            args=(self._build_actor, index, seed, self._devices[index], channels),
            name=f"actor_{index}",
            daemon=True,  # belt and braces: never outlive the learner
        )
        try:
            process.start()
        finally:
            # The actor's ends now live only in the actor: EOF then means exactly that it is gone.
            messages_write.close()
            wake_read.close()
        # Stamped once started: the first start waits for the fork server's imports (seconds), which
        # are not the actor's; building the actor does count against its timeout.
        self._alive_at[index] = time.monotonic()
        self.started_pids.append(process.pid)
        self._slots[index] = _Slot(process, messages_read, wake_write, generation)

    def __enter__(self) -> "LocalActorRuntime":
        try:
            for index in range(self.num_actors):
                self._start(index, generation=0)
        except BaseException:  # `with` calls no __exit__ for a failed __enter__: stop the ones started
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def processes(self) -> list[Any]:
        """The actor processes now in the slots (for tests and diagnostics)."""
        return [slot.process for slot in self._slots if slot is not None]

    # --- parameters ---

    @property
    def parameter_version(self) -> int:
        return self._parameters.version

    def publish(self, module: nn.Module) -> int:
        version = self._parameters.publish(module)
        for slot in self._slots:
            if slot is not None:
                self._wake(slot)
        return version

    @staticmethod
    def _wake(slot: _Slot) -> None:
        try:
            os.write(slot.wake.fileno(), b"\1")
        except (BlockingIOError, BrokenPipeError, OSError, ValueError):
            pass  # full: it has wake-ups to read already; broken or closed: it is gone

    # --- messages ---

    def get(self) -> ActorMessage:
        while True:
            if self._ready:
                index, generation, message = self._ready.popleft()
                slot = self._slots[index]
                if slot is not None and slot.generation == generation:
                    self._consumed[index] += 1  # a credit back to the actor that sent it
                    self._wake(slot)
                return message
            self._pump(WAIT_SLICE_S)

    def take_restarts(self) -> list[ActorRestart]:
        restarts, self._restarts = self._restarts, []
        return restarts

    def _pump(self, timeout: float) -> None:
        """Waits up to `timeout` for data or a death, then reads every ready channel without blocking."""
        waitables = [slot.process.sentinel for slot in self._slots]
        waitables += [slot.messages.fileno() for slot in self._slots if not slot.eof]
        ready = set(mp_connection.wait(waitables, timeout))
        for index, slot in enumerate(self._slots):
            if slot.messages.fileno() in ready:
                self._read(index)
        for index, slot in enumerate(self._slots):
            if slot.process.sentinel in ready:
                self._replace(index)
            elif (silent_s := time.monotonic() - self._alive_at[index]) > self._actor_timeout_s:
                slot.silent_s = silent_s
                slot.process.kill()  # SIGKILL: obeyed even by a stopped (SIGSTOP) or deadlocked process
                self._replace(index)

    def _read(self, index: int) -> None:
        slot = self._slots[index]
        while not slot.eof:
            try:
                chunk = os.read(slot.messages.fileno(), _READ_CHUNK)
            except BlockingIOError:
                return
            if not chunk:
                slot.eof = True
                return
            for frame in slot.reader.feed(chunk):
                item = pickle.loads(frame)
                if isinstance(item, _ActorFailure):
                    slot.failure = item
                else:
                    self._ready.append((index, slot.generation, item))

    def _replace(self, index: int) -> None:
        """The actor in slot `index` has exited: keep what it sent whole, then start its replacement
        or, with no restarts left, stop the run naming it."""
        slot = self._slots[index]
        how = self._how_it_ended(index)
        slot.messages.close()
        slot.wake.close()
        if self._restart_count >= self._max_actor_restarts:
            raise ActorError(
                f"actor {index} {how}; no restarts left ({self._restart_count} of "
                f"--max_actor_restarts={self._max_actor_restarts} used)"
            )
        self._restart_count += 1
        generation = slot.generation + 1
        self._start(index, generation)
        self._restarts.append(
            ActorRestart(
                index, how, self._restart_count, self._seeds[index] + RESTART_SEED_STRIDE * generation
            )
        )

    def _how_it_ended(self, index: int) -> str:
        """How the exited actor in slot `index` ended ("was killed by signal SIGKILL", "failed: ..."),
        after keeping the messages it finished before dying (good data; a torn tail is dropped)."""
        slot = self._slots[index]
        slot.process.join(timeout=WAIT_SLICE_S)
        self._read(index)
        self.torn_messages += int(slot.reader.torn_bytes > 0)
        if slot.silent_s is not None:
            return (
                f"showed no sign of life for {slot.silent_s:.0f} s (--actor_timeout="
                f"{self._actor_timeout_s:g}), so it was killed"
            )
        if slot.failure is not None:
            print(f"actor {index} failed:\n{slot.failure.traceback}", file=sys.stderr)
            return f"failed: {slot.failure.error}"
        code = slot.process.exitcode
        if code is not None and code < 0:
            return f"was killed by signal {signal.Signals(-code).name}"
        return f"exited with code {code}"

    # --- stopping ---

    def close(self, timeout_s: float = 10.0) -> None:
        """Stops every actor: EOF on its wake pipe, up to `timeout_s` to exit, then terminate, then kill.

        An actor silent for over 2 x WAIT_SLICE_S (stopped, hung: one that acts or waits shows a sign
        of life at least every WAIT_SLICE_S) is killed at once: it would not read the EOF, and a
        stopped process does not even act on SIGTERM, so a Ctrl-C would wait `timeout_s` + 2 s for it.
        """
        if self._closed:
            return
        self._closed = True
        reported = set()  # every actor that ends other than by obeying the stop is said so, once
        for index, slot in enumerate(self._slots):
            # An actor that died after the learner's last `get` was never replaced: still say so.
            if slot is not None and slot.process.exitcode is not None:
                report_death_at_close(index, self._how_it_ended(index))
                reported.add(index)
        started = [(index, slot) for index, slot in enumerate(self._slots) if slot is not None]
        for index, slot in started:  # (a slot is None when a start failed part-way)
            slot.wake.close()  # the actors read EOF: stop
            silent_s = time.monotonic() - self._alive_at[index]
            if silent_s > 2 * WAIT_SLICE_S and slot.process.exitcode is None:
                slot.process.kill()
                report_death_at_close(index, f"showed no sign of life for {silent_s:.0f} s, so it was killed")
                reported.add(index)
        deadline = time.monotonic() + timeout_s
        for _, slot in started:
            slot.process.join(timeout=max(0.0, deadline - time.monotonic()))
        for index, slot in started:
            if slot.process.is_alive():  # stopped or hung only moments ago, or deaf to the EOF
                slot.process.terminate()
                slot.process.join(timeout=2.0)
                if slot.process.is_alive():
                    slot.process.kill()
                    slot.process.join()
                how = f"did not stop within {timeout_s:g} s of the stop, so it was killed"
            else:  # it died while the others were told to stop (a signal), or failed on its way out
                how = self._how_it_ended(index) if slot.process.exitcode != 0 else None
            if how is not None and index not in reported:
                report_death_at_close(index, how)
            slot.messages.close()
