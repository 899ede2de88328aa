"""Partial observability for DRQN: the flickering screen of Hausknecht & Stone 2015 (section 5)."""

import functools
from collections import deque
from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np


class ObscuredObservation(gym.Wrapper):
    """Blanks (zeros) each new screen with probability `probability`.

    With probability 0.5 on Atari this is the paper's "Flickering Pong": a single frame no longer
    tells where the ball is going, and the agent has to integrate over time. The generator is seeded
    by the `seed` of `reset`, so runs stay reproducible.

    A vector observation (classic control) is blanked whole. A stack of Atari frames
    [stack, H, W] (outside `FrameStackObservation(padding_type="reset")`) is blanked frame by frame:
    each frame keeps the draw it got when it was new, as it moves back through the stack, and the
    reset padding repeats the first frame's draw. So every stack is made of the frames the agent saw
    one step at a time, which is what a replay that stores only each newest frame rebuilds:

        step           0 (reset)     1             2
        new frame      f0 blank      f1 shown      f2 blank
        observation    [0, 0, 0, 0]  [0, 0, 0, f1] [0, 0, f1, 0]
    """

    def __init__(self, env: gym.Env, probability: float):
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be in [0, 1], got {probability}")
        super().__init__(env)
        self.probability = probability
        self._rng = np.random.default_rng()
        shape = env.observation_space.shape
        self._stack_size = shape[0] if shape is not None and len(shape) == 3 else 0  # 0: not frames
        self._blanked: deque[bool] = deque(maxlen=max(self._stack_size, 1))  # oldest frame first

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        observation, info = self.env.reset(seed=seed, options=options)
        blank = bool(self._rng.random() < self.probability)
        self._blanked.extend([blank] * self._blanked.maxlen)  # the reset padding repeats the first frame
        return self._obscure(observation), info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._blanked.append(bool(self._rng.random() < self.probability))
        return self._obscure(observation), reward, terminated, truncated, info

    def _obscure(self, observation: np.ndarray) -> np.ndarray:
        if self._stack_size == 0:
            return np.zeros_like(observation) if self._blanked[-1] else observation
        observation = np.array(observation)  # a copy: the frame stack wrapper keeps its own frames
        observation[np.array(self._blanked)] = 0
        return observation


def obscuring_wrapper(probability: float) -> Callable[[gym.Env], gym.Env] | None:
    """The wrapper that makes an env partially observable (`wrap_env` of `training.train`,
    `train_distributed` and `evaluate`), or None when `probability` is 0.

    A `functools.partial` of the class, not a closure, so that it pickles: distributed agents send it to
    their actor processes (fork server, Ray), which build their own envs.
    """
    if probability <= 0.0:
        return None
    return functools.partial(ObscuredObservation, probability=probability)
