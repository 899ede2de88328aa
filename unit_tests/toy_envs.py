"""Small environments of "a user's own", registered on import, for the tests of `module:id` environment
names (`--environment_name=unit_tests.toy_envs:ToyVector-v0`) and of the Python API.

All three are one corridor of `length` cells: the agent starts in cell 0, action 1 moves right, action 0
left (not below 0); reaching the last cell gives reward 1 and ends the episode. Walking right all the way
takes `length - 1` steps and returns 1.

    ToyVector-v0      float32 [2] observations: (cell / (length - 1), 1.0)
    ToyImage-v0       uint8 [12, 12, 3] RGB frames: a white column at the agent's cell, on black
    ToyContinuous-v0  the vector corridor with a Box action in [-1, 1] (> 0 moves right)
"""

from typing import Any

import gymnasium as gym
import numpy as np

IMAGE_SIZE = 12  # pixels, height and width of ToyImage-v0's frames


class ToyCorridor(gym.Env):
    """The corridor with vector observations; `length` is the constructor argument `--env_kwargs` sets."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, length: int = 5, render_mode: str | None = None):
        if length < 2:
            raise ValueError(f"length must be >= 2, got {length}")
        self.length = length
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._cell = 0

    def _observation(self) -> Any:
        return np.array([self._cell / (self.length - 1), 1.0], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._cell = 0
        return self._observation(), {}

    def _moves_right(self, action: Any) -> bool:
        return int(action) == 1

    def step(self, action: Any):
        self._cell = (
            min(self._cell + 1, self.length - 1) if self._moves_right(action) else max(self._cell - 1, 0)
        )
        arrived = self._cell == self.length - 1
        return self._observation(), float(arrived), arrived, False, {}

    def render(self) -> np.ndarray:
        frame = np.zeros((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
        column = round(self._cell * (IMAGE_SIZE - 1) / (self.length - 1))
        frame[:, column, :] = 255
        return frame


class ToyImageCorridor(ToyCorridor):
    """The corridor seen as RGB frames, as a camera-based env of a user's would be."""

    def __init__(self, length: int = 5, render_mode: str | None = None):
        super().__init__(length, render_mode)
        self.observation_space = gym.spaces.Box(0, 255, shape=(IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)

    def _observation(self) -> Any:
        return self.render()


class ToyContinuousCorridor(ToyCorridor):
    """The corridor with one continuous action: > 0 moves right."""

    def __init__(self, length: int = 5, render_mode: str | None = None):
        super().__init__(length, render_mode)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def _moves_right(self, action: Any) -> bool:
        return float(np.asarray(action).reshape(-1)[0]) > 0.0


gym.register(id="ToyVector-v0", entry_point=ToyCorridor, max_episode_steps=20)
gym.register(id="ToyImage-v0", entry_point=ToyImageCorridor, max_episode_steps=20)
gym.register(id="ToyContinuous-v0", entry_point=ToyContinuousCorridor, max_episode_steps=20)
