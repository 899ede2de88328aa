"""Sequence replay for recurrent agents (DRQN): a ring of the latest timesteps, sampled as windows of
consecutive steps.

Every env step is stored once, as a `SequenceStep`; a sampled sequence is a view onto `length`
consecutive steps of the ring, so overlapping sequences share their storage (on Atari the
observation stored is a `replay.FrameStackStore` handle, so each frame is kept once too).

Windows may cross episode boundaries; `first` tells the learner where to reset the LSTM state and
which transitions to mask (o_k -> o_{k+1} is a transition only if o_{k+1} is not `first`):

    ring   ... | o5  o6  o7 (last) | o0' (first)  o1'  o2' | ...
    window       [o5  o6  o7  o0'  o1']          length 5
    transitions   o5->o6  o6->o7  (o7->o0' masked)  o0'->o1'
"""

import collections
from typing import Any, NamedTuple

import numpy as np

from deep_rl_zoo import replay as replay_lib


class SequenceStep(NamedTuple):
    """One env step as the sequence replay stores it."""

    observation: Any  # o_t: the array, or an int FrameStackStore handle
    action: Any  # a_t, taken at o_t (meaningless on the last step of an episode)
    reward: Any  # np.float32: r_t, received on arriving in o_t (0 when first)
    terminated: Any  # bool: o_t is a true terminal state (discount 0 for the transition into it)
    first: Any  # bool: o_t starts an episode (the LSTM state is reset before it)


class SequenceReplay:
    """Keeps the newest `capacity` steps; `sample` returns windows of `sequence_length` consecutive
    steps, time-major (`[sequence_length, batch_size, ...]` per field), starting uniformly at random.

    Steps must be added in time order from one environment.
    """

    def __init__(self, capacity: int, sequence_length: int, rng: np.random.Generator) -> None:
        if sequence_length < 2:
            raise ValueError(f"sequence_length must be >= 2 (one transition), got {sequence_length}")
        if capacity < sequence_length:
            raise ValueError(f"capacity ({capacity}) must be >= sequence_length ({sequence_length})")
        self._capacity = int(capacity)
        self._sequence_length = int(sequence_length)
        self._rng = rng
        self._storage: list[np.ndarray] = []
        self._num_added = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def rng(self) -> np.random.Generator:
        """The sampling generator (its state goes into the agent's checkpoint)."""
        return self._rng

    @property
    def sequence_length(self) -> int:
        return self._sequence_length

    @property
    def size(self) -> int:
        """Steps currently stored."""
        return min(self._num_added, self._capacity)

    @property
    def num_sequences(self) -> int:
        """Distinct windows that `sample` can return now."""
        return max(0, self.size - self._sequence_length + 1)

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self._storage)

    def add(self, step: SequenceStep) -> None:
        if not self._storage:
            for value in step:
                value = np.asarray(value)
                self._storage.append(np.zeros((self._capacity, *value.shape), dtype=value.dtype))
        slot = self._num_added % self._capacity
        for array, value in zip(self._storage, step, strict=True):
            array[slot] = value
        self._num_added += 1

    def sample(self, batch_size: int) -> SequenceStep:
        """`batch_size` windows, each field `[sequence_length, batch_size, ...]`."""
        if self.num_sequences < 1:
            raise ValueError(
                f"the replay holds {self.size} steps, fewer than one sequence of {self._sequence_length}"
            )
        oldest = self._num_added - self.size
        starts = oldest + self._rng.integers(0, self.num_sequences, size=batch_size)  # [B]
        slots = (starts[None, :] + np.arange(self._sequence_length)[:, None]) % self._capacity  # [T, B]
        return SequenceStep(*(array[slots] for array in self._storage))


# ----------------------------------------------------------------------------------------------------
# R2D2's prioritized replay of overlapping sequences from many actors


class SequenceBlock(NamedTuple):
    """`period` consecutive steps of one actor's stream: what an R2D2 actor sends to the learner.

    An actor's stream is every timestep it sees, episodes following each other (`first` marks where
    one starts). Each block completes the replayed sequence of T steps that ends at its last step.
    """

    actor_index: int
    observation: np.ndarray  # [P, ...] o_k; on Atari only the newest frame of each stack, [P, H, W]
    action: np.ndarray  # [P] int64, a_k taken at o_k (0 on the last step of an episode: never learned)
    reward: np.ndarray  # [P] float32, r_k received on arriving in o_k (0 when first)
    terminated: np.ndarray  # [P] bool, o_k is a true terminal state
    truncated: np.ndarray  # [P] bool, the episode was cut by a time limit at o_k
    first: np.ndarray  # [P] bool, o_k starts an episode (the recurrent state is zeroed before it)
    # (h [H], c [H]) float32: the actor's LSTM state before it read the first step of the sequence this
    # block completes, T steps before the block's end (`SequenceStartStates`)
    core_state: tuple
    # Further per-step fields an agent stores with its steps ({name: [P, ...] array}, the same names in
    # every block), returned in `ReplayedSequences.extras` (NGU: policy index, intrinsic reward, ...).
    extras: dict | None = None


class SequenceStartStates:
    """An actor's LSTM states before each of its last T steps, so that a block can carry the state from
    which the learner replays the sequence the block completes (T steps back, not the block's own start).

    Call `record` once per step with the state before the step's observation is read (after zeroing it
    at an episode's first step); `sequence_start` then gives the state before the T-th last step.
    """

    def __init__(self, sequence_length: int) -> None:
        self._states: collections.deque = collections.deque(maxlen=sequence_length)

    def record(self, state: tuple) -> None:
        self._states.append(state)  # the network returns new tensors each step: no copy needed

    def sequence_start(self) -> tuple:
        """(h [H], c [H]) float32 numpy; before the actor's first step while it has made fewer than T."""
        return tuple(np.asarray(x.reshape(-1).cpu(), np.float32).copy() for x in self._states[0])


class ReplayedSequences(NamedTuple):
    """A batch of sampled sequences, time-major, with what prioritized replay needs."""

    observation: np.ndarray  # [T, B, ...] (Atari: stacks rebuilt from the stored frames)
    action: np.ndarray  # [T, B] int64
    reward: np.ndarray  # [T, B] float32
    terminated: np.ndarray  # [T, B] bool
    truncated: np.ndarray  # [T, B] bool
    first: np.ndarray  # [T, B] bool
    core_state: tuple  # (h [B, H], c [B, H]): the stored LSTM state before step 0 of each sequence
    indices: np.ndarray  # [B] slots, for `update_priorities`
    weights: np.ndarray  # [B] float32 importance-sampling weights, max 1
    steps: np.ndarray  # [T, B] int64 step numbers (in the order steps were added, over all actors)
    extras: dict | None = None  # {name: [T, B, ...]}: the blocks' `extras`, None when they had none


class _StoredSequence(NamedTuple):
    steps: np.ndarray  # [W] int64 absolute step numbers: S - 1 steps of stack history, then T steps
    h: np.ndarray  # [H]
    c: np.ndarray  # [H]


class PrioritizedSequenceReplay:
    """R2D2's replay (Kapturowski et al. 2019, https://openreview.net/forum?id=r1lyTjAqYX): sequences of
    T = `sequence_length` steps, a new one every P = `period` steps of an actor (so adjacent ones overlap
    by T - P steps), each with the LSTM state the actor had before its first step, sampled in
    proportion to priority^alpha.

    Every step is stored once, in a ring of `capacity` steps shared by all actors (on Atari only the
    newest frame of each observation; `stack_size` frames are put back together when sampled). A
    sequence stores the step numbers it covers and its LSTM state, so overlapping sequences share their
    steps. Blocks of P steps arrive from actors in any interleaving; each block of an actor completes
    the sequence of its last T steps (the paper's layout: T = 40 + 80 + 1, P = 40):

        actor 3's stream   | block j-3 | block j-2 | block j-1 | block j |
        sequence j                [s s s]|<----------- T ----------------->|   core state: the one sent
                                   S - 1 steps of stack history (Atari)        with block j, T steps back
        sequence j-1   [s s s]|<----------- T ----------------->|

    An actor's blocks make no sequence until it has sent T steps; its stream begins with an episode's
    first step, so missing history is never looked at (reset padding). A sequence is dropped
    (priority 0) as soon as the ring overwrites its oldest step.
    """

    def __init__(
        self,
        capacity: int,
        sequence_length: int,
        priority_exponent: float,
        rng: np.random.Generator,
        stack_size: int = 1,
        *,
        period: int,
    ) -> None:
        """
        Args:
          capacity: env steps kept (over all actors).
          sequence_length: T, steps per replayed sequence (burn-in, learned steps and the last
            bootstrap observation), >= 2.
          priority_exponent: alpha, 0 samples uniformly.
          stack_size: S, frames per observation when blocks carry only the newest frame (Atari); 1 when
            blocks carry whole observations.
          period: P, steps per block: an actor's sequences start P steps apart; 1 <= P <= T.
        """
        if sequence_length < 2:
            raise ValueError(f"sequence_length must be >= 2, got {sequence_length}")
        if not 1 <= period <= sequence_length:
            raise ValueError(f"period must be in [1, sequence_length = {sequence_length}], got {period}")
        if stack_size < 1:
            raise ValueError(f"stack_size must be >= 1, got {stack_size}")
        if capacity < sequence_length + stack_size:
            raise ValueError(f"capacity {capacity} cannot hold one sequence of {sequence_length}")
        self._capacity = int(capacity)
        self._sequence_length = int(sequence_length)
        self._period = int(period)
        self._stack_size = int(stack_size)
        self._rng = rng
        self._steps: dict[str, np.ndarray] = {}  # allocated on the first block
        self._extra_names: set[str] = set()
        self._num_steps_added = 0
        sequence_capacity = max(1, capacity // period)
        self._sequences = replay_lib.PrioritizedReplay(sequence_capacity, priority_exponent, rng)
        self._oldest = np.zeros(sequence_capacity, np.int64)  # the oldest step each sequence needs
        self._alive = np.zeros(sequence_capacity, bool)
        self._num_sequences_added = 0
        # Per actor: the step numbers of its last T + S - 1 steps (its first step repeated before it) and
        # how many steps it has sent.
        self._history: dict[int, tuple[np.ndarray, int]] = {}

    @property
    def rng(self) -> np.random.Generator:
        return self._rng

    @property
    def period(self) -> int:
        return self._period

    @property
    def sequence_length(self) -> int:
        return self._sequence_length

    @property
    def num_steps(self) -> int:
        """Env steps stored."""
        return min(self._num_steps_added, self._capacity)

    @property
    def num_sequences(self) -> int:
        """Sequences that can be sampled (not yet dropped)."""
        return int(self._alive.sum())

    @property
    def nbytes(self) -> int:
        return (
            sum(a.nbytes for a in self._steps.values())
            + self._sequences.nbytes
            + self._oldest.nbytes
            + self._alive.nbytes
        )

    def add_block(self, block: SequenceBlock) -> None:
        """Stores the block's steps and, once the actor has sent T steps, the sequence it completes."""
        length = len(block.first)
        if length != self._period:
            raise ValueError(f"a block must hold {self._period} steps, got {length}")
        fields = {name: np.asarray(getattr(block, name)) for name in _STEP_FIELDS}
        extras = block.extras or {}
        if self._steps and set(extras) != self._extra_names:
            raise ValueError(
                f"a block's extras {sorted(extras)} differ from the first's {sorted(self._extra_names)}"
            )
        for name, value in extras.items():
            fields[_EXTRA_PREFIX + name] = np.asarray(value)
            if len(fields[_EXTRA_PREFIX + name]) != length:
                raise ValueError(f"extra {name!r} holds {len(value)} steps, the block {length}")
        if not self._steps:
            self._extra_names = set(extras)
            for name, value in fields.items():
                self._steps[name] = np.zeros((self._capacity, *value.shape[1:]), value.dtype)
        steps = self._num_steps_added + np.arange(length, dtype=np.int64)
        for name, value in fields.items():
            self._steps[name][steps % self._capacity] = value
        self._num_steps_added += length
        horizon = self._num_steps_added - self._capacity  # steps before this are overwritten

        window_length = self._sequence_length + self._stack_size - 1
        history, num_sent = self._history.get(block.actor_index, (np.full(window_length, steps[0]), 0))
        window = np.concatenate([history, steps])[-window_length:]  # [T + S - 1], oldest first
        num_sent += length
        self._history[block.actor_index] = (window, num_sent)
        # No sequence before the actor has sent T steps, nor one whose oldest step is already overwritten
        # (other actors filled the ring meanwhile).
        if num_sent >= self._sequence_length and window[0] >= horizon:
            self._add_sequence(window, tuple(np.asarray(x, np.float32) for x in block.core_state))

        dead = np.flatnonzero(self._alive & (self._oldest < horizon))
        if dead.size:
            self._sequences.update_priorities(dead, np.zeros(dead.size))
            self._alive[dead] = False

    def _add_sequence(self, window: np.ndarray, core_state: tuple) -> None:
        slot = self._num_sequences_added % self._sequences.capacity
        self._sequences.add(_StoredSequence(window, core_state[0], core_state[1]))
        self._oldest[slot] = window[0]
        self._alive[slot] = True
        self._num_sequences_added += 1

    def sample(self, batch_size: int, importance_sampling_exponent: float) -> ReplayedSequences:
        """`batch_size` sequences drawn in proportion to priority^alpha, with their IS weights."""
        if self.num_sequences < 1:
            raise ValueError("the replay holds no complete sequence yet")
        sample = self._sequences.sample(batch_size, importance_sampling_exponent)
        window = sample.items.steps.T % self._capacity  # [W, B] ring slots
        s = self._stack_size
        slots = window[s - 1 :]  # [T, B]
        first = self._steps["first"][window]  # [W, B]
        observation = self._steps["observation"]
        if s == 1:
            observations = observation[slots]
        else:
            observations = _stacks(observation, window, first, s)
        return ReplayedSequences(
            observation=observations,
            action=self._steps["action"][slots],
            reward=self._steps["reward"][slots],
            terminated=self._steps["terminated"][slots],
            truncated=self._steps["truncated"][slots],
            first=first[s - 1 :],
            core_state=(sample.items.h, sample.items.c),
            indices=sample.indices,
            weights=sample.weights,
            steps=sample.items.steps.T[s - 1 :],
            extras={name: self._steps[_EXTRA_PREFIX + name][slots] for name in sorted(self._extra_names)}
            if self._extra_names
            else None,
        )

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Sets the priorities of sampled sequences; sequences dropped since keep priority 0."""
        priorities = np.where(self._alive[indices], priorities, 0.0)
        self._sequences.update_priorities(indices, priorities)

    def priorities(self) -> np.ndarray:
        """priority^alpha of every sequence slot in use (for tests)."""
        return self._sequences.priorities()


_STEP_FIELDS = ("observation", "action", "reward", "terminated", "truncated", "first")
_EXTRA_PREFIX = "extra/"


def _stacks(frames: np.ndarray, window: np.ndarray, first: np.ndarray, stack_size: int) -> np.ndarray:
    """The frame stacks of the last T = W - S + 1 steps of each window, as the env built them:
    `FrameStackObservation(padding_type="reset")` repeats an episode's first frame before it.

    Args:
      frames: the ring of newest frames, [C, H, W].
      window: [W, B] ring slots, S - 1 steps of history then the T steps.
      first: [W, B] bool.

    Returns:
      [T, B, S, H, W], oldest frame first in each stack.
    """
    num_window, batch_size = window.shape
    positions = np.arange(num_window)[:, None]
    last_first = np.maximum.accumulate(np.where(first, positions, -1), axis=0)  # [W, B]
    current = np.arange(stack_size - 1, num_window)  # [T] window position of each step
    stack = current[:, None] - (stack_size - 1) + np.arange(stack_size)[None, :]  # [T, S]
    # A stack position before the latest episode start (at or before the current step) shows that start.
    stack = np.maximum(stack[:, :, None], last_first[current][:, None, :])  # [T, S, B]
    gathered = frames[window[stack, np.arange(batch_size)[None, None, :]]]  # [T, S, B, H, W]
    return gathered.transpose(0, 2, 1, *range(3, gathered.ndim))
