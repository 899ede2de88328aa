"""Experience replay: n-step transitions, a uniform replay of preallocated numpy arrays, and a
frame store that keeps each Atari frame once.

How an Atari agent puts the three together (one env, frames added in time order):

    handle = store.add(timestep.observation[-1], timestep.first)   # newest frame of the stack
    for transition in accumulator.step(timestep, handle, action):  # int handles as states
        replay.add(transition)
    ...
    batch = replay.sample(batch_size)
    s_tm1, s_t = store.stacks(batch.s_tm1), store.stacks(batch.s_t)  # uint8 [B, stack, H, W]

with `store = FrameStackStore(frame_store_capacity(replay_capacity, n_step), (84, 84), 4)`.
Vector-observation agents skip the store and pass the observation array itself.
"""

import math
from collections import deque
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np
import torch

from deep_rl_zoo.types_ import TimeStep


class Transition(NamedTuple):
    """One (n-step) transition. Loss target: `r_t + discount_t * bootstrap(s_t)`.

    `r_t` is the discounted reward sum over the window, `discount_t` the product of the discounts
    over it: `gamma**k` for a window of k steps, 0.0 when a true termination was reached inside it.
    """

    s_tm1: Any  # observation array, or an int frame handle of a FrameStackStore
    a_tm1: Any  # action taken in s_tm1
    r_t: Any  # np.float32 scalar: r_{t-k+1} + gamma * r_{t-k+2} + ... + gamma**(k-1) * r_t
    discount_t: Any  # np.float32 scalar: gamma**k, or 0.0 if s_t is terminal
    s_t: Any  # observation (or handle) to bootstrap from, k steps after s_tm1


class _OpenWindow:
    """A transition that has its start (s_tm1, a_tm1) but not yet its n rewards."""

    __slots__ = ("s_tm1", "a_tm1", "r_t", "discount_t", "num_steps")

    def __init__(self, s_tm1: Any, a_tm1: Any) -> None:
        self.s_tm1 = s_tm1
        self.a_tm1 = a_tm1
        self.r_t = 0.0  # accumulated in Python floats (float64), cast to float32 when emitted
        self.discount_t = 1.0
        self.num_steps = 0


class TransitionAccumulator:
    """Turns the timesteps of episodes into (n-step) transitions.

    Call `step` on every timestep, in order. Each step opens one window starting at its
    observation (except the last step of an episode) and adds its reward to the open windows; a
    window is emitted once it spans n steps, or when the episode ends (terminated or truncated).

    Timeline for n = 3 on an episode of 5 steps (s0 first, s5 last); `->` marks the step at which
    `step` returns the transition:

        time         0     1     2     3     4     5 (last)
        state        s0    s1    s2    s3    s4    s5
        reward             r1    r2    r3    r4    r5
        window s0    [-----------------]  -> at 3: (s0, a0, r1 + g r2 + g^2 r3, g^3, s3)
        window s1          [-----------------]  -> at 4: (s1, a1, r2 + g r3 + g^2 r4, g^3, s4)
        window s2                [-----------------]  -> at 5: (s2, ..., g^3 or 0, s5)
        window s3                      [-----------]  -> flushed at 5: (s3, ..., g^2 or 0, s5)
        window s4                            [-----]  -> flushed at 5: (s4, a4, r5, g or 0, s5)

    At 5 the windows that end there are flushed: with `s5.terminated` their discount is 0 (no
    bootstrap from a terminal state); with only `s5.truncated` (time limit) they keep `g**k`, k
    being their length, and bootstrap from s5. For n = 1 every non-first step returns exactly
    `(s_{t-1}, a_{t-1}, r_t, g * (1 - terminated_t), s_t)`.

    No window ever crosses an episode boundary: a `first` timestep drops whatever is still open
    (e.g. an episode abandoned without a last timestep) and starts afresh.

    Rewards and discounts are emitted as np.float32 scalars, so a `UniformReplay` stores them as
    float32; states and actions are passed through unchanged.
    """

    def __init__(self, n: int, discount: float) -> None:
        """Builds an accumulator with no open window.

        Args:
            n: number of steps per transition (1 = ordinary one-step transitions).
            discount: gamma, in [0, 1].
        """
        if not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {discount}")
        self._n = int(n)
        self._discount = float(discount)
        self._open: deque[_OpenWindow] = deque()
        self._in_episode = False

    @property
    def n(self) -> int:
        return self._n

    @property
    def discount(self) -> float:
        return self._discount

    def reset(self) -> None:
        """Drops every open window (call it before each episode)."""
        self._open.clear()
        self._in_episode = False

    def step(self, timestep: TimeStep, observation: Any, action: Any) -> list[Transition]:
        """Feeds one timestep; returns the transitions completed by it (possibly none).

        Args:
            timestep: the timestep of the env; its `observation` is not read.
            observation: what the replay should store for this state: the array itself, or a frame
                handle from `FrameStackStore.add`.
            action: the action the agent takes at this timestep (ignored, may be None, when
                `timestep.last`).
        """
        if timestep.first:
            self.reset()
            self._in_episode = True
        elif not self._in_episode:
            raise ValueError(
                "TransitionAccumulator.step got a non-first timestep outside an episode; "
                "every episode must start with a timestep whose `first` is True."
            )
        else:
            # Arriving in s_t: every open window collects r_t, then its discount advances by
            # gamma, or drops to 0 for good if s_t is a true terminal state.
            reward = float(timestep.reward)
            step_discount = 0.0 if timestep.terminated else self._discount
            for window in self._open:
                window.r_t += window.discount_t * reward
                window.discount_t *= step_discount
                window.num_steps += 1

        completed: list[Transition] = []
        if timestep.last and not timestep.first:
            # The episode ends here: flush every open window, bootstrapping from s_t.
            while self._open:
                completed.append(self._emit(self._open.popleft(), observation))
            self._in_episode = False
            return completed
        if timestep.last:  # A one-state episode (first and last): nothing to learn from.
            self.reset()
            return completed
        if self._open and self._open[0].num_steps == self._n:
            completed.append(self._emit(self._open.popleft(), observation))
        self._open.append(_OpenWindow(observation, action))
        return completed

    @staticmethod
    def _emit(window: _OpenWindow, s_t: Any) -> Transition:
        return Transition(
            s_tm1=window.s_tm1,
            a_tm1=window.a_tm1,
            r_t=np.float32(window.r_t),
            discount_t=np.float32(window.discount_t),
            s_t=s_t,
        )


ItemT = TypeVar("ItemT", bound=tuple)


class UniformReplay(Generic[ItemT]):
    """Fixed-capacity replay, sampled uniformly with replacement.

    Items are NamedTuples (e.g. `Transition`) whose fields are numbers or numpy arrays of a fixed
    shape. The first `add` allocates one array per field, `[capacity, *field_shape]` with the field's
    dtype (a Python int becomes int64, a float float64; pass np.float32 scalars to store float32).
    The arrays come from np.zeros, so the operating system only commits the pages actually written:
    `nbytes` is what is reserved, the process RSS grows with `size`. Once full, each `add`
    overwrites the oldest item.
    """

    def __init__(self, capacity: int, rng: np.random.Generator) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._capacity = int(capacity)
        self._rng = rng
        self._item_type: type | None = None
        self._storage: list[np.ndarray] = []
        self._num_added = 0  # total adds ever; the next item goes to slot num_added % capacity

    @property
    def rng(self) -> np.random.Generator:
        """The sampling generator; agents save its state in checkpoints so a resumed run samples on."""
        return self._rng

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def size(self) -> int:
        """Number of items currently stored (at most `capacity`)."""
        return min(self._num_added, self._capacity)

    @property
    def num_added(self) -> int:
        """Number of items added since construction, including overwritten ones."""
        return self._num_added

    @property
    def nbytes(self) -> int:
        """Bytes allocated for the storage arrays (0 before the first `add`)."""
        return sum(array.nbytes for array in self._storage)

    def add(self, item: ItemT) -> None:
        """Stores `item`, overwriting the oldest one when full."""
        if self._item_type is None:
            self._allocate(item)
        elif type(item) is not self._item_type:
            raise TypeError(f"expected a {self._item_type.__name__}, got {type(item).__name__}")
        slot = self._num_added % self._capacity
        for name, array, value in zip(item._fields, self._storage, item, strict=True):
            if np.shape(value) != array.shape[1:]:
                raise ValueError(
                    f"field {name!r} has shape {np.shape(value)}, but the replay was allocated for "
                    f"{array.shape[1:]} by the first item"
                )
            array[slot] = value
        self._num_added += 1

    def oldest_value(self, field_name: str) -> Any:
        """The field `field_name` of the oldest item still stored (the next one overwritten when full).

        Raises:
          ValueError: the replay is empty.
        """
        if self.size == 0:
            raise ValueError("an empty replay has no oldest item")
        assert self._item_type is not None
        slot = self._num_added % self._capacity if self._num_added >= self._capacity else 0
        return self._storage[self._item_type._fields.index(field_name)][slot]

    def sample(self, batch_size: int) -> ItemT:
        """Returns `batch_size` items drawn uniformly with replacement, as one item of arrays
        `[batch_size, *field_shape]`."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay")
        if not 1 <= batch_size <= self.size:
            raise ValueError(f"batch_size must be in [1, size={self.size}], got {batch_size}")
        indices = self._rng.integers(0, self.size, size=batch_size)
        assert self._item_type is not None
        return self._item_type(*(array[indices] for array in self._storage))

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The stored items and the write position as plain numpy arrays (for `--checkpoint_replay`):
        `num_added` and one `field/<name>` array of the `size` stored rows per item field. The item
        type travels as its field names and is rebuilt by `load_state_arrays` from this replay's own
        type, so loading never unpickles anything."""
        if self._item_type is None:
            return {"num_added": np.array(0, np.int64)}
        arrays = {"num_added": np.array(self._num_added, np.int64)}
        for name, array in zip(self._item_type._fields, self._storage, strict=True):
            arrays[f"field/{name}"] = array[: self.size]
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray], item_type: type) -> None:
        """Restores what `state_arrays` returned; `item_type` is the NamedTuple the items are (e.g.
        `Transition`). The sampling generator's state is the agent's to restore.

        Raises:
          ValueError: the arrays do not fit this replay (another capacity, fields or shapes).
        """
        num_added = int(arrays["num_added"])
        size = min(num_added, self._capacity)
        self._item_type, self._storage, self._num_added = None, [], 0
        if num_added == 0:
            return
        names = item_type._fields
        if sorted(f"field/{name}" for name in names) != sorted(k for k in arrays if k.startswith("field/")):
            raise ValueError(f"the saved replay has other fields than {item_type.__name__} {names}")
        for name in names:
            if arrays[f"field/{name}"].shape[0] != size:
                raise ValueError(
                    f"the saved replay holds {arrays[f'field/{name}'].shape[0]} items in field {name!r}, "
                    f"expected {size} (num_added {num_added}, capacity {self._capacity})"
                )
        self._item_type = item_type
        for name in names:
            saved = arrays[f"field/{name}"]
            storage = np.zeros((self._capacity, *saved.shape[1:]), dtype=saved.dtype)
            storage[:size] = saved
            self._storage.append(storage)
        self._num_added = num_added

    def _allocate(self, item: ItemT) -> None:
        if not hasattr(item, "_fields"):
            raise TypeError(f"replay items must be NamedTuples, got {type(item).__name__}")
        self._item_type = type(item)
        for value in item:
            value = np.asarray(value)
            self._storage.append(np.zeros((self._capacity, *value.shape), dtype=value.dtype))


class StaleFrameHandleError(ValueError):
    """A frame handle whose frames have already been overwritten in the FrameStackStore ring."""


class FrameStackStore:
    """Keeps each Atari frame once and rebuilds frame stacks from integer handles.

    A replay of stacked observations stores every frame `2 * stack_size` times (s_tm1 and s_t each
    hold `stack_size` frames). With 84x84 uint8 frames and a 1M replay that is
    1e6 * 2 * 4 * 84 * 84 bytes = 56.4 GB; this store holds each frame once:
    1e6 * 84 * 84 bytes = 7.06 GB (+ 1 byte per slot of bookkeeping, + the small margin of
    `frame_store_capacity`).

    `add` returns a handle: 0, 1, 2, ... in the order frames are added. Frames go into a ring of
    `capacity` slots, so the newest `capacity` frames are kept. `stacks` rebuilds, for a handle t,
    the stack exactly as `gymnasium.wrappers.FrameStackObservation(padding_type="reset")` returns
    it: frames t - stack_size + 1 .. t, where the positions before the first frame of t's episode
    repeat that first frame. Timeline for stack_size = 4 (episode A ends at handle 1, B starts at 2):

        handle      0    1  |  2    3    4    5
        frame       a0   a1 |  b0   b1   b2   b3
        stacks(3) = [b0, b0, b0, b1]      # padded with B's first frame, never with a1
        stacks(5) = [b0, b1, b2, b3]

    Frames of one env come in time order; `first` marks the first frame of each episode (or of each
    life, whatever the agent treats as `timestep.first`). Several envs (`--num_envs`) share one store
    as separate `stream`s: their frames interleave in the ring, and each slot remembers how many
    handles back its stream's previous frame is (`step_back`, 0 for a first frame), so a stack follows
    its own stream. Two streams interleaved (frames of env 1 in brackets):

        handle      0    1     2    3     4    5
        frame       a0  [b0]   a1  [b1]   a2  [b2]
        step_back   0    0     2    2     2    2
        stacks(4) = [a0, a0, a1, a2]      # 4 -> 2 -> 0, then padded with a0
    """

    def __init__(self, capacity: int, frame_shape: tuple[int, int], stack_size: int) -> None:
        if not 1 <= stack_size <= 255:
            raise ValueError(f"stack_size must be in [1, 255], got {stack_size}")
        if capacity < stack_size:
            raise ValueError(f"capacity ({capacity}) must be >= stack_size ({stack_size})")
        self._capacity = int(capacity)
        self._frame_shape = tuple(int(d) for d in frame_shape)
        self._stack_size = int(stack_size)
        self._frames = np.zeros((self._capacity, *self._frame_shape), dtype=np.uint8)
        # Per slot: how many earlier frames of the same episode the stack may use,
        # min(handle - handle of the episode's first frame, stack_size - 1). 0 for a first frame.
        self._frames_since_first = np.zeros(self._capacity, dtype=np.uint8)
        # Per slot: handle - handle of the same stream's previous frame (0 for a first frame).
        self._step_back = np.zeros(self._capacity, dtype=np.uint16)
        self._last_handle_of_stream: dict[int, int] = {}
        self._next_handle = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def stack_size(self) -> int:
        return self._stack_size

    @property
    def frame_shape(self) -> tuple[int, ...]:
        return self._frame_shape

    @property
    def num_added(self) -> int:
        """Frames added so far; the newest handle is `num_added - 1`."""
        return self._next_handle

    @property
    def nbytes(self) -> int:
        """Bytes allocated: the frame ring plus three bytes of bookkeeping per slot."""
        return self._frames.nbytes + self._frames_since_first.nbytes + self._step_back.nbytes

    def add(self, frame: np.ndarray, first: bool, stream: int = 0) -> int:
        """Stores the newest frame of the env and returns its handle.

        Args:
            frame: uint8 [H, W], e.g. `timestep.observation[-1]`.
            first: whether the frame is the first of an episode (`timestep.first`).
            stream: which env the frame comes from (0 .. num_envs - 1).
        """
        frame = np.asarray(frame)
        if frame.shape != self._frame_shape or frame.dtype != np.uint8:
            raise ValueError(
                f"expected a uint8 frame of shape {self._frame_shape}, got {frame.dtype} {frame.shape}"
            )
        handle = self._next_handle
        slot = handle % self._capacity
        previous_handle = self._last_handle_of_stream.get(stream)
        if first:
            frames_since_first, step_back = 0, 0
        elif previous_handle is None:
            raise ValueError(
                f"the first frame of stream {stream} added to a FrameStackStore must have first=True"
            )
        else:
            previous = int(self._frames_since_first[previous_handle % self._capacity])
            frames_since_first = min(previous + 1, self._stack_size - 1)
            step_back = handle - previous_handle
            if step_back > np.iinfo(np.uint16).max:
                raise ValueError(f"stream {stream}'s previous frame is {step_back} handles back (> 65535)")
        self._frames[slot] = frame
        self._frames_since_first[slot] = frames_since_first
        self._step_back[slot] = step_back
        self._last_handle_of_stream[stream] = handle
        self._next_handle += 1
        return handle

    def grow(self, capacity: int) -> None:
        """Enlarges the ring to `capacity` slots, keeping every frame it holds and every handle's stack.

        Slots are `handle % capacity`, so the kept frames are moved to their new slots (a copy of the
        whole ring: meant to be rare, see `TransitionWriter`).
        """
        capacity = int(capacity)
        if capacity <= self._capacity:
            raise ValueError(f"capacity can only grow: {capacity} <= {self._capacity}")
        kept = np.arange(max(0, self._next_handle - self._capacity), self._next_handle, dtype=np.int64)
        frames = np.zeros((capacity, *self._frame_shape), dtype=np.uint8)
        frames_since_first = np.zeros(capacity, dtype=np.uint8)
        frames[kept % capacity] = self._frames[kept % self._capacity]
        frames_since_first[kept % capacity] = self._frames_since_first[kept % self._capacity]
        step_back = np.zeros(capacity, dtype=np.uint16)
        step_back[kept % capacity] = self._step_back[kept % self._capacity]
        self._frames, self._frames_since_first, self._capacity = frames, frames_since_first, capacity
        self._step_back = step_back

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The ring (each frame once, in slot order), its bookkeeping and the next handle."""
        return {
            "frames": self._frames,
            "frames_since_first": self._frames_since_first,
            "step_back": self._step_back,
            "next_handle": np.array(self._next_handle, np.int64),
        }

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restores what `state_arrays` returned, the ring's size included (it may have grown).

        Raises:
          ValueError: the frames have another shape than this store's.
        """
        frames = np.asarray(arrays["frames"])
        if frames.shape[1:] != self._frame_shape or frames.dtype != np.uint8:
            raise ValueError(
                f"the saved frames are {frames.dtype} {frames.shape[1:]}, this store holds uint8 "
                f"{self._frame_shape}"
            )
        self._frames = np.array(frames)  # a writable copy
        self._frames_since_first = np.array(arrays["frames_since_first"], dtype=np.uint8)
        if "step_back" in arrays:
            self._step_back = np.array(arrays["step_back"], dtype=np.uint16)
        else:  # saved before streams existed: one env, whose previous frame is the previous handle
            self._step_back = (self._frames_since_first > 0).astype(np.uint16)
        self._capacity = frames.shape[0]
        self._next_handle = int(arrays["next_handle"])
        # A resumed run starts new episodes: every stream's next frame is a first frame.
        self._last_handle_of_stream = {}

    def valid(self, handles: np.ndarray) -> np.ndarray:
        """bool [B]: whether every frame that `stacks` needs for each handle is still stored.

        A handle h is always valid while h >= newest - capacity + stack_size; a handle near the start
        of its episode needs fewer earlier frames, so it stays valid a little longer.
        """
        return self._chains(self._as_handles(handles))[1]

    def _chains(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """int64 [B, S]: the handles of each stack's frames, newest first (a first frame repeats: reset
        padding), and bool [B]: whether all of them are still stored."""
        oldest_kept = self._next_handle - self._capacity
        valid = (handles >= 0) & (handles < self._next_handle) & (handles >= oldest_kept)
        chains = np.empty((handles.shape[0], self._stack_size), dtype=np.int64)
        current = handles.copy()
        chains[:, 0] = current
        for position in range(1, self._stack_size):
            # Only read the bookkeeping of slots that still hold the chain's own frame.
            back = np.where(valid, self._step_back[current % self._capacity].astype(np.int64), 0)
            current = current - back
            valid &= current >= oldest_kept
            chains[:, position] = current
        return chains, valid

    def oldest_needed(self, handle: int) -> int:
        """The oldest handle whose frame the stack of `handle` needs (`handle` itself for a first frame)."""
        return int(self._chains(np.array([handle], dtype=np.int64))[0][0, -1])

    def stacks(self, handles: np.ndarray) -> np.ndarray:
        """Rebuilds the frame stacks of `handles` (int [B]) as uint8 [B, stack_size, H, W].

        Raises:
            StaleFrameHandleError: if a frame a stack needs has been overwritten, or a handle was
                never issued.
        """
        handles = self._as_handles(handles)
        chains, valid = self._chains(handles)
        if not valid.all():
            bad = handles[~valid]
            raise StaleFrameHandleError(
                f"{bad.size} frame handle(s) are not stored any more (or were never issued), e.g. "
                f"{int(bad[0])}: the store keeps handles {max(0, self._next_handle - self._capacity)}.."
                f"{self._next_handle - 1} and a stack needs up to {self._stack_size - 1} frames before "
                f"its handle. Size the store with frame_store_capacity()."
            )
        # The chain runs newest first; a stack lists its frames oldest first.
        return self._frames[chains[:, ::-1] % self._capacity]  # [B, S, H, W]

    @staticmethod
    def _as_handles(handles: np.ndarray) -> np.ndarray:
        handles = np.asarray(handles)
        if handles.ndim != 1 or not np.issubdtype(handles.dtype, np.integer):
            raise ValueError(f"handles must be a 1-D integer array, got {handles.dtype} {handles.shape}")
        return handles.astype(np.int64, copy=False)


def keep_frames_of_oldest_transition(store: FrameStackStore, replay: UniformReplay, new_handle: int) -> None:
    """Grows `store` when storing the frame `new_handle` would overwrite a frame that the oldest
    transition of `replay` (whose `s_tm1` has the smallest handle) still needs. Call it before each
    `store.add`.

    `frame_store_capacity` sizes the store for episodes (or lives) of >= 32 env steps on average;
    shorter ones (Breakout's first lives under a near-constant policy last ~31) leave more first
    frames per transition than that margin holds. Rather than a stale handle hours into a run, the
    ring then grows, by at least 1/32 of its size so that a growing run copies it rarely:

        needed slots = new_handle - (oldest frame the stack of the oldest transition's s_tm1 needs) + 1
    """
    if replay.size == 0:
        return
    needed = new_handle - store.oldest_needed(int(replay.oldest_value("s_tm1"))) + 1
    if needed > store.capacity:
        store.grow(max(needed, store.capacity + max(1, store.capacity // 32)))


def frame_store_capacity(
    replay_capacity: int, n_step: int, stack_size: int = 4, min_episode_steps: int = 32
) -> int:
    """Frame-store slots needed so that no transition in a `UniformReplay(replay_capacity)` ever
    refers to an overwritten frame.

    Returns `C + ceil((C + n + L) / L) + 2n + S`, with C = replay_capacity, n = n_step,
    S = stack_size, L = min_episode_steps. For C = 1M, n = 3, S = 4, L = 32: 1M + 31_252 + 10 slots
    (+ 221 MB of 84x84 frames). L = 1 assumes nothing and costs about C more slots.

    Why: one frame per env step (the first one of an episode included); a transition (a, ..., b),
    with frame handles a < b <= a + n, is returned by the accumulator exactly when frame b is added.
    Let N be the newest handle, D = N - b and E the number of episodes started among the D frames
    after b. Each non-first frame after b opens a window that, apart from at most n - 1 still open
    at N, has been added to the replay after our transition; so while it is still among the newest
    C transitions, (D - E) - (n - 1) <= C - 1, and N - a <= D + n <= C + E + 2n - 2. Its stack needs
    frames back to a - S + 1, which the ring holds if capacity >= N - a + S. If every episode (or
    life, with terminal-on-life-loss) lasts at least L env steps, its L + 1 frames space episode
    starts, E <= D / (L + 1) + 1, hence E <= (C + n + L - 1) / L, which gives the margin above.

    The length assumption only has to hold on average over the replay's span; most Atari episodes
    and lives last hundreds of steps, but not all (Breakout's lives under an untrained policy last
    ~31). Should it fail, `TransitionWriter` grows the store before a frame still needed is
    overwritten; a store used without it raises `StaleFrameHandleError` rather than return wrong
    frames.
    """
    if min_episode_steps < 1:
        raise ValueError(f"min_episode_steps must be >= 1, got {min_episode_steps}")
    c, n, length = int(replay_capacity), int(n_step), int(min_episode_steps)
    return c + math.ceil((c + n + length) / length) + 2 * n + int(stack_size)


class SumTree:
    """Non-negative values in `capacity` slots, with O(log N) prefix-sum search and update.

    Hand-written because no maintained library offers a vectorised sum tree over numpy arrays (the
    replay libraries that have one are either unmaintained, framework-bound, or loop in Python over
    the batch). Every operation here works on a whole batch at once: B searches descend the tree
    together, level by level, and B updates propagate up together, so a batch costs O(B K log_K N)
    numpy work in log_K N numpy calls of each kind, and never a scan of the N leaves.

    Layout: a K-ary tree (K = `branching`, 32 by default, so 1M slots need only 4 levels below the
    root; fewer levels means fewer numpy calls, which is what a batch of 32 costs). Level 0 is the
    root; level d + 1 holds the children of level d, node i's children being the K consecutive entries
    K i .. K i + K - 1, so `levels[d + 1].reshape(-1, K)[i]` are they. The last level holds the values
    (slot k is entry k); padding entries stay 0 forever. For K = 2 and values 1, 2, 3, 0:

        level 0:           6
        level 1:       3       3
        level 2:     1   2   3   0       <- slots 0..3

    Every internal node is always recomputed as the sum of its K children (never updated by adding
    deltas), so no rounding error accumulates however many updates happen.
    """

    def __init__(self, capacity: int, branching: int = 32) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if branching < 2:
            raise ValueError(f"branching must be >= 2, got {branching}")
        self._capacity = int(capacity)
        self._branching = int(branching)
        counts = [self._capacity]  # nodes per level, leaves first
        while len(counts) < 2 or counts[-1] > 1:
            counts.append(-(-counts[-1] // self._branching))
        counts.reverse()  # root first
        # Each level below the root is padded to K entries per parent, so it reshapes to [parents, K].
        self._levels = [np.zeros(1, dtype=np.float64)] + [
            np.zeros(counts[d - 1] * self._branching, dtype=np.float64) for d in range(1, len(counts))
        ]
        self._children = [level.reshape(-1, self._branching) for level in self._levels[1:]]  # views

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def total(self) -> float:
        """Sum of all values."""
        return float(self._levels[0][0])

    @property
    def nbytes(self) -> int:
        return sum(level.nbytes for level in self._levels)

    def values(self, indices: np.ndarray | None = None) -> np.ndarray:
        """float64 [B]: the values of `indices` (all `capacity` values when None)."""
        if indices is None:
            return self._levels[-1][: self._capacity].copy()
        return self._levels[-1][self._check_indices(indices)]

    def set(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Sets slot `indices[i]` to `values[i]`; for a repeated index the last value wins."""
        indices = self._check_indices(indices)
        values = np.asarray(values, dtype=np.float64)
        if values.shape != indices.shape:
            raise ValueError(f"values has shape {values.shape}, indices {indices.shape}")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("sum-tree values must be finite and >= 0")
        self._levels[-1][indices] = values
        nodes = indices
        for depth in range(len(self._levels) - 2, -1, -1):  # one level up per pass
            nodes = nodes // self._branching
            self._levels[depth][nodes] = self._children[depth][nodes].sum(axis=1)

    def _set_one(self, index: int, value: float) -> None:
        """`set` for one slot with Python scalars (each `add`): cheaper than numpy calls on arrays of 1."""
        self._levels[-1][index] = value
        for depth in range(len(self._levels) - 2, -1, -1):
            index //= self._branching
            self._levels[depth][index] = self._children[depth][index].sum()

    def find(self, targets: np.ndarray) -> np.ndarray:
        """int64 [B]: for each target in [0, total), the slot k where the prefix sum first exceeds it,
        i.e. sum(values[:k]) <= target < sum(values[:k + 1]).

        A slot holding 0 is never returned (even for a target rounded up to `total`): each step clamps
        the target just below the sum of the children it chooses among, so it lands on a child whose
        value is positive.
        """
        targets = np.array(targets, dtype=np.float64)  # copy: consumed as we descend
        if targets.ndim != 1:
            raise ValueError(f"targets must be 1-D, got shape {targets.shape}")
        if self.total <= 0:
            raise ValueError("cannot search a sum tree whose values are all 0")
        rows = np.arange(targets.shape[0])
        nodes = np.zeros(targets.shape, dtype=np.int64)
        for children in self._children:
            values = children[nodes]  # [B, K]
            prefix_sums = np.cumsum(values, axis=1)  # [B, K]
            targets = np.minimum(targets, np.nextafter(prefix_sums[:, -1], 0.0))
            child = np.count_nonzero(prefix_sums <= targets[:, None], axis=1)  # first sum > target
            targets -= prefix_sums[rows, child] - values[rows, child]  # mass of the children before
            nodes = nodes * self._branching + child
        return nodes

    def _check_indices(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices)
        if indices.ndim != 1 or not np.issubdtype(indices.dtype, np.integer):
            raise ValueError(f"indices must be a 1-D integer array, got {indices.dtype} {indices.shape}")
        if indices.size and (indices.min() < 0 or indices.max() >= self._capacity):
            raise ValueError(
                f"indices must be in [0, {self._capacity}), got {indices.min()}..{indices.max()}"
            )
        return indices.astype(np.int64, copy=False)


class PrioritizedSample(NamedTuple):
    """A batch drawn from a `PrioritizedReplay`."""

    items: Any  # one replay item of arrays [B, *field_shape]
    indices: np.ndarray  # int64 [B]: slots, to pass back to `update_priorities`
    weights: np.ndarray  # float32 [B]: importance-sampling weights, max 1


class PrioritizedReplay(UniformReplay[ItemT]):
    """Proportional prioritized replay (Schaul et al. 2015, "Prioritized Experience Replay",
    https://arxiv.org/abs/1511.05952) on a `SumTree`.

    Item i is drawn with probability P(i) = p_i^alpha / sum_k p_k^alpha, where p_i is its priority
    (e.g. |TD error| + a small epsilon) and alpha is `priority_exponent` (0: uniform). A new item gets
    the largest priority passed to `update_priorities` so far (1.0 before any update), so it is
    likely replayed at least once. `sample` returns, with the items, their slots and the
    importance-sampling weights

        w_i = (N * P(i))^(-beta) / max_{j in batch} w_j,     N = size,

    with beta the `importance_sampling_exponent` passed to it (annealed towards 1 by the agent).

    Storage and `add` are those of `UniformReplay`; sampling and updating a batch of B costs
    O(B log N) (the B draws are stratified: one uniform draw in each of B equal slices of the total).
    """

    def __init__(self, capacity: int, priority_exponent: float, rng: np.random.Generator) -> None:
        super().__init__(capacity, rng)
        if priority_exponent < 0:
            raise ValueError(f"priority_exponent must be >= 0, got {priority_exponent}")
        self._priority_exponent = float(priority_exponent)
        self._tree = SumTree(capacity)
        self._max_priority = 1.0

    @property
    def nbytes(self) -> int:
        return super().nbytes + self._tree.nbytes

    @property
    def max_priority(self) -> float:
        return self._max_priority

    def add(self, item: ItemT) -> None:
        """Stores `item` with the largest priority seen so far, overwriting the oldest one when full."""
        slot = self._num_added % self._capacity
        super().add(item)
        self._tree._set_one(slot, self._max_priority**self._priority_exponent)

    def sample(self, batch_size: int, importance_sampling_exponent: float = 1.0) -> PrioritizedSample:
        """Draws `batch_size` items with probability proportional to priority^alpha (with replacement)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay")
        if not 1 <= batch_size <= self.size:
            raise ValueError(f"batch_size must be in [1, size={self.size}], got {batch_size}")
        total = self._tree.total
        targets = (np.arange(batch_size) + self._rng.random(batch_size)) * (total / batch_size)
        indices = self._tree.find(targets)
        probabilities = self._tree.values(indices) / total
        weights = (self.size * probabilities) ** (-float(importance_sampling_exponent))
        weights = (weights / weights.max()).astype(np.float32)
        assert self._item_type is not None
        items = self._item_type(*(array[indices] for array in self._storage))
        return PrioritizedSample(items=items, indices=indices, weights=weights)

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Sets the priorities (before the exponent alpha) of the items in slots `indices`."""
        priorities = np.asarray(priorities, dtype=np.float64)
        if priorities.shape != np.shape(indices):
            raise ValueError(f"priorities has shape {priorities.shape}, indices {np.shape(indices)}")
        if not np.all(np.isfinite(priorities)) or np.any(priorities < 0):
            raise ValueError("priorities must be finite and >= 0")
        if np.asarray(indices).size and np.max(indices) >= self.size:
            raise ValueError(f"index {np.max(indices)} is not stored yet (size {self.size})")
        self._tree.set(indices, priorities**self._priority_exponent)
        if priorities.size:
            self._max_priority = max(self._max_priority, float(priorities.max()))

    def priorities(self) -> np.ndarray:
        """float64 [size]: priority^alpha of every stored item (for tests and debugging)."""
        return self._tree.values()[: self.size]

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = super().state_arrays()
        arrays["priorities"] = self.priorities()  # after the exponent, as the tree holds them
        arrays["max_priority"] = np.array(self._max_priority, np.float64)
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray], item_type: type) -> None:
        super().load_state_arrays(arrays, item_type)
        priorities = np.asarray(arrays["priorities"], np.float64)
        if priorities.shape != (self.size,):
            raise ValueError(f"the saved replay has {priorities.shape} priorities for {self.size} items")
        self._tree = SumTree(self._capacity)
        if self.size:
            self._tree.set(np.arange(self.size), priorities)
        self._max_priority = float(arrays["max_priority"])


class ReplayContents:
    """A replay of `Transition`s and, on Atari, the frame store its handles point into: what
    `--checkpoint_replay` saves beside a checkpoint and `--resume` loads, as plain arrays (nothing is
    unpickled). The replay Q agents' `TransitionWriter` is one; SAC's learner makes one over its replay.
    """

    def __init__(self, replay: UniformReplay, frame_store: FrameStackStore | None = None):
        self.replay = replay
        self.frame_store = frame_store

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The replay's and the frame store's contents as plain arrays (`replay/...`, `frames/...`)."""
        arrays = {f"replay/{k}": v for k, v in self.replay.state_arrays().items()}
        if self.frame_store is not None:
            arrays.update({f"frames/{k}": v for k, v in self.frame_store.state_arrays().items()})
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restores what `state_arrays` returned into this replay and frame store.

        Raises:
          ValueError: the arrays come from a replay with or without a frame store where this one is
            the other way, or do not fit the replay.
        """
        has_frames = any(k.startswith("frames/") for k in arrays)
        if has_frames != (self.frame_store is not None):
            raise ValueError(
                "the saved replay " + ("stores" if has_frames else "does not store") + " Atari frames, this "
                "agent's replay " + ("does not" if has_frames else "does")
            )
        self.replay.load_state_arrays(_with_prefix(arrays, "replay/"), Transition)
        if self.frame_store is not None:
            self.frame_store.load_state_arrays(_with_prefix(arrays, "frames/"))


class TransitionWriter(ReplayContents):
    """What every replay-based Q agent does with a timestep: store it, n-step accumulated, frames once.

    `add` turns the timestep into zero or more `Transition`s (via the accumulator) and adds them to the
    replay; on Atari the observation goes to the `FrameStackStore` first and the transitions carry its
    handles. `to_tensors` turns a sampled batch back into tensors, rebuilding the frame stacks.

    With several envs (`--num_envs`), `add(..., stream=i)` keeps env i's n-step windows in its own
    accumulator and its frames in its own stream of the store, so a transition or a stack never mixes
    two envs; all streams share the replay.
    """

    def __init__(
        self,
        replay: UniformReplay,
        accumulator: TransitionAccumulator,
        frame_store: FrameStackStore | None = None,
    ):
        super().__init__(replay, frame_store)
        self._accumulators = [accumulator]  # one per stream (env), made on its first timestep

    def _accumulator(self, stream: int) -> TransitionAccumulator:
        while len(self._accumulators) <= stream:
            first = self._accumulators[0]
            self._accumulators.append(TransitionAccumulator(first.n, first.discount))
        return self._accumulators[stream]

    def add(self, timestep: TimeStep, action: Any, stream: int = 0) -> None:
        accumulator = self._accumulator(stream)
        if self.frame_store is None:
            for transition in accumulator.step(timestep, timestep.observation, action):
                self.replay.add(transition)
            return
        # The frame's handle is known before it is stored, so the transitions it completes go into the
        # replay first: then the replay's oldest transition is final when the store makes room.
        handle = self.frame_store.num_added
        for transition in accumulator.step(timestep, handle, action):
            self.replay.add(transition)
        keep_frames_of_oldest_transition(self.frame_store, self.replay, handle)
        self.frame_store.add(timestep.observation[-1], timestep.first, stream)

    def reset(self) -> None:
        for accumulator in self._accumulators:
            accumulator.reset()

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restores the replay and frame store (see `ReplayContents`). Pending n-step windows were not
        saved: a resumed run starts a new episode, which drops them."""
        self.reset()
        super().load_state_arrays(arrays)

    def to_tensors(self, batch: Transition, device: torch.device) -> Transition:
        """A sampled batch as tensors: observations as stored (uint8 frames stay uint8), int64 actions,
        float32 rewards and discounts."""
        s_tm1, s_t = batch.s_tm1, batch.s_t
        if self.frame_store is not None:
            s_tm1, s_t = self.frame_store.stacks(s_tm1), self.frame_store.stacks(s_t)
        return Transition(
            s_tm1=torch.as_tensor(s_tm1, device=device),
            a_tm1=torch.as_tensor(batch.a_tm1, device=device, dtype=torch.int64),
            r_t=torch.as_tensor(batch.r_t, device=device, dtype=torch.float32),
            discount_t=torch.as_tensor(batch.discount_t, device=device, dtype=torch.float32),
            s_t=torch.as_tensor(s_t, device=device),
        )


def _with_prefix(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


def frame_store_for(
    observation_shape: tuple[int, ...], replay_capacity: int, n_step: int, num_envs: int = 1
) -> FrameStackStore | None:
    """The FrameStackStore an n-step transition replay of `replay_capacity` needs for stacked-frame
    observations [stack, H, W] (sized by `frame_store_capacity`), or None for vector observations.

    With `num_envs` interleaved envs a transition's frames and a stack's frames lie about `num_envs`
    times further apart in handles, so the n-step and stack margins are scaled by it (and
    `TransitionWriter` still grows the store should that not hold)."""
    if len(observation_shape) != 3:
        return None
    return FrameStackStore(
        capacity=frame_store_capacity(
            replay_capacity, n_step * num_envs, stack_size=observation_shape[0] * num_envs
        ),
        frame_shape=tuple(observation_shape[1:]),
        stack_size=observation_shape[0],
    )
