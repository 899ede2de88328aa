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


# ----------------------------------------------------------------------------------------------------
# Quantile (distributional) value learning: QR-DQN and IQN.


class QuantileExtra(NamedTuple):
    target: torch.Tensor  # [B, M], target quantile samples
    q_tm1: torch.Tensor  # [B], mean of the chosen action's quantiles at s_tm1 (for logging)


def quantile_midpoints(num_quantiles: int, device: torch.device | None = None) -> torch.Tensor:
    """The fixed quantile fractions of QR-DQN: tau_i = (2i + 1) / (2N), i = 0..N-1, as [N] float32."""
    if num_quantiles < 1:
        raise ValueError(f"num_quantiles must be >= 1, got {num_quantiles}")
    return (torch.arange(num_quantiles, dtype=torch.float32, device=device) + 0.5) / num_quantiles


def quantile_huber_loss(
    dist_src: torch.Tensor,
    tau_src: torch.Tensor,
    dist_target: torch.Tensor,
    huber_delta: float | None = 1.0,
) -> torch.Tensor:
    r"""Quantile (Huber) regression of `dist_src`'s quantiles towards samples `dist_target`.

    Paper: Dabney, Rowland, Bellemare & Munos 2017, "Distributional Reinforcement Learning with
    Quantile Regression" (https://arxiv.org/abs/1710.10044), eq. 10.

    With u_ij = dist_target[j] - dist_src[i] and kappa = huber_delta:
        rho_ij = |tau_src[i] - 1{u_ij < 0}| * L_kappa(u_ij) / kappa   (L_kappa: the Huber loss)
        loss   = sum_i mean_j rho_ij
    and, for `huber_delta=None`, the plain quantile loss rho_ij = |tau_src[i] - 1{u_ij < 0}| * |u_ij|.
    The target is not differentiated through.

    Args:
      dist_src: predicted quantile values, [B, N].
      tau_src: the quantile fraction of each predicted value, in (0, 1), [B, N].
      dist_target: samples of the target distribution, [B, M].
      huber_delta: kappa > 0, or None for the non-smoothed quantile loss.

    Returns:
      The loss of each example, [B].
    """
    base.assert_rank_and_dtype(dist_src, 2, torch.float32, "dist_src")
    base.assert_rank_and_dtype(tau_src, 2, torch.float32, "tau_src")
    base.assert_rank_and_dtype(dist_target, 2, torch.float32, "dist_target")
    base.assert_batch_dims_equal([dist_src, tau_src, dist_target])
    if tau_src.shape != dist_src.shape:
        raise ValueError(f"tau_src {tuple(tau_src.shape)} must match dist_src {tuple(dist_src.shape)}")
    if huber_delta is not None and huber_delta <= 0:
        raise ValueError(f"huber_delta must be positive or None, got {huber_delta}")
    u = dist_target.detach().unsqueeze(1) - dist_src.unsqueeze(2)  # [B, N, M]: u[b, i, j]
    if huber_delta is None:
        magnitude = u.abs()
    else:
        magnitude = huber_loss(u, huber_delta) / huber_delta
    # The indicator is a constant: gradients flow only through the Huber term.
    weight = (tau_src.unsqueeze(2) - (u.detach() < 0).to(u.dtype)).abs()  # [B, N, M]
    return (weight * magnitude).mean(dim=2).sum(dim=1)


def quantile_q_learning(
    dist_q_tm1: torch.Tensor,
    tau_q_tm1: torch.Tensor,
    a_tm1: torch.Tensor,
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    dist_q_t_selector: torch.Tensor,
    dist_q_t: torch.Tensor,
    huber_delta: float | None = 1.0,
) -> LossOutput:
    r"""Quantile Q-learning, the loss of both QR-DQN and IQN.

    Papers: Dabney et al. 2017, "Distributional Reinforcement Learning with Quantile Regression"
    (https://arxiv.org/abs/1710.10044) with fixed fractions tau_i = (2i + 1) / 2N; Dabney, Ostrovski,
    Silver & Munos 2018, "Implicit Quantile Networks for Distributional Reinforcement Learning"
    (https://arxiv.org/abs/1806.06923) with sampled fractions.

        a*        = argmax_a mean_k dist_q_t_selector[k, a]
        target_j  = r_t + discount_t * dist_q_t[j, a*]                 j = 0..M-1
        loss      = quantile_huber_loss(dist_q_tm1[:, a_tm1], tau_q_tm1, target)

    QR-DQN passes the target network's quantiles as both `dist_q_t_selector` and `dist_q_t`; IQN
    passes the target network evaluated at K fresh fractions (selector) and at N' fractions (target).

    Args:
      dist_q_tm1: quantile values at s_tm1, [B, N, A].
      tau_q_tm1: fractions of those quantiles, [B, N].
      a_tm1: actions taken at s_tm1, [B] int64.
      r_t: (n-step) rewards, [B].
      discount_t: (n-step) discounts, 0 at a true termination, [B].
      dist_q_t_selector: quantile values at s_t used to choose a*, [B, K, A].
      dist_q_t: quantile values at s_t bootstrapped from, [B, M, A].
      huber_delta: kappa of the quantile Huber loss, None for the plain quantile loss.
    """
    base.assert_rank_and_dtype(dist_q_tm1, 3, torch.float32, "dist_q_tm1")
    base.assert_rank_and_dtype(tau_q_tm1, 2, torch.float32, "tau_q_tm1")
    base.assert_rank_and_dtype(a_tm1, 1, torch.int64, "a_tm1")
    base.assert_rank_and_dtype(r_t, 1, torch.float32, "r_t")
    base.assert_rank_and_dtype(discount_t, 1, torch.float32, "discount_t")
    base.assert_rank_and_dtype(dist_q_t_selector, 3, torch.float32, "dist_q_t_selector")
    base.assert_rank_and_dtype(dist_q_t, 3, torch.float32, "dist_q_t")
    base.assert_batch_dims_equal([dist_q_tm1, tau_q_tm1, a_tm1, r_t, discount_t, dist_q_t_selector, dist_q_t])
    num_actions = dist_q_tm1.shape[2]
    if dist_q_t.shape[2] != num_actions or dist_q_t_selector.shape[2] != num_actions:
        raise ValueError(
            f"action dimensions differ: dist_q_tm1 {tuple(dist_q_tm1.shape)}, dist_q_t_selector "
            f"{tuple(dist_q_t_selector.shape)}, dist_q_t {tuple(dist_q_t.shape)}"
        )
    with torch.no_grad():
        best_action = dist_q_t_selector.mean(dim=1).argmax(dim=1)  # [B]
        index = best_action.view(-1, 1, 1).expand(-1, dist_q_t.shape[1], 1)
        dist_target = r_t.unsqueeze(1) + discount_t.unsqueeze(1) * dist_q_t.gather(2, index).squeeze(2)
    index = a_tm1.view(-1, 1, 1).expand(-1, dist_q_tm1.shape[1], 1)
    dist_qa_tm1 = dist_q_tm1.gather(2, index).squeeze(2)  # [B, N]
    loss = quantile_huber_loss(dist_qa_tm1, tau_q_tm1, dist_target, huber_delta)
    return LossOutput(loss=loss, extra=QuantileExtra(target=dist_target, q_tm1=dist_qa_tm1.detach().mean(1)))


# --- Distributional (categorical) Q-learning: C51 and Rainbow ---------------------------------------


class CategoricalExtra(NamedTuple):
    target: torch.Tensor  # [B, K]: projected target distribution on the atoms of q_tm1
    kl: torch.Tensor  # [B]: KL(target || predicted), the priority Rainbow replays by


def categorical_projection(z_p: torch.Tensor, probs: torch.Tensor, z_q: torch.Tensor) -> torch.Tensor:
    r"""Projects distributions on atoms `z_p` onto the fixed, evenly spaced support `z_q`.

    Paper: Bellemare, Dabney & Munos 2017, "A Distributional Perspective on Reinforcement Learning"
    (https://arxiv.org/abs/1707.06887), Algorithm 1.

    Each atom z_p[b, i] is clipped to [z_q[0], z_q[-1]] and its mass split between the two support
    atoms around it, in proportion to closeness:

        out[b, j] = sum_i probs[b, i] * clamp(1 - |clip(z_p[b, i]) - z_q[j]| / dz, 0, 1),
        dz = z_q[1] - z_q[0] (in exact arithmetic; in float32 each interval's own width is used).

    (The "hat" 1 - |x - z_q[j]| / dz is what Algorithm 1's lower/upper neighbour split computes, and it
    also covers an atom that lands exactly on a support point.)

    Args:
      z_p: atoms of the distributions to project, [B, K] (or [K], shared by the batch).
      probs: their probabilities, [B, K], rows summing to 1.
      z_q: the target support, [M], evenly spaced and increasing, M >= 2.

    Returns:
      [B, M] probabilities on `z_q`.
    """
    base.assert_rank_and_dtype(z_q, 1, torch.float32, "z_q")
    base.assert_rank_and_dtype(probs, 2, torch.float32, "probs")
    if z_p.dim() == 1:
        z_p = z_p.unsqueeze(0).expand_as(probs)
    base.assert_rank_and_dtype(z_p, 2, torch.float32, "z_p")
    if z_p.shape != probs.shape:
        raise ValueError(f"z_p {tuple(z_p.shape)} and probs {tuple(probs.shape)} must have the same shape")
    if z_q.shape[0] < 2:
        raise ValueError(f"z_q needs at least 2 atoms, got {z_q.shape[0]}")
    spacing = z_q[1:] - z_q[:-1]
    if not bool((spacing > 0).all()) or not torch.allclose(spacing, spacing[0].expand_as(spacing), rtol=1e-4):
        raise ValueError("z_q must be evenly spaced and increasing")
    # Each clipped atom x lies between support atoms `lower` and `lower + 1`, which get the shares
    # (z_q[lower + 1] - x) / gap and (x - z_q[lower]) / gap of its mass, gap being that interval's own
    # width. The interval is found on the support itself (searchsorted) rather than as (x - z_q[0]) / dz:
    # the float32 gaps of linspace(-10, 10, 51) differ in their last bits (0.39999962 to 0.40000057), so a
    # position from the first gap alone puts an atom that sits exactly on a support point a hair off it,
    # leaking up to 3.4e-5 of its mass into the neighbour.
    num_atoms = z_q.shape[0]
    x = z_p.clamp(float(z_q[0]), float(z_q[-1])).contiguous()
    lower = (torch.searchsorted(z_q.contiguous(), x, right=True) - 1).clamp(0, num_atoms - 2)  # [B, K]
    z_lower, z_upper = z_q[lower], z_q[lower + 1]
    upper_weight = ((x - z_lower) / (z_upper - z_lower)).clamp(0.0, 1.0)  # 0 when x sits on z_q[lower]
    out = torch.zeros(probs.shape[0], num_atoms, dtype=probs.dtype, device=probs.device)
    out.scatter_add_(1, lower, probs * (1.0 - upper_weight))
    out.scatter_add_(1, lower + 1, probs * upper_weight)
    return out


def _check_categorical_inputs(atoms_tm1, logits_q_tm1, a_tm1, r_t, discount_t, atoms_t, logits_q_t) -> None:
    base.assert_rank_and_dtype(atoms_tm1, 1, torch.float32, "atoms_tm1")
    base.assert_rank_and_dtype(logits_q_tm1, 3, torch.float32, "logits_q_tm1")
    base.assert_rank_and_dtype(a_tm1, 1, torch.int64, "a_tm1")
    base.assert_rank_and_dtype(r_t, 1, torch.float32, "r_t")
    base.assert_rank_and_dtype(discount_t, 1, torch.float32, "discount_t")
    base.assert_rank_and_dtype(atoms_t, 1, torch.float32, "atoms_t")
    base.assert_rank_and_dtype(logits_q_t, 3, torch.float32, "logits_q_t")
    base.assert_batch_dims_equal([logits_q_tm1, a_tm1, r_t, discount_t, logits_q_t])
    if logits_q_tm1.shape[2] != atoms_tm1.shape[0] or logits_q_t.shape[2] != atoms_t.shape[0]:
        raise ValueError(
            f"atoms do not match the logits: atoms_tm1 {tuple(atoms_tm1.shape)}, logits_q_tm1 "
            f"{tuple(logits_q_tm1.shape)}, atoms_t {tuple(atoms_t.shape)}, logits_q_t {tuple(logits_q_t.shape)}"
        )


def _categorical_loss(atoms_tm1, logits_q_tm1, a_tm1, r_t, discount_t, atoms_t, probs_t_selected):
    """Cross-entropy between the projected target and the predicted distribution of a_tm1."""
    with torch.no_grad():
        target_atoms = r_t.unsqueeze(1) + discount_t.unsqueeze(1) * atoms_t.unsqueeze(0)  # [B, K]
        target = categorical_projection(target_atoms, probs_t_selected, atoms_tm1)  # [B, K]
    index = a_tm1.view(-1, 1, 1).expand(-1, 1, logits_q_tm1.shape[2])
    log_probs_tm1 = F.log_softmax(logits_q_tm1.gather(1, index).squeeze(1), dim=1)  # [B, K]
    loss = -(target * log_probs_tm1).sum(dim=1)
    with torch.no_grad():
        entropy = -(target * target.clamp(min=1e-12).log()).sum(dim=1)  # 0 * log 0 counts as 0
        kl = loss.detach() - entropy
    return LossOutput(loss=loss, extra=CategoricalExtra(target=target, kl=kl))


def categorical_dist_qlearning(
    atoms_tm1: torch.Tensor,
    logits_q_tm1: torch.Tensor,
    a_tm1: torch.Tensor,
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    atoms_t: torch.Tensor,
    logits_q_t: torch.Tensor,
) -> LossOutput:
    r"""Categorical (C51) Q-learning loss.

    Paper: Bellemare, Dabney & Munos 2017, "A Distributional Perspective on Reinforcement Learning"
    (https://arxiv.org/abs/1707.06887).

    With p_t[a] = softmax(logits_q_t[a]) and a* = argmax_a sum_k p_t[a, k] atoms_t[k]:

        target = Proj_{atoms_tm1}( r_t + discount_t * atoms_t  with probabilities p_t[a*] ),
        loss = -sum_k target[k] * log softmax(logits_q_tm1[a_tm1])[k]   (cross-entropy).

    Args:
      atoms_tm1: support of the predicted distributions, [K], evenly spaced.
      logits_q_tm1: online-network logits at s_tm1, [B, A, K].
      a_tm1: actions taken at s_tm1, [B] int64.
      r_t: (n-step) rewards, [B].
      discount_t: (n-step) discounts, 0 at termination, [B].
      atoms_t: support of the target distributions, [K'].
      logits_q_t: target-network logits at s_t, [B, A, K'].
    """
    _check_categorical_inputs(atoms_tm1, logits_q_tm1, a_tm1, r_t, discount_t, atoms_t, logits_q_t)
    with torch.no_grad():
        probs_t = F.softmax(logits_q_t, dim=2)  # [B, A, K']
        best_action = (probs_t * atoms_t).sum(dim=2).argmax(dim=1)  # [B]
        probs_t_selected = probs_t[torch.arange(probs_t.shape[0]), best_action]  # [B, K']
    return _categorical_loss(atoms_tm1, logits_q_tm1, a_tm1, r_t, discount_t, atoms_t, probs_t_selected)


def categorical_dist_double_qlearning(
    atoms_tm1: torch.Tensor,
    logits_q_tm1: torch.Tensor,
    a_tm1: torch.Tensor,
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    atoms_t: torch.Tensor,
    logits_q_t: torch.Tensor,
    q_t_selector: torch.Tensor,
) -> LossOutput:
    r"""Categorical Q-learning loss with double selection, as in Rainbow.

    Papers: Hessel et al. 2017, "Rainbow: Combining Improvements in Deep Reinforcement Learning"
    (https://arxiv.org/abs/1710.02298); van Hasselt, Guez & Silver 2015
    (https://arxiv.org/abs/1509.06461).

    Same target as `categorical_dist_qlearning`, except that the bootstrap action is chosen by the
    online network: a* = argmax_a q_t_selector[a], and the target network's distribution of a* is used.

    Args:
      atoms_tm1: support of the predicted distributions, [K], evenly spaced.
      logits_q_tm1: online-network logits at s_tm1, [B, A, K].
      a_tm1: actions taken at s_tm1, [B] int64.
      r_t: (n-step) rewards, [B].
      discount_t: (n-step) discounts, 0 at termination, [B].
      atoms_t: support of the target distributions, [K'].
      logits_q_t: target-network logits at s_t, [B, A, K'].
      q_t_selector: online-network Q-values (means) at s_t, [B, A].
    """
    _check_categorical_inputs(atoms_tm1, logits_q_tm1, a_tm1, r_t, discount_t, atoms_t, logits_q_t)
    base.assert_rank_and_dtype(q_t_selector, 2, torch.float32, "q_t_selector")
    base.assert_batch_dims_equal([logits_q_t, q_t_selector], num_dims=2)
    with torch.no_grad():
        best_action = q_t_selector.argmax(dim=1)  # [B]
        probs_t = F.softmax(logits_q_t[torch.arange(logits_q_t.shape[0]), best_action], dim=1)  # [B, K']
    return _categorical_loss(atoms_tm1, logits_q_tm1, a_tm1, r_t, discount_t, atoms_t, probs_t)


# ----------------------------------------------------------------------------------------------------
# Invertible value rescaling (R2D2, NGU, Agent57) and R2D2's sequence priorities.


def signed_hyperbolic(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    r"""The value rescaling h of R2D2: squashes large returns so one network fits games of any scale.

    Paper: Pohlen et al. 2018, "Observe and Look Further: Achieving Consistent Performance on Atari"
    (https://arxiv.org/abs/1805.11593); used by Kapturowski et al. 2019 (R2D2).

        h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x

    The eps x term keeps h strictly increasing with a Lipschitz inverse (`signed_parabolic`).

    Args:
      x: any shape, floating point.
      eps: the linear term's weight, > 0 (the papers use 1e-3).
    """
    _check_rescaling_eps(eps)
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def signed_parabolic(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    r"""The exact inverse of `signed_hyperbolic` with the same eps.

    With u = sqrt(|y| + 1), h gives |x| = u - 1 + eps (u^2 - 1), a quadratic in u, so

        h^{-1}(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1).
    """
    _check_rescaling_eps(eps)
    # The same u with the subtraction of two numbers near 1 removed ((sqrt(1 + z) - 1) = z / (sqrt(1 + z) + 1)):
    # the textbook form loses about four digits in float32 at eps = 1e-3.
    z = x.abs() + 1.0 + eps
    u = 2.0 * z / (torch.sqrt(1.0 + 4.0 * eps * z) + 1.0)
    return torch.sign(x) * (u.square() - 1.0)


def _check_rescaling_eps(eps: float) -> None:
    if not eps > 0.0:
        raise ValueError(f"eps must be > 0, got {eps}")


def sequence_priorities(abs_td_error: torch.Tensor, mask: torch.Tensor, eta: float = 0.9) -> torch.Tensor:
    r"""R2D2's priority of each replayed sequence: a mix of its max and mean absolute TD errors.

    Paper: Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed Reinforcement Learning"
    (https://openreview.net/forum?id=r1lyTjAqYX), section 3:

        p = eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t|      (eta = 0.9)

    over the steps that have a loss (the mask excludes burn-in and steps past the sequence's end).
    A mean alone washes out one large error in a long sequence; a max alone keeps replaying outliers.

    Args:
      abs_td_error: |delta|, [T, B].
      mask: 1 where a step counts, 0 elsewhere, [T, B], abs_td_error's dtype; every column needs a 1.
      eta: weight of the max, in [0, 1].

    Returns:
      priorities, [B].
    """
    base.assert_rank_and_dtype(abs_td_error, 2, None, "abs_td_error")
    base.assert_rank_and_dtype(mask, 2, abs_td_error.dtype, "mask")
    if abs_td_error.shape != mask.shape:
        raise ValueError(f"abs_td_error {tuple(abs_td_error.shape)} and mask {tuple(mask.shape)} differ")
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta must be in [0, 1], got {eta}")
    counts = mask.sum(dim=0)
    if bool((counts == 0).any()):
        raise ValueError("every sequence needs at least one step with mask 1")
    with torch.no_grad():
        masked = abs_td_error * mask  # |delta| >= 0, so a masked 0 never wins the max
        return eta * masked.max(dim=0).values + (1.0 - eta) * masked.sum(dim=0) / counts
