"""Types shared by environments, agents and the main loop."""

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import numpy as np


class TimeStep(NamedTuple):
    """What an agent sees at one env step.

    The reward is the one received on arriving in `observation`; it is 0.0 when `first`.
    `terminated` and `truncated` keep gymnasium's meaning: a terminated step has no future
    (discount 0), a truncated one was cut by a time limit and still bootstraps.
    """

    observation: np.ndarray  # s_t
    reward: float  # r_t
    terminated: bool  # s_t is terminal (a lost life counts, for learning only)
    truncated: bool  # the episode was cut by a time limit at s_t
    first: bool  # s_t starts an episode (or a new life)
    info: Mapping[str, Any]  # gymnasium's info dict for this step

    @property
    def last(self) -> bool:
        return self.terminated or self.truncated


class Agent(Protocol):
    """What the main loop needs from an agent (learning or greedy)."""

    agent_name: str

    def step(self, timestep: TimeStep) -> int | np.ndarray:
        """Returns the action for `timestep`; called on the last timestep too (action ignored)."""

    def reset(self) -> None:
        """Called before every episode."""

    @property
    def statistics(self) -> Mapping[str, float]:
        """Scalars worth logging, e.g. loss, epsilon, learner steps."""

    def state_dict(self) -> dict:
        """Everything needed to resume; tensors, numbers, strings and containers of those only."""

    def load_state_dict(self, state: dict) -> None: ...
