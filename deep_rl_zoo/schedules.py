"""Step-indexed hyper-parameter schedules (exploration epsilon, importance-sampling exponent, learning
rate...)."""

import math
from typing import Any


class LinearSchedule:
    """Holds `begin_value` until `begin_t`, moves linearly to `end_value` over `decay_steps`, then holds.

        value
        begin ------\
                     \
        end           `---------
              begin_t  begin_t + decay_steps        -> t
    """

    def __init__(self, begin_value: float, end_value: float, begin_t: int, decay_steps: int):
        if decay_steps < 0:
            raise ValueError(f"decay_steps must be >= 0, got {decay_steps}")
        self.begin_value = begin_value
        self.end_value = end_value
        self.begin_t = begin_t
        self.decay_steps = decay_steps

    def __call__(self, t: int) -> float:
        if self.decay_steps == 0:
            return self.end_value if t >= self.begin_t else self.begin_value
        fraction = min(max(t - self.begin_t, 0) / self.decay_steps, 1.0)
        return self.begin_value + fraction * (self.end_value - self.begin_value)


def learning_rate_schedule(config: Any) -> LinearSchedule:
    """An on-policy agent's learning rate over the env steps learned from, for a config whose every update
    learns from `num_actors x num_envs x unroll_length` transitions (PPO and its curious variants, A2C):
    `--learning_rate` throughout, or decayed linearly to 0 at the run's last update with
    `--anneal_learning_rate`."""
    batch = config.num_actors * config.num_envs * config.unroll_length  # transitions per update
    num_updates = config.num_iterations * math.ceil(config.num_train_steps / batch)
    return LinearSchedule(
        begin_value=config.learning_rate,
        end_value=0.0 if config.anneal_learning_rate else config.learning_rate,
        begin_t=0,
        decay_steps=num_updates * batch,
    )
