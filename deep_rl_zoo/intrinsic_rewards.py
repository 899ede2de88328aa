r"""Intrinsic rewards of curiosity-driven exploration and the arithmetic around them, as pure functions:
RND's prediction error and its scaling by the running std of the non-episodic intrinsic return, ICM's
inverse and forward losses, and the two-stream advantage of PPO-RND.

Papers:
- RND: Burda, Edwards, Storkey & Klimov 2018, "Exploration by Random Network Distillation"
  (https://arxiv.org/abs/1810.12894).
- ICM: Pathak, Agrawal, Efros & Darrell 2017, "Curiosity-driven Exploration by Self-supervised
  Prediction" (https://arxiv.org/abs/1705.05363).

Time layout: the functions take unroll tensors [T, B] as `unrolls.py` lays them out; pair t is the
transition s_t -> s_{t+1}, `valid_t` is False for the pair from an episode's last state to the next
episode's first state (a reset, not a step in time), and rewards r_t are received on arriving in s_{t+1}.

Observation normalisation (RND's running mean / std per input feature, clipped to [-5, 5]) is
`normalizers.ObservationNormalizer(shape, clip=5.0)`; the one stateful helper here is
`IntrinsicRewardNormalizer`, a thin holder of the running statistics these functions update.
"""

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from deep_rl_zoo import base, multistep
from deep_rl_zoo.value_learning import LossOutput


def _check_unroll(tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
    """Every tensor is [T, B] of `dtype`, all of one shape."""
    for name, x in tensors.items():
        base.assert_rank_and_dtype(x, 2, dtype, name)
    shapes = {name: tuple(x.shape) for name, x in tensors.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"unroll tensors differ in shape: {shapes}")


# ----------------------------------------------------------------------------------------------------
# RND


def rnd_prediction_error(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    r"""RND's novelty of an observation: the predictor's squared error against the fixed random target.

    e(x) = mean_f (f_hat(x)_f - f(x)_f)^2

    Burda et al. write ||f_hat(x) - f(x)||^2; the mean over the F features (their released code) differs
    by the constant F only, which the intrinsic reward's scaling by its return's std removes anyway.
    The same per-example error is the predictor's loss (the target gets no gradient).

    Args:
      prediction: f_hat(x), with gradient, [B, F].
      target: f(x) of the fixed random network, [B, F].

    Returns:
      e(x), [B].
    """
    base.assert_rank_and_dtype(prediction, 2, None, "prediction")
    base.assert_rank_and_dtype(target, 2, prediction.dtype, "target")
    if prediction.shape != target.shape:
        raise ValueError(f"prediction {tuple(prediction.shape)} and target {tuple(target.shape)} differ")
    return (prediction - target.detach()).square().mean(-1)


@torch.no_grad()
def discounted_return_filter(r_t: torch.Tensor, discount_t: torch.Tensor, g_0: torch.Tensor) -> torch.Tensor:
    r"""The running discounted return of a reward stream, carried across unrolls (RND's "reward forward
    filter"):

        g_t = discount_t * g_{t-1} + r_t,     g_{-1} = g_0 (where the previous unroll left off)

    RND's intrinsic stream is non-episodic: `discount_t` is gamma_I everywhere inside episodes and 1 at
    the reset pairs (the stream runs on through a game over, see `two_stream_advantages`).

    Args:
      r_t: rewards, [T, B].
      discount_t: per-step discounts, [T, B].
      g_0: the return before the first step, [B].

    Returns:
      g, [T, B]; g[-1] is the next unroll's g_0.
    """
    _check_unroll({"r_t": r_t, "discount_t": discount_t}, r_t.dtype)
    base.assert_rank_and_dtype(g_0, 1, r_t.dtype, "g_0")
    if g_0.shape[0] != r_t.shape[1]:
        raise ValueError(f"g_0 must have shape [B] = [{r_t.shape[1]}], got {tuple(g_0.shape)}")
    returns = torch.empty_like(r_t)
    g = g_0
    for t in range(r_t.shape[0]):
        g = discount_t[t] * g + r_t[t]
        returns[t] = g
    return returns


def update_running_moments(
    mean: float,
    var: float,
    count: float,
    batch_mean: float,
    batch_var: float,
    batch_count: int,
) -> tuple[float, float, float]:
    r"""Merges a batch's mean and (population) variance into running ones (Chan et al.'s parallel update):

        N = n + batch_count,   d = batch_mean - mean            (n = count)
        mean' = mean + d * batch_count / N
        var'  = (var * n + batch_var * batch_count + d^2 * n * batch_count / N) / N,   count' = N

    Every value ever seen weighs the same, as in Burda et al.'s statistics.
    """
    n = count
    total = n + batch_count
    delta = batch_mean - mean
    new_mean = mean + delta * batch_count / total
    m2 = var * n + batch_var * batch_count + delta**2 * n * batch_count / total
    return new_mean, m2 / total, total


def scale_by_return_std(r_t: torch.Tensor, return_var: float, epsilon: float = 1e-8) -> torch.Tensor:
    r"""r_t / sqrt(Var[g] + epsilon): rewards divided by the running std of their discounted return.

    Not re-centred (a constant shift of the reward would change which behaviour is best) and not clipped,
    as Burda et al.'s intrinsic reward.
    """
    if return_var < 0:
        raise ValueError(f"return_var must be >= 0, got {return_var}")
    return r_t / float(np.sqrt(return_var + epsilon))


class IntrinsicRewardNormalizer:
    """Holds the running statistics of RND's reward scaling: one running discounted intrinsic return per
    actor stream, and the running variance of all those returns (`update_running_moments`). Saved and
    restored whole, so a resumed run scales exactly as before.
    """

    def __init__(self, num_streams: int, discount: float, epsilon: float = 1e-8):
        self._discount = discount
        self._epsilon = epsilon
        self._returns = torch.zeros(num_streams, dtype=torch.float64)
        self._mean, self._var, self._count = 0.0, 1.0, 1e-4  # gymnasium's start: no 0-division

    @property
    def return_std(self) -> float:
        return float(np.sqrt(self._var + self._epsilon))

    def normalize(self, r_t: torch.Tensor, valid_t: torch.Tensor, streams: list[int]) -> torch.Tensor:
        """Updates the statistics with an unroll batch's intrinsic rewards, then returns them scaled.

        Args:
          r_t: raw intrinsic rewards [T, B] (0 at reset pairs).
          valid_t: pair t is a transition, [T, B] bool; reset pairs get discount 1.
          streams: the actor of each column, so every actor's return continues its own stream.
        """
        discount_t = torch.where(valid_t.cpu(), self._discount, 1.0).double()
        returns = discounted_return_filter(r_t.detach().cpu().double(), discount_t, self._returns[streams])
        self._returns[streams] = returns[-1]
        self._mean, self._var, self._count = update_running_moments(
            self._mean,
            self._var,
            self._count,
            float(returns.mean()),
            float(returns.var(unbiased=False)),
            returns.numel(),
        )
        return scale_by_return_std(r_t, self._var, self._epsilon)

    def state_dict(self) -> dict:
        return {"returns": self._returns.clone(), "mean": self._mean, "var": self._var, "count": self._count}

    def load_state_dict(self, state: dict) -> None:
        self._returns = state["returns"].double().clone()
        self._mean, self._var, self._count = state["mean"], state["var"], state["count"]


class TwoStreamAdvantages(NamedTuple):
    advantage: torch.Tensor  # [T, B], coef_E * A_E + coef_I * A_I: what the policy climbs
    extrinsic_target: torch.Tensor  # [T, B], target of the extrinsic value head
    intrinsic_target: torch.Tensor  # [T, B], target of the intrinsic value head
    extrinsic_advantage: torch.Tensor  # [T, B]
    intrinsic_advantage: torch.Tensor  # [T, B]


@torch.no_grad()
def two_stream_advantages(
    r_ext_t: torch.Tensor,
    r_int_t: torch.Tensor,
    terminated_t: torch.Tensor,
    truncated_t: torch.Tensor,
    valid_t: torch.Tensor,
    v_ext: torch.Tensor,
    v_int: torch.Tensor,
    *,
    extrinsic_discount: float,
    intrinsic_discount: float,
    lambda_: float,
    extrinsic_coef: float,
    intrinsic_coef: float,
) -> TwoStreamAdvantages:
    r"""RND's combined advantage: an episodic extrinsic and a non-episodic intrinsic GAE, each against
    its own value head, mixed with their coefficients (Burda et al. 2018, section 2.3; their Atari
    setting is coef_E = 2, coef_I = 1, gamma_E = 0.999, gamma_I = 0.99, lambda = 0.95).

    Extrinsic (episodic, as `unrolls.advantages_and_returns`):
        r'_t = r_ext_t + gamma_E * V_E(s_{t+1})  if s_{t+1} was truncated (a time limit still bootstraps)
        d_t  = 0 if s_{t+1} ended the episode (terminated or truncated), else gamma_E
    Intrinsic (non-episodic: a game over does not end the intrinsic return):
        d_t  = gamma_I on every transition, 1 on the reset pair s_last -> s_first of the next episode,
        whose reward is 0: the stream runs from the last state of one game straight into the next.
    Then A_X = GAE(r_X, d_X, lambda, V_X), target_X = A_X + V_X(s_t), and
        A = coef_E * A_E + coef_I * A_I.
    Entries at reset pairs (valid_t False) are meaningless and must be masked by the caller.

    Args:
      r_ext_t, r_int_t: rewards on arriving in s_{t+1}, [T, B] (the intrinsic ones already scaled).
      terminated_t, truncated_t: s_{t+1} is terminal / was cut by a time limit, [T, B] bool.
      valid_t: pair t is a transition (s_t did not end an episode), [T, B] bool.
      v_ext, v_int: V_E(s_0..s_T), V_I(s_0..s_T), [T + 1, B].
    """
    _check_unroll({"r_ext_t": r_ext_t, "r_int_t": r_int_t}, r_ext_t.dtype)
    _check_unroll({"terminated_t": terminated_t, "truncated_t": truncated_t, "valid_t": valid_t}, torch.bool)
    if terminated_t.shape != r_ext_t.shape:
        raise ValueError(f"masks {tuple(terminated_t.shape)} and rewards {tuple(r_ext_t.shape)} differ")
    for name, values in (("v_ext", v_ext), ("v_int", v_int)):
        base.assert_rank_and_dtype(values, 2, r_ext_t.dtype, name)
        if values.shape != (r_ext_t.shape[0] + 1, r_ext_t.shape[1]):
            raise ValueError(
                f"{name} must have shape [T + 1, B] = {(r_ext_t.shape[0] + 1, r_ext_t.shape[1])}, "
                f"got {tuple(values.shape)}"
            )
    for name, discount in (
        ("extrinsic_discount", extrinsic_discount),
        ("intrinsic_discount", intrinsic_discount),
    ):
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {discount}")
    ended = terminated_t | truncated_t
    bootstrap_at_truncation = (truncated_t & ~terminated_t).to(r_ext_t.dtype) * extrinsic_discount * v_ext[1:]
    ext_discount_t = extrinsic_discount * (~ended).to(r_ext_t.dtype)
    a_ext = multistep.generalized_advantage_estimation(
        r_ext_t + bootstrap_at_truncation, ext_discount_t, lambda_, v_ext
    )
    int_discount_t = torch.where(valid_t, intrinsic_discount, 1.0).to(r_int_t.dtype)
    a_int = multistep.generalized_advantage_estimation(
        torch.where(valid_t, r_int_t, 0.0), int_discount_t, lambda_, v_int
    )
    return TwoStreamAdvantages(
        advantage=extrinsic_coef * a_ext + intrinsic_coef * a_int,
        extrinsic_target=a_ext + v_ext[:-1],
        intrinsic_target=a_int + v_int[:-1],
        extrinsic_advantage=a_ext,
        intrinsic_advantage=a_int,
    )


# ----------------------------------------------------------------------------------------------------
# ICM


class IcmExtra(NamedTuple):
    forward_error: torch.Tensor  # [B], 0.5 * ||phi_hat(s_{t+1}) - phi(s_{t+1})||^2 (no gradient)
    inverse_loss: torch.Tensor  # [B], -log p(a_t | s_t, s_{t+1}) (no gradient)
    intrinsic_reward: torch.Tensor  # [B], eta * forward_error


def icm_loss(
    predicted_phi_tp1: torch.Tensor,
    phi_tp1: torch.Tensor,
    inverse_logits: torch.Tensor,
    a_t: torch.Tensor,
    *,
    beta: float,
    eta: float,
) -> LossOutput:
    r"""The Intrinsic Curiosity Module's loss and its intrinsic reward (Pathak et al. 2017, eqs. 2-7).

        L_F = 0.5 * ||phi_hat(s_{t+1}) - phi(s_{t+1})||^2      (forward model, in feature space)
        L_I = -log p_hat(a_t | phi(s_t), phi(s_{t+1}))          (inverse model, cross-entropy)
        loss = (1 - beta) * L_I + beta * L_F
        r^i_t = eta * L_F = eta / 2 * ||phi_hat - phi||^2       (eq. 6, without gradient)

    Both terms reach the embedding phi (the paper optimises all three parts jointly); L_F's gradient
    also reaches phi(s_{t+1}) itself, as in the paper's released code.

    Args:
      predicted_phi_tp1: the forward model's phi_hat(s_{t+1}) from phi(s_t) and a_t, [B, F].
      phi_tp1: the embedding phi(s_{t+1}), [B, F].
      inverse_logits: the inverse model's logits over actions from (phi(s_t), phi(s_{t+1})), [B, A].
      a_t: actions taken, [B] int64.
      beta: weight of the forward loss against the inverse loss, in [0, 1] (paper: 0.2).
      eta: scale of the intrinsic reward, >= 0.
    """
    base.assert_rank_and_dtype(predicted_phi_tp1, 2, None, "predicted_phi_tp1")
    base.assert_rank_and_dtype(phi_tp1, 2, predicted_phi_tp1.dtype, "phi_tp1")
    base.assert_rank_and_dtype(inverse_logits, 2, predicted_phi_tp1.dtype, "inverse_logits")
    base.assert_rank_and_dtype(a_t, 1, torch.int64, "a_t")
    if predicted_phi_tp1.shape != phi_tp1.shape:
        raise ValueError(f"predicted_phi_tp1 {tuple(predicted_phi_tp1.shape)} and phi_tp1 differ")
    base.assert_batch_dims_equal([predicted_phi_tp1, inverse_logits, a_t])
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    if eta < 0:
        raise ValueError(f"eta must be >= 0, got {eta}")
    forward_loss = 0.5 * (predicted_phi_tp1 - phi_tp1).square().sum(-1)
    inverse_loss = F.cross_entropy(inverse_logits, a_t, reduction="none")
    with torch.no_grad():
        extra = IcmExtra(
            forward_error=forward_loss.detach(),
            inverse_loss=inverse_loss.detach(),
            intrinsic_reward=eta * forward_loss.detach(),
        )
    return LossOutput(loss=(1.0 - beta) * inverse_loss + beta * forward_loss, extra=extra)
