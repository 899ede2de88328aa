"""One gradient step, as every agent takes it: backward, optional norm clip, optimizer step, NaN check."""

import math
from collections.abc import Iterable

import torch
from torch import nn

from deep_rl_zoo.errors import NonFiniteLossError


def gradient_step(
    loss: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    parameters: Iterable[nn.Parameter],
    max_grad_norm: float,
    learner_step: int,
) -> float:
    """Minimises the scalar `loss` by one optimizer step and returns its value.

    Args:
      loss: a scalar tensor.
      optimizer: updates `parameters`.
      parameters: what to clip; the optimizer's parameters (or a subset of them).
      max_grad_norm: clip the global gradient norm to this; 0 disables clipping.
      learner_step: the number of this step, counted from 1, for the error message.

    Raises:
      NonFiniteLossError: the loss is NaN or infinite (checked before the parameters change).
    """
    value = loss.item()
    if not math.isfinite(value):
        raise NonFiniteLossError(learner_step, value)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if max_grad_norm > 0:
        nn.utils.clip_grad_norm_(parameters, max_grad_norm)
    optimizer.step()
    return value
