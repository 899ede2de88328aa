"""Numpy forward passes of the small MLP policies, for choosing one action at a time on the CPU.

Why hand-written: acting feeds the network one observation per env step. For the classic-control MLP
(4 -> 64 -> 64 -> 2) the arithmetic takes a few microseconds, but every torch operator costs several
microseconds of dispatch, so a forward pass costs ~75 us even when recorded by `torch.jit.trace` —
more than the env step itself, and most of an actor's time. The same layers in numpy take ~6 us (one
run, 2-core machine). Nothing in torch removes the per-operator cost without a compile step of seconds
per process, so the few module types the MLP policies are built from are mirrored here; anything else
(conv torsos, LSTMs, parameters on a GPU) returns None and the caller keeps using torch.

The functions read the parameters through numpy views of the very same memory, so in-place updates
(optimizer steps, `load_state_dict`, `SharedParameters.copy_to`) are seen at once. Replacing a
parameter tensor (moving the module to another device, assigning a new `nn.Parameter`) is not: build
the function after the module has its final place.
"""

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from deep_rl_zoo.networks import policy
from deep_rl_zoo.normalizers import NormalizedNetwork, ObservationNormalizer

Layer = Callable[[np.ndarray], np.ndarray]


def policy_forward(module: nn.Module) -> Callable[[np.ndarray], Any] | None:
    """A numpy version of a policy network's action parameters, or None if `module` has parts this file
    does not mirror.

    Args:
      module: a categorical or Gaussian MLP policy, an actor-critic holding one, optionally behind an
        observation normaliser (`NormalizedNetwork`); its parameters on the CPU in float32.

    Returns:
      f(observation [*obs_shape]) -> logits [A] for a categorical policy, or (mean [D], log_std [D])
      for a Gaussian one: what the torch module computes for a batch of one, without the batch axis.
    """
    if any(t.device.type != "cpu" for t in module.state_dict().values()):
        return None
    try:
        return _policy(module)
    except _Unsupported:
        return None


class _Unsupported(Exception):
    pass


def _policy(module: nn.Module) -> Callable[[np.ndarray], Any]:
    if isinstance(module, NormalizedNetwork):
        normalize, inner = _layer(module.normalizer), _policy(module.network)
        return lambda x: inner(normalize(x))
    if isinstance(module, (policy.SeparateActorCritic, policy.GaussianActorCritic)):
        return _policy(module.actor)  # acting needs no critic
    if isinstance(module, (policy.MlpActor, policy.MlpActorCritic)):
        torso, head = _layer(module.torso), _layer(module.policy_head)
        return lambda x: head(torso(np.asarray(x, dtype=np.float32)))
    if isinstance(module, policy.GaussianMlpActor):
        torso, head = _layer(module.torso), _layer(module.mean_head)
        log_std = _view(module.log_std)
        return lambda x: (head(torso(np.asarray(x, dtype=np.float32))), log_std)
    raise _Unsupported(type(module).__name__)


def _layer(module: nn.Module) -> Layer:
    if isinstance(module, nn.Sequential):
        layers = [_layer(m) for m in module]

        def sequential(x: np.ndarray) -> np.ndarray:
            for layer in layers:
                x = layer(x)
            return x

        return sequential
    if isinstance(module, nn.Linear):
        weight_t = _view(module.weight).T  # x @ W^T + b, as nn.Linear
        bias = _view(module.bias) if module.bias is not None else np.float32(0.0)
        return lambda x: x @ weight_t + bias
    if isinstance(module, nn.Tanh):
        return np.tanh
    if isinstance(module, nn.ReLU):
        return lambda x: np.maximum(x, np.float32(0.0))
    if isinstance(module, nn.Identity):
        return lambda x: x
    if isinstance(module, ObservationNormalizer):
        mean, var = _view(module.mean), _view(module.var)
        clip, epsilon = module.clip, module.epsilon
        return lambda x: np.clip((x - mean) / np.sqrt(var + epsilon), -clip, clip).astype(np.float32)
    raise _Unsupported(type(module).__name__)


def _view(tensor: torch.Tensor) -> np.ndarray:
    if tensor.dtype not in (torch.float32, torch.float64):
        raise _Unsupported(str(tensor.dtype))
    return tensor.detach().numpy()  # shares memory with the tensor: in-place updates show through
