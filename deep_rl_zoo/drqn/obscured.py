"""Partial observability for DRQN: the flickering screen of Hausknecht & Stone 2015 (section 5)."""

from typing import Any

import gymnasium as gym
import numpy as np


class ObscuredObservation(gym.ObservationWrapper):
    """Blanks (zeros) the whole observation with probability `probability` at each step.

    With probability 0.5 on Atari this is the paper's "Flickering Pong": a single frame no longer
    tells where the ball is going, and the agent has to integrate over time. The generator is seeded
    by the `seed` of `reset`, so runs stay reproducible.
    """

    def __init__(self, env: gym.Env, probability: float):
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be in [0, 1], got {probability}")
        super().__init__(env)
        self.probability = probability
        self._rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        return super().reset(seed=seed, options=options)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        if self._rng.random() < self.probability:
            return np.zeros_like(observation)
        return observation
