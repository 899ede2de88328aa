r"""V-trace: off-policy value targets and policy-gradient advantages from truncated importance weights.

Paper: Espeholt, Soyer, Munos, Simonyan, Mnih, Ward, Doron, Firoiu, Harley, Dunning, Legg &
Kavukcuoglu 2018, "IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures" (https://arxiv.org/abs/1802.01561), section 4.

An actor acts with a behaviour policy mu (the parameters it last pulled); the learner holds pi. For
the action a_t taken in s_t, rho_t = pi(a_t | s_t) / mu(a_t | s_t). With the layout of `multistep`
(`values` has one more row than the rest; `r_t[t]`, `discount_t[t]` belong to s_t -> s_{t+1}):

    delta_t = min(rho_bar, rho_t) * (r_t + discount_t * V(s_{t+1}) - V(s_t))
    c_t     = lambda * min(c_bar, rho_t)
    v_t     = V(s_t) + delta_t + discount_t * c_t * (v_{t+1} - V(s_{t+1})),    v_T = V(s_T)
    A_t     = min(rho_bar_pg, rho_t) * (r_t + discount_t * v_{t+1} - V(s_t))

v_t is the value target (equation 1 of the paper, in its recursive form, remark 1); A_t the advantage
that weighs grad log pi(a_t | s_t) (section 4.2). rho_bar fixes which value function v converges to
(that of a policy between mu and pi); c_bar only controls how fast the traces are cut, i.e. the
variance. When mu = pi (rho = 1) and rho_bar, c_bar >= 1, lambda = 1, v_t is the discounted return
bootstrapped from V(s_T): the on-policy n-step return of A3C.

Discounts are 0 only at a true termination; a truncation inside an unroll is expressed as in
`multistep` (bootstrap folded into the reward, discount 0).
"""

from typing import NamedTuple

import torch

from deep_rl_zoo import base


class VTraceOutput(NamedTuple):
    vs: torch.Tensor  # [T, B], v_t, the value targets
    pg_advantages: torch.Tensor  # [T, B], A_t, the weights of grad log pi(a_t | s_t)
    clipped_rho: torch.Tensor  # [T, B], min(rho_bar, rho_t), for statistics


@torch.no_grad()
def vtrace(
    values: torch.Tensor,
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    log_rho_t: torch.Tensor,
    *,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    pg_rho_bar: float = 1.0,
    lambda_: float = 1.0,
) -> VTraceOutput:
    r"""V-trace value targets and policy-gradient advantages of an unroll (see the module docstring).

    Args:
      values: V(s_0) ... V(s_T) under the learner's current parameters, [T + 1, B].
      r_t: rewards, r_t[t] received on arriving in s_{t+1}, [T, B].
      discount_t: gamma, or 0 where s_{t+1} is terminal, [T, B].
      log_rho_t: log pi(a_t | s_t) - log mu(a_t | s_t), [T, B].
      rho_bar: clipping threshold of the importance weights in the value targets (> 0).
      c_bar: clipping threshold of the trace coefficients c_t (> 0); at most rho_bar in the paper.
      pg_rho_bar: clipping threshold of the importance weights in the policy-gradient advantages.
      lambda_: extra trace cutting, c_t = lambda * min(c_bar, rho_t), in [0, 1].

    Returns:
      VTraceOutput(vs, pg_advantages, clipped_rho), each [T, B], without gradient.
    """
    for name, x in (("r_t", r_t), ("discount_t", discount_t), ("log_rho_t", log_rho_t), ("values", values)):
        base.assert_rank_and_dtype(x, 2, r_t.dtype, name)
    if not r_t.is_floating_point():
        raise ValueError(f"r_t must be a floating-point tensor, got {r_t.dtype}")
    if discount_t.shape != r_t.shape or log_rho_t.shape != r_t.shape:
        raise ValueError(
            f"r_t {tuple(r_t.shape)}, discount_t {tuple(discount_t.shape)} and log_rho_t "
            f"{tuple(log_rho_t.shape)} must have one shape [T, B]"
        )
    if values.shape != (r_t.shape[0] + 1, r_t.shape[1]):
        raise ValueError(
            f"values must have shape [T + 1, B] = {(r_t.shape[0] + 1, r_t.shape[1])}, got {tuple(values.shape)}"
        )
    for name, threshold in (("rho_bar", rho_bar), ("c_bar", c_bar), ("pg_rho_bar", pg_rho_bar)):
        if not threshold > 0:
            raise ValueError(f"{name} must be positive, got {threshold}")
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda_ must be in [0, 1], got {lambda_}")
    values, r_t, discount_t, log_rho_t = (x.detach() for x in (values, r_t, discount_t, log_rho_t))

    rho = torch.exp(log_rho_t)
    clipped_rho = torch.clamp(rho, max=rho_bar)
    c = lambda_ * torch.clamp(rho, max=c_bar)
    deltas = clipped_rho * (r_t + discount_t * values[1:] - values[:-1])  # all T steps at once
    # Backwards over time: (v_t - V(s_t)) = delta_t + discount_t * c_t * (v_{t+1} - V(s_{t+1})).
    corrections = torch.empty_like(r_t)
    correction = torch.zeros_like(values[-1])
    for t in reversed(range(r_t.shape[0])):
        correction = deltas[t] + discount_t[t] * c[t] * correction
        corrections[t] = correction
    vs = values[:-1] + corrections
    vs_tp1 = torch.cat([vs[1:], values[-1:]], dim=0)  # v_{t+1}, with v_T = V(s_T)
    pg_advantages = torch.clamp(rho, max=pg_rho_bar) * (r_t + discount_t * vs_tp1 - values[:-1])
    return VTraceOutput(vs=vs, pg_advantages=pg_advantages, clipped_rho=clipped_rho)
