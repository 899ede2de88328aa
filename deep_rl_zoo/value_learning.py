"""Value-learning losses as pure functions.

Every function takes tensors in time order (`q_tm1, a_tm1, r_t, discount_t, q_t`), checks their
shapes, computes the target under `torch.no_grad()` and returns the per-example loss together with
the quantities worth logging. No optimizer, device move or logging happens here.
"""

from typing import NamedTuple

import torch
import torch.nn.functional as F

from deep_rl_zoo import base


class QExtra(NamedTuple):
    target: torch.Tensor  # [B]
    td_error: torch.Tensor  # [B]


class LossOutput(NamedTuple):
    loss: torch.Tensor  # [B], per example
    extra: NamedTuple


def huber_loss(x: torch.Tensor, delta: float = 1.0) -> torch.Tensor:
    """Elementwise Huber loss: quadratic for |x| <= delta, linear beyond (DQN's error clipping)."""
    return F.huber_loss(x, torch.zeros_like(x), reduction="none", delta=delta)


def _check_q_inputs(q_tm1, a_tm1, r_t, discount_t, q_t) -> None:
    base.assert_rank_and_dtype(q_tm1, 2, torch.float32, "q_tm1")
    base.assert_rank_and_dtype(a_tm1, 1, torch.int64, "a_tm1")
    base.assert_rank_and_dtype(r_t, 1, torch.float32, "r_t")
    base.assert_rank_and_dtype(discount_t, 1, torch.float32, "discount_t")
    base.assert_rank_and_dtype(q_t, 2, torch.float32, "q_t")
    base.assert_batch_dims_equal([q_tm1, a_tm1, r_t, discount_t, q_t])


def qlearning(
    q_tm1: torch.Tensor,
    a_tm1: torch.Tensor,
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    q_t: torch.Tensor,
    huber_delta: float | None = 1.0,
) -> LossOutput:
    r"""Q-learning loss of DQN.

    Paper: Mnih et al. 2015, "Human-level control through deep reinforcement learning"
    (https://www.nature.com/articles/nature14236); Q-learning: Watkins 1989.

    target = r_t + discount_t * max_a q_t[a]; td_error = target - q_tm1[a_tm1];
    loss = huber(td_error) (or td_error^2 / 2 when `huber_delta` is None).

    Args:
      q_tm1: Q-values at s_tm1, [B, A].
      a_tm1: actions taken at s_tm1, [B] int64.
      r_t: (n-step) rewards, [B].
      discount_t: (n-step) discounts, 0 at termination, [B].
      q_t: target-network Q-values at s_t, [B, A].
      huber_delta: Huber threshold, or None for the squared loss.
    """
    _check_q_inputs(q_tm1, a_tm1, r_t, discount_t, q_t)
    with torch.no_grad():
        target = r_t + discount_t * q_t.max(dim=1).values
    return _td_loss(q_tm1, a_tm1, target, huber_delta)


def double_qlearning(
    q_tm1: torch.Tensor,
    a_tm1: torch.Tensor,
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    q_t_value: torch.Tensor,
    q_t_selector: torch.Tensor,
    huber_delta: float | None = 1.0,
) -> LossOutput:
    r"""Double Q-learning loss: the online network selects, the target network evaluates.

    Paper: van Hasselt, Guez & Silver 2015, "Deep Reinforcement Learning with Double Q-learning"
    (https://arxiv.org/abs/1509.06461).

    target = r_t + discount_t * q_t_value[argmax_a q_t_selector[a]].

    Args:
      q_tm1: online Q-values at s_tm1, [B, A].
      a_tm1: actions, [B] int64.
      r_t: rewards, [B].
      discount_t: discounts, [B].
      q_t_value: target-network Q-values at s_t, [B, A].
      q_t_selector: online-network Q-values at s_t, [B, A].
      huber_delta: Huber threshold, or None for the squared loss.
    """
    _check_q_inputs(q_tm1, a_tm1, r_t, discount_t, q_t_value)
    base.assert_rank_and_dtype(q_t_selector, 2, torch.float32, "q_t_selector")
    base.assert_batch_dims_equal([q_t_value, q_t_selector])
    with torch.no_grad():
        best_action = q_t_selector.argmax(dim=1, keepdim=True)
        target = r_t + discount_t * q_t_value.gather(1, best_action).squeeze(1)
    return _td_loss(q_tm1, a_tm1, target, huber_delta)


def _td_loss(q_tm1, a_tm1, target, huber_delta) -> LossOutput:
    qa_tm1 = q_tm1.gather(1, a_tm1.unsqueeze(1)).squeeze(1)
    td_error = target - qa_tm1
    if huber_delta is None:
        loss = 0.5 * td_error.square()
    else:
        loss = huber_loss(td_error, huber_delta)
    return LossOutput(loss=loss, extra=QExtra(target=target, td_error=td_error.detach()))
