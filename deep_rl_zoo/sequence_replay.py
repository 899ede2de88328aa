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

from typing import Any, NamedTuple

import numpy as np


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
