"""Step-indexed hyper-parameter schedules (exploration epsilon, importance-sampling exponent...)."""


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
