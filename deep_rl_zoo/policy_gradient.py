r"""Policy-gradient losses as pure functions, shared by REINFORCE, actor-critic, A2C, PPO and IMPALA.

The policy enters as the log-probability of the actions taken (and its entropy), so the same losses
serve a `Categorical` policy over discrete actions and a Gaussian over continuous ones: the caller
builds the `torch.distributions` object and passes `dist.log_prob(a_t)` / `dist.entropy()`.

Every function checks shapes, treats advantages and targets as constants (computed or detached under
`torch.no_grad()`), and returns `LossOutput(loss [B], extra)`: a per-example loss to *minimise*, which
the agent averages (and weights) itself.
"""

from typing import NamedTuple

import torch

from deep_rl_zoo import base
from deep_rl_zoo.value_learning import LossOutput


class PolicyGradientExtra(NamedTuple):
    advantage: torch.Tensor  # [B], the constant weight of the log-probability


class EntropyExtra(NamedTuple):
    entropy: torch.Tensor  # [B]


class ValueExtra(NamedTuple):
    target: torch.Tensor  # [B]
    td_error: torch.Tensor  # [B], target - v_t


class ClippedSurrogateExtra(NamedTuple):
    ratio: torch.Tensor  # [B], pi(a|s) / pi_old(a|s)
    clipped: torch.Tensor  # [B] bool, the clipped term was the (smaller) one taken
    approx_kl: torch.Tensor  # [B], (ratio - 1) - log(ratio) >= 0, an estimate of KL(pi_old || pi)


def _check_vectors(tensors: dict[str, torch.Tensor]) -> None:
    """All tensors are rank-1 floating point, of one dtype and one batch size."""
    dtype = None
    for name, x in tensors.items():
        base.assert_rank_and_dtype(x, 1, dtype, name)
        if not x.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
        dtype = x.dtype
    base.assert_batch_dims_equal(list(tensors.values()))


def policy_gradient_loss(log_prob_a_t: torch.Tensor, advantage_t: torch.Tensor) -> LossOutput:
    r"""The score-function (REINFORCE) policy-gradient loss.

    Paper: Williams 1992, "Simple statistical gradient-following algorithms for connectionist
    reinforcement learning" (https://doi.org/10.1007/BF00992696); with a baseline / critic:
    Sutton, McAllester, Singh & Mansour 1999, "Policy Gradient Methods for Reinforcement Learning with
    Function Approximation".

    loss = -log pi(a_t | s_t) * A_t, so that grad loss = -A_t * grad log pi(a_t | s_t): minimising it
    raises the probability of actions with a positive advantage. A_t gets no gradient (it is a return,
    a return minus a baseline, or a critic's advantage).

    Args:
      log_prob_a_t: log pi(a_t | s_t) of the actions taken, with gradient, [B].
      advantage_t: return or advantage of each action, [B].
    """
    _check_vectors({"log_prob_a_t": log_prob_a_t, "advantage_t": advantage_t})
    advantage_t = advantage_t.detach()
    return LossOutput(loss=-log_prob_a_t * advantage_t, extra=PolicyGradientExtra(advantage=advantage_t))


def entropy_loss(entropy_t: torch.Tensor) -> LossOutput:
    r"""Negative policy entropy: adding `beta * loss` to the total loss is an entropy bonus.

    Paper: Williams & Peng 1991, "Function optimization using connectionist reinforcement learning
    algorithms"; as used in A3C (Mnih et al. 2016, https://arxiv.org/abs/1602.01783).

    loss = -H(pi(. | s_t)); minimising it pushes the policy towards uniform, delaying premature
    determinism.

    Args:
      entropy_t: entropy of the policy at each state, with gradient, [B] (`dist.entropy()`).
    """
    _check_vectors({"entropy_t": entropy_t})
    return LossOutput(loss=-entropy_t, extra=EntropyExtra(entropy=entropy_t.detach()))


def value_loss(v_t: torch.Tensor, target_t: torch.Tensor) -> LossOutput:
    r"""Squared error of a state-value estimate against a constant target.

    loss = 0.5 * (target_t - v_t)^2; grad loss = -(target_t - v_t) * grad v_t, so v_t moves towards
    the target. The target (a Monte-Carlo, n-step or lambda return) gets no gradient.

    Args:
      v_t: V(s_t), with gradient, [B].
      target_t: return target, [B].
    """
    _check_vectors({"v_t": v_t, "target_t": target_t})
    target_t = target_t.detach()
    td_error = target_t - v_t
    return LossOutput(
        loss=0.5 * td_error.square(), extra=ValueExtra(target=target_t, td_error=td_error.detach())
    )


def clipped_surrogate_pg_loss(
    log_prob_a_t: torch.Tensor,
    old_log_prob_a_t: torch.Tensor,
    advantage_t: torch.Tensor,
    epsilon: float,
) -> LossOutput:
    r"""PPO's clipped surrogate objective, as a loss.

    Paper: Schulman, Wolski, Dhariwal, Radford & Klimov 2017, "Proximal Policy Optimization Algorithms"
    (https://arxiv.org/abs/1707.06347), equation (7).

    ratio_t = exp(log pi(a_t|s_t) - log pi_old(a_t|s_t))
    loss    = -min(ratio_t * A_t, clip(ratio_t, 1 - epsilon, 1 + epsilon) * A_t)

    Where the clipped term is the smaller one, the loss is constant in the policy and no gradient
    flows: the update stops once the ratio has moved `epsilon` in the advantage's favour.

    Args:
      log_prob_a_t: log-probabilities under the policy being optimised, with gradient, [B].
      old_log_prob_a_t: log-probabilities under the policy that acted, [B] (no gradient).
      advantage_t: advantages, [B] (no gradient).
      epsilon: clipping range, > 0.
    """
    _check_vectors(
        {"log_prob_a_t": log_prob_a_t, "old_log_prob_a_t": old_log_prob_a_t, "advantage_t": advantage_t}
    )
    if epsilon <= 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    advantage_t = advantage_t.detach()
    log_ratio = log_prob_a_t - old_log_prob_a_t.detach()
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantage_t
    clipped = torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon) * advantage_t
    with torch.no_grad():
        extra = ClippedSurrogateExtra(
            ratio=ratio.detach(),
            clipped=clipped < unclipped,
            approx_kl=(ratio - 1.0) - log_ratio,
        )
    return LossOutput(loss=-torch.minimum(unclipped, clipped), extra=extra)


def clipped_value_loss(
    v_t: torch.Tensor, old_v_t: torch.Tensor, target_t: torch.Tensor, epsilon: float
) -> LossOutput:
    r"""PPO's clipped value loss (as in the OpenAI baselines implementation of PPO).

    v_clipped = old_v_t + clip(v_t - old_v_t, -epsilon, epsilon)
    loss      = 0.5 * max((target_t - v_t)^2, (target_t - v_clipped)^2)

    Args:
      v_t: V(s_t) of the critic being optimised, with gradient, [B].
      old_v_t: V(s_t) of the critic when the data was collected, [B] (no gradient).
      target_t: return target, [B] (no gradient).
      epsilon: how far the value may move from `old_v_t` before its gradient stops, > 0.
    """
    _check_vectors({"v_t": v_t, "old_v_t": old_v_t, "target_t": target_t})
    if epsilon <= 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    target_t, old_v_t = target_t.detach(), old_v_t.detach()
    v_clipped = old_v_t + torch.clamp(v_t - old_v_t, -epsilon, epsilon)
    loss = 0.5 * torch.maximum((target_t - v_t).square(), (target_t - v_clipped).square())
    return LossOutput(loss=loss, extra=ValueExtra(target=target_t, td_error=(target_t - v_t).detach()))
