r"""Multi-step return targets and advantages as pure functions of time-major [T, B] tensors.

Every function here takes an unroll of T steps for B independent sequences, laid out like this
(index t runs over the rows of the [T, B] inputs; `values` has one more row than the rest):

    state      s_0        s_1        s_2     ...    s_{T-1}        s_T
    values     values[0]  values[1]  values[2] ...  values[T-1]    values[T]   (bootstrap)
                  |  a_0     |  a_1     |              |  a_{T-1}
                  +--------->+--------->+ ... ---------+--------->
    reward     r_t[0]     r_t[1]      ...    r_t[T-1]          (received on arriving in s_{t+1})
    discount   discount_t[0] ...             discount_t[T-1]   (gamma, or 0 if s_{t+1} is terminal)

`r_t[t]` and `discount_t[t]` belong to the transition s_t -> s_{t+1}. `discount_t[t]` is `gamma` for
an ordinary step and 0 when s_{t+1} is a true terminal state (gymnasium's `terminated`). So:

- termination at s_{t+1}: `discount_t[t] = 0`; nothing is bootstrapped past it, whatever
  `values[t+1]` holds (e.g. the first state of the next episode).
- truncation (time limit, or simply the end of the unroll) at s_T: `discount_t[T-1] = gamma` and
  `values[T] = V(s_T)`, the critic's value of the last, cut-off state: the return is bootstrapped.
- a truncation *inside* an unroll, when the env has already been reset, is expressed by folding the
  bootstrap into the reward, `r_t[t] = r + gamma * V(s_truncated)`, and setting `discount_t[t] = 0`.
  (Our single-process agents never need this: they end an unroll at the end of every episode.)
- a Monte-Carlo return over a whole terminated episode is `discounted_returns` with a zero bootstrap.

Targets carry no gradient: every function runs under `torch.no_grad()`. The recursions run backwards
over time with each step vectorised over the batch (O(T) tensor operations, O(T * B) memory), which
works for episodes of any length; tests compare every function against a naive double loop.
"""

from typing import NamedTuple

import torch

from deep_rl_zoo import base, value_learning


def _check_time_major(r_t: torch.Tensor, discount_t: torch.Tensor, values: torch.Tensor | None) -> None:
    base.assert_rank_and_dtype(r_t, 2, None, "r_t")
    base.assert_rank_and_dtype(discount_t, 2, r_t.dtype, "discount_t")
    if not r_t.is_floating_point():
        raise ValueError(f"r_t must be a floating-point tensor, got {r_t.dtype}")
    if r_t.shape != discount_t.shape:
        raise ValueError(f"r_t {tuple(r_t.shape)} and discount_t {tuple(discount_t.shape)} differ in shape")
    if values is not None:
        base.assert_rank_and_dtype(values, 2, r_t.dtype, "values")
        if values.shape != (r_t.shape[0] + 1, r_t.shape[1]):
            raise ValueError(
                f"values must have shape [T + 1, B] = {(r_t.shape[0] + 1, r_t.shape[1])}, "
                f"got {tuple(values.shape)}"
            )


@torch.no_grad()
def discounted_returns(
    r_t: torch.Tensor, discount_t: torch.Tensor, bootstrap_value: torch.Tensor
) -> torch.Tensor:
    r"""Discounted returns of each step of an unroll, bootstrapped at its end.

    G[t] = r_t[t] + discount_t[t] * G[t + 1],   G[T] = bootstrap_value.

    With `bootstrap_value = 0` over a whole terminated episode this is the Monte-Carlo return of
    REINFORCE (Williams 1992, "Simple statistical gradient-following algorithms for connectionist
    reinforcement learning", https://doi.org/10.1007/BF00992696).

    Args:
      r_t: rewards, [T, B].
      discount_t: discounts, 0 where s_{t+1} is terminal, [T, B].
      bootstrap_value: value of the state after the last step, V(s_T), [B].

    Returns:
      G, [T, B].
    """
    _check_time_major(r_t, discount_t, None)
    base.assert_rank_and_dtype(bootstrap_value, 1, r_t.dtype, "bootstrap_value")
    if bootstrap_value.shape[0] != r_t.shape[1]:
        raise ValueError(
            f"bootstrap_value must have shape [B] = [{r_t.shape[1]}], got {tuple(bootstrap_value.shape)}"
        )
    returns = torch.empty_like(r_t)
    g = bootstrap_value
    for t in reversed(range(r_t.shape[0])):
        g = r_t[t] + discount_t[t] * g
        returns[t] = g
    return returns


class NStepTransitions(NamedTuple):
    """n-step transitions of a window, one per one-step transition j (o_j -> o_{j+1}), each [T, B]."""

    r_n: torch.Tensor  # discounted reward sum of the (up to) n steps
    discount_n: torch.Tensor  # product of their discounts: 0 past a termination
    bootstrap_index: torch.Tensor  # int64 j + m: the step whose value ends the return


@torch.no_grad()
def n_step_transitions(
    r_t: torch.Tensor, discount_t: torch.Tensor, valid_t: torch.Tensor, n: int
) -> NStepTransitions:
    r"""Folds one-step transitions into n-step ones, stopping at episode ends and at the window's end.

    For transition j, with m the number of consecutive valid transitions from j on (at most n, and
    never past the end of the window, as in R2D2):

        r_n[j] = sum_{i<m} (prod_{k<i} discount_t[j+k]) r_t[j+i],
        discount_n[j] = prod_{i<m} discount_t[j+i],    bootstrap_index[j] = j + m,

    so the n-step target r_n[j] + discount_n[j] * V(o_{j+m}) bootstraps from the last state of an
    episode cut by a time limit, and not at all (discount 0) past a true termination. A window that
    crosses into the next episode has an invalid transition (o_last -> o_first'), which stops the sum.

    Args:
      r_t: rewards of transitions o_j -> o_{j+1}, [T, B] float.
      discount_t: gamma, or 0 when o_{j+1} is terminal, [T, B], r_t's dtype.
      valid_t: False where o_{j+1} starts a new episode (no transition), [T, B] bool.
      n: steps before bootstrapping, >= 1.
    """
    _check_time_major(r_t, discount_t, None)
    base.assert_rank_and_dtype(valid_t, 2, torch.bool, "valid_t")
    if r_t.shape != valid_t.shape:
        raise ValueError(f"r_t {tuple(r_t.shape)} and valid_t {tuple(valid_t.shape)} differ in shape")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    num_steps = r_t.shape[0]
    r_n = torch.zeros_like(r_t)
    discount_n = torch.ones_like(r_t)
    bootstrap_index = torch.arange(num_steps, device=r_t.device)[:, None].expand_as(r_t).clone()
    going = torch.ones_like(valid_t)
    for i in range(n):  # step i of every window at once
        index = torch.arange(num_steps, device=r_t.device) + i  # [T]
        inside = index < num_steps
        index = index.clamp(max=num_steps - 1)
        going = going & inside[:, None] & valid_t[index]
        r_n = torch.where(going, r_n + discount_n * r_t[index], r_n)
        discount_n = torch.where(going, discount_n * discount_t[index], discount_n)
        bootstrap_index = bootstrap_index + going.long()
    return NStepTransitions(r_n, discount_n, bootstrap_index)


@torch.no_grad()
def n_step_returns(r_t: torch.Tensor, discount_t: torch.Tensor, values: torch.Tensor, n: int) -> torch.Tensor:
    r"""n-step bootstrapped returns; the window is cut short at the end of the unroll.

    G[t] = sum_{k=0}^{m-1} (prod_{j<k} discount_t[t+j]) r_t[t+k]
           + (prod_{j<m} discount_t[t+j]) values[t+m],     m = min(n, T - t).

    Paper: Sutton & Barto 2018, "Reinforcement Learning: An Introduction", chapter 7 (n-step
    bootstrapping); used by A3C (Mnih et al. 2016, https://arxiv.org/abs/1602.01783).

    Args:
      r_t: rewards, [T, B].
      discount_t: discounts, 0 where s_{t+1} is terminal, [T, B].
      values: V(s_0) ... V(s_T), [T + 1, B]; values[0] is not used.
      n: steps before bootstrapping, >= 1.

    Returns:
      G, [T, B].
    """
    _check_time_major(r_t, discount_t, values)
    folded = n_step_transitions(r_t, discount_t, torch.ones_like(r_t, dtype=torch.bool), n)
    return folded.r_n + folded.discount_n * values.gather(0, folded.bootstrap_index)


@torch.no_grad()
def lambda_returns(
    r_t: torch.Tensor, discount_t: torch.Tensor, values: torch.Tensor, lambda_: float
) -> torch.Tensor:
    r"""TD(lambda) returns: an exponentially weighted mix of all n-step returns.

    G[t] = r_t[t] + discount_t[t] * ((1 - lambda) * values[t + 1] + lambda * G[t + 1]),
    G[T] = values[T].

    lambda = 0 gives the one-step TD target; lambda = 1 the discounted return bootstrapped from
    values[T] only (the Monte-Carlo return when the unroll ends in a termination).
    Paper: Sutton & Barto 2018, "Reinforcement Learning: An Introduction", chapter 12.

    Args:
      r_t: rewards, [T, B].
      discount_t: discounts, 0 where s_{t+1} is terminal, [T, B].
      values: V(s_0) ... V(s_T), [T + 1, B]; values[0] is not used.
      lambda_: mixing parameter in [0, 1].

    Returns:
      G, [T, B].
    """
    _check_time_major(r_t, discount_t, values)
    _check_lambda(lambda_)
    returns = torch.empty_like(r_t)
    g = values[-1]
    for t in reversed(range(r_t.shape[0])):
        g = r_t[t] + discount_t[t] * ((1.0 - lambda_) * values[t + 1] + lambda_ * g)
        returns[t] = g
    return returns


@torch.no_grad()
def generalized_advantage_estimation(
    r_t: torch.Tensor, discount_t: torch.Tensor, lambda_: float, values: torch.Tensor
) -> torch.Tensor:
    r"""Generalized Advantage Estimation.

    Paper: Schulman, Moritz, Levine, Jordan & Abbeel 2015, "High-Dimensional Continuous Control Using
    Generalized Advantage Estimation" (https://arxiv.org/abs/1506.02438).

    delta[t] = r_t[t] + discount_t[t] * values[t + 1] - values[t]
    A[t]     = delta[t] + discount_t[t] * lambda * A[t + 1],   A[T] = 0.

    A[t] + values[t] equals `lambda_returns(...)[t]`, the usual critic target of PPO.

    Args:
      r_t: rewards, [T, B].
      discount_t: discounts, 0 where s_{t+1} is terminal, [T, B].
      lambda_: GAE's lambda in [0, 1].
      values: V(s_0) ... V(s_T), [T + 1, B]; values[T] is the bootstrap of a truncated unroll.

    Returns:
      A, [T, B].
    """
    _check_time_major(r_t, discount_t, values)
    _check_lambda(lambda_)
    deltas = r_t + discount_t * values[1:] - values[:-1]  # all T one-step TD errors at once
    advantages = torch.empty_like(r_t)
    a = torch.zeros_like(values[-1])
    for t in reversed(range(r_t.shape[0])):
        a = deltas[t] + discount_t[t] * lambda_ * a
        advantages[t] = a
    return advantages


@torch.no_grad()
def transformed_n_step_returns(
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    valid_t: torch.Tensor,
    values: torch.Tensor,
    n: int,
    eps: float = 1e-3,
) -> torch.Tensor:
    r"""R2D2's n-step targets in the rescaled value space.

    Paper: Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed Reinforcement Learning"
    (https://openreview.net/forum?id=r1lyTjAqYX), with h from Pohlen et al. 2018
    (https://arxiv.org/abs/1805.11593). The network outputs h(Q); the target undoes h on the bootstrap,
    adds the rewards in the real scale, and rescales again:

        y[j] = h( r_n[j] + discount_n[j] * h^{-1}(values[j + m]) )

    with r_n, discount_n and m from `n_step_transitions` (stops at termination, bootstraps at a
    time-limit cut, never looks past the window). For R2D2's double-Q target, values[t] is the target
    network's output at the action the online network picks in s_t.

    Args:
      r_t: rewards of transitions o_j -> o_{j+1}, [T, B].
      discount_t: gamma, or 0 when o_{j+1} is terminal, [T, B].
      valid_t: False where o_{j+1} starts a new episode, [T, B] bool.
      values: rescaled values h(Q) of o_0 ... o_T, [T + 1, B].
      n: steps before bootstrapping, >= 1.
      eps: h's linear term.

    Returns:
      y, [T, B] (rescaled, compare with the network's output directly).
    """
    _check_time_major(r_t, discount_t, values)
    folded = n_step_transitions(r_t, discount_t, valid_t, n)
    bootstrap = value_learning.signed_parabolic(values.gather(0, folded.bootstrap_index), eps)
    return value_learning.signed_hyperbolic(folded.r_n + folded.discount_n * bootstrap, eps)


@torch.no_grad()
def retrace_returns(
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    q_t: torch.Tensor,
    a_t: torch.Tensor,
    pi_t: torch.Tensor,
    mu_a_t: torch.Tensor,
    lambda_: float,
    valid_t: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Retrace(lambda) targets for Q(s_t, a_t) from off-policy data.

    Paper: Munos, Stepleton, Harutyunyan & Bellemare 2016, "Safe and Efficient Off-Policy Reinforcement
    Learning" (https://arxiv.org/abs/1606.02647). With v[t] = sum_a pi_t[t, a] q_t[t, a] (the target
    policy's expected value), q_a[t] = q_t[t, a_t[t]] and the truncated importance weights

        c[t] = lambda * min(1, pi_t[t, a_t[t]] / mu_a_t[t]),

    the targets satisfy, backwards from the end of the unroll,

        G[T-1] = r_t[T-1] + discount_t[T-1] * v[T]
        G[t]   = r_t[t] + discount_t[t] * (v[t+1] + c[t+1] * (G[t+1] - q_a[t+1])).

    lambda = 0 gives expected-SARSA one-step targets; on-policy data with lambda = 1 the discounted
    return (the corrections telescope). Where valid_t[t+1] is False (o_{t+2} starts a new episode, so
    there is no transition t+1) the trace is cut: G[t] = r_t[t] + discount_t[t] * v[t+1], which
    bootstraps from the last state of an episode cut by a time limit. G at invalid steps is meaningless;
    mask it out of the loss.

    Args:
      r_t: rewards of s_t -> s_{t+1}, [T, B].
      discount_t: gamma, or 0 when s_{t+1} is terminal, [T, B].
      q_t: (target-network) Q-values of s_0 ... s_T, [T + 1, B, A]; row 0 is not used.
      a_t: actions a_0 ... a_{T-1}, [T, B] int64; a_0 is not used.
      pi_t: target-policy probabilities at s_0 ... s_T, [T + 1, B, A]; row 0 is not used.
      mu_a_t: behaviour probability of a_t at s_t, [T, B], > 0 where used.
      lambda_: trace decay in [0, 1].
      valid_t: False where s_{t+1} starts a new episode, [T, B] bool (default: all True).

    Returns:
      G, [T, B].
    """
    _check_time_major(r_t, discount_t, None)
    _check_lambda(lambda_)
    num_steps, batch = r_t.shape
    base.assert_rank_and_dtype(q_t, 3, r_t.dtype, "q_t")
    base.assert_rank_and_dtype(pi_t, 3, r_t.dtype, "pi_t")
    base.assert_rank_and_dtype(a_t, 2, torch.int64, "a_t")
    base.assert_rank_and_dtype(mu_a_t, 2, r_t.dtype, "mu_a_t")
    if q_t.shape[:2] != (num_steps + 1, batch) or pi_t.shape != q_t.shape:
        raise ValueError(
            f"q_t and pi_t must have shape [T + 1, B, A] with [T, B] = {(num_steps, batch)}, "
            f"got {tuple(q_t.shape)} and {tuple(pi_t.shape)}"
        )
    if a_t.shape != r_t.shape or mu_a_t.shape != r_t.shape:
        raise ValueError(f"a_t {tuple(a_t.shape)} and mu_a_t {tuple(mu_a_t.shape)} must be [T, B]")
    if valid_t is None:
        valid_t = torch.ones_like(r_t, dtype=torch.bool)
    base.assert_rank_and_dtype(valid_t, 2, torch.bool, "valid_t")
    v = (pi_t * q_t).sum(dim=-1)  # [T + 1, B]
    q_a = q_t[:-1].gather(-1, a_t.unsqueeze(-1)).squeeze(-1)  # [T, B], q_a[t] = Q(s_t, a_t)
    pi_a = pi_t[:-1].gather(-1, a_t.unsqueeze(-1)).squeeze(-1)  # [T, B]
    c = lambda_ * torch.clamp(pi_a / mu_a_t, max=1.0) * valid_t.to(r_t.dtype)
    returns = torch.empty_like(r_t)
    g = r_t[-1] + discount_t[-1] * v[-1]
    returns[-1] = g
    for t in reversed(range(num_steps - 1)):
        g = r_t[t] + discount_t[t] * (v[t + 1] + c[t + 1] * (g - q_a[t + 1]))
        returns[t] = g
    return returns


@torch.no_grad()
def transformed_retrace_returns(
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    q_t: torch.Tensor,
    a_t: torch.Tensor,
    pi_t: torch.Tensor,
    mu_a_t: torch.Tensor,
    lambda_: float,
    valid_t: torch.Tensor | None = None,
    eps: float = 1e-3,
) -> torch.Tensor:
    r"""Retrace in the rescaled value space, as NGU and Agent57 learn it.

    Paper: Badia et al. 2020, "Never Give Up" (https://arxiv.org/abs/2002.06038), appendix on the
    transformed Retrace operator: the network outputs h(Q), so the recursion of `retrace_returns` runs
    on h^{-1}(q_t) and its result is rescaled, G_h = h(G).

    Arguments as `retrace_returns`, with q_t the rescaled values h(Q) and eps h's linear term.
    """
    q_real = value_learning.signed_parabolic(q_t, eps)
    g = retrace_returns(r_t, discount_t, q_real, a_t, pi_t, mu_a_t, lambda_, valid_t)
    return value_learning.signed_hyperbolic(g, eps)


def _check_lambda(lambda_: float) -> None:
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda_ must be in [0, 1], got {lambda_}")
