r"""Soft actor-critic losses for discrete actions, as pure functions.

Paper: Christodoulou 2019, "Soft Actor-Critic for Discrete Action Settings"
(https://arxiv.org/abs/1910.07207). With a finite action set the policy outputs every probability
pi(.|s), so each expectation over actions is an exact sum and no reparameterisation is needed:

    soft value     V(s_t)  = sum_a pi(a|s_t) [min(Q1', Q2')(s_t, a) - alpha log pi(a|s_t)]     (target nets)
    critic target  y       = r_t + discount_t V(s_t)
    policy loss    J_pi    = sum_a pi(a|s_tm1) [alpha log pi(a|s_tm1) - min(Q1, Q2)(s_tm1, a)]
    temperature    J_alpha = sum_a pi(a|s_tm1) [-alpha (log pi(a|s_tm1) + H_target)]
                           = alpha (H(pi(.|s_tm1)) - H_target)       (the paper's eq. 11, alpha = exp log_alpha)

Arguments follow the time-suffix convention (`_tm1`: the sampled state s_{t-1} and action; `_t`: the
next state). Each function returns `LossOutput(loss [B], extra)`; the agent averages.
"""

from typing import NamedTuple

import torch

from deep_rl_zoo import base
from deep_rl_zoo.value_learning import LossOutput


class SoftQExtra(NamedTuple):
    target: torch.Tensor  # [B], y
    td_error_1: torch.Tensor  # [B], y - Q1(s_tm1, a_tm1)
    td_error_2: torch.Tensor  # [B], y - Q2(s_tm1, a_tm1)


class SoftPolicyExtra(NamedTuple):
    entropy: torch.Tensor  # [B], H(pi(.|s_tm1))


def _check_logits(tensors: dict[str, torch.Tensor]) -> None:
    for name, x in tensors.items():
        base.assert_rank_and_dtype(x, 2, torch.float32, name)
    shapes = {tuple(x.shape) for x in tensors.values()}
    if len(shapes) > 1:
        raise ValueError(f"{', '.join(tensors)} must have one shape [B, A], got {sorted(shapes)}")


def soft_q_learning(
    q1_tm1: torch.Tensor,
    q2_tm1: torch.Tensor,
    a_tm1: torch.Tensor,
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    target_q1_t: torch.Tensor,
    target_q2_t: torch.Tensor,
    log_pi_t: torch.Tensor,
    alpha: float,
) -> LossOutput:
    r"""Twin soft Q-learning towards a target that averages over pi's actions exactly, with the
    minimum of the two target networks (clipped double Q, as in continuous SAC).

    y    = r_t + discount_t * sum_a pi(a|s_t) [min(Q1', Q2')(s_t, a) - alpha log pi(a|s_t)]
    loss = 0.5 (Q1(s_tm1, a_tm1) - y)^2 + 0.5 (Q2(s_tm1, a_tm1) - y)^2

    Args:
      q1_tm1, q2_tm1: both online Q-networks at s_tm1, with gradient, [B, A].
      a_tm1: actions taken, int64 [B].
      r_t: rewards, float32 [B].
      discount_t: gamma, 0 when s_t is terminal (not at a time-limit truncation), float32 [B].
      target_q1_t, target_q2_t: both target networks at s_t, [B, A].
      log_pi_t: log pi(.|s_t) of the current policy, [B, A].
      alpha: the entropy temperature.
    """
    _check_logits(
        {"q1_tm1": q1_tm1, "q2_tm1": q2_tm1, "target_q1_t": target_q1_t, "target_q2_t": target_q2_t,
         "log_pi_t": log_pi_t}
    )  # fmt: skip
    base.assert_rank_and_dtype(a_tm1, 1, torch.int64, "a_tm1")
    base.assert_rank_and_dtype(r_t, 1, torch.float32, "r_t")
    base.assert_rank_and_dtype(discount_t, 1, torch.float32, "discount_t")
    base.assert_batch_dims_equal([q1_tm1, a_tm1, r_t, discount_t])
    with torch.no_grad():
        soft_q_t = torch.minimum(target_q1_t, target_q2_t) - alpha * log_pi_t
        target = r_t + discount_t * (log_pi_t.exp() * soft_q_t).sum(-1)
    q1 = q1_tm1.gather(1, a_tm1.unsqueeze(1)).squeeze(1)
    q2 = q2_tm1.gather(1, a_tm1.unsqueeze(1)).squeeze(1)
    td_1, td_2 = target - q1, target - q2
    return LossOutput(
        loss=0.5 * td_1.square() + 0.5 * td_2.square(),
        extra=SoftQExtra(target=target, td_error_1=td_1.detach(), td_error_2=td_2.detach()),
    )


def soft_policy_loss(
    log_pi_tm1: torch.Tensor, q1_tm1: torch.Tensor, q2_tm1: torch.Tensor, alpha: float
) -> LossOutput:
    r"""The policy's KL to the Boltzmann distribution of min(Q1, Q2), up to a constant.

    loss = sum_a pi(a|s_tm1) [alpha log pi(a|s_tm1) - min(Q1, Q2)(s_tm1, a)]

    The Q-values are constants here: only the policy moves.

    Args:
      log_pi_tm1: log pi(.|s_tm1), with gradient, [B, A].
      q1_tm1, q2_tm1: both online Q-networks at s_tm1, [B, A].
      alpha: the entropy temperature.
    """
    _check_logits({"log_pi_tm1": log_pi_tm1, "q1_tm1": q1_tm1, "q2_tm1": q2_tm1})
    q_tm1 = torch.minimum(q1_tm1, q2_tm1).detach()
    pi_tm1 = log_pi_tm1.exp()
    entropy = -(pi_tm1 * log_pi_tm1).sum(-1)
    return LossOutput(
        loss=(pi_tm1 * (alpha * log_pi_tm1 - q_tm1)).sum(-1), extra=SoftPolicyExtra(entropy=entropy.detach())
    )


def temperature_loss(log_alpha: torch.Tensor, entropy_tm1: torch.Tensor, target_entropy: float) -> LossOutput:
    r"""Automatic entropy adjustment: the paper's eq. 11, minimised through log alpha.

    loss = alpha * (H(pi(.|s_tm1)) - H_target),   alpha = exp(log_alpha)

    Its gradient with respect to log alpha, alpha * (H - H_target), lowers alpha while the policy's
    entropy is above the target and raises it below. It shrinks with alpha, so together with Adam's
    epsilon it slows the fall of a small temperature; the authors' code differentiated log_alpha *
    (H - H_target) instead, whose gradient does not shrink, and on Pong (target 0.89 log |A|) that drove
    alpha from 1 to 4e-7 by 240k env steps while the entropy was still above its target, then let the
    entropy fall far below it before alpha climbed back (docs/agents/sac.md).

    Args:
      log_alpha: the learned log temperature, with gradient, scalar.
      entropy_tm1: H(pi(.|s_tm1)), [B] (a constant here).
      target_entropy: H_target, e.g. a fraction of log |A|.
    """
    base.assert_rank_and_dtype(log_alpha, 0, None, "log_alpha")
    base.assert_rank_and_dtype(entropy_tm1, 1, torch.float32, "entropy_tm1")
    return LossOutput(
        loss=log_alpha.exp() * (entropy_tm1.detach() - target_entropy),
        extra=SoftPolicyExtra(entropy=entropy_tm1.detach()),
    )
