"""Agent57 (Badia et al. 2020, "Agent57: Outperforming the Atari Human Benchmark",
https://arxiv.org/abs/2003.13350): NGU (`deep_rl_zoo.ngu`, whose actors, novelty, replay and auxiliary
losses it uses unchanged) with two changes from the paper:

1. Two separate recurrent Q-networks, extrinsic Q_e and intrinsic Q_i (each an `ngu.agent.NguQNetwork`
   with its own LSTM), each learned with its own transformed target, its own reward and the sequence's
   gamma_j: transformed Retrace (--q_target=retrace, the paper's; run_atari's default) under the target
   policy epsilon-greedy in the combined Q, or (--q_target=n_step, the classic default) n-step
   double-Q targets

       y^e_k = h(sum of n r^e + gamma_j^n h^{-1}(Q'_e(o_{k+n}, a*)))
       y^i_k = h(sum of n r^i + gamma_j^n h^{-1}(Q'_i(o_{k+n}, a*)))

   and combined only where a policy is needed, in the untransformed space:

       Q(o, a, j) = h(h^{-1}(Q_e(o, a, j)) + beta_j h^{-1}(Q_i(o, a, j)))

   for acting (epsilon-greedy in Q) and for the double-Q bootstrap action a* = argmax_a of the online
   networks' combined Q (the policy both targets evaluate is the greedy policy of the combined Q, as
   the paper's). Loss: the sum of the two streams' losses (R2D2's importance-weighted mean of 0.5 td^2).
2. A meta-controller per actor: a sliding-window UCB bandit (`exploration.sliding_window_ucb_choice`,
   window 160 episodes, beta 1, epsilon 0.5) chooses the policy index j at every episode start from the
   undiscounted extrinsic returns of the actor's recent episodes.

Discounts: on Atari the appendix's family (`exploration.agent57_policy_family`: 0.9999 for the
exploitative j = 0, 0.997 at j = 7, down to 0.99 at j = 31); classic control's 2 policies keep NGU's
0.997 and 0.99 (--discount_family=ngu).

Kept as NGU here (changed from the paper, for a CPU budget or simplicity): n-step targets on classic
control (Retrace on Atari); one discount gamma_j per policy for both streams; no trace-length or
backprop-window changes; few policies and actors; each network's gradient clipped on its own. A sequence's priority mixes max and mean of |td_e| + |td_i| (the
paper does not say how it mixes the two streams). Evaluation plays j = 0 (beta 0: Q = Q_e).
"""

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import exploration, multistep, value_learning
from deep_rl_zoo.networks.value import RecurrentQInput, RecurrentQNetworkOutput
from deep_rl_zoo.ngu.agent import (
    Ngu,
    NguQNetwork,
    RetraceSettings,
    SequenceTensors,
    epsilon_greedy_probabilities,
)
from deep_rl_zoo.r2d2.agent import R2d2Extra, sequence_q_values


def combined_q_values(
    q_extrinsic: torch.Tensor, q_intrinsic: torch.Tensor, beta: torch.Tensor | float, eps: float = 1e-3
) -> torch.Tensor:
    r"""Agent57's Q of policy j from the two rescaled streams: h(h^{-1}(q_e) + beta_j h^{-1}(q_i)).

    Args:
      q_extrinsic, q_intrinsic: h(Q_e), h(Q_i), [..., A].
      beta: beta_j, a float or [...] (one per row, broadcast over actions).
      eps: h's linear term.
    """
    if q_extrinsic.shape != q_intrinsic.shape:
        raise ValueError(f"q_extrinsic {tuple(q_extrinsic.shape)} and q_intrinsic differ in shape")
    beta = torch.as_tensor(beta, dtype=q_extrinsic.dtype, device=q_extrinsic.device)
    if beta.dim() > 0:
        beta = beta[..., None]
    return value_learning.signed_hyperbolic(
        value_learning.signed_parabolic(q_extrinsic, eps)
        + beta * value_learning.signed_parabolic(q_intrinsic, eps),
        eps,
    )


class Agent57QNetworks(nn.Module):
    """The two Q-networks behind one recurrent interface: the state is both LSTM states concatenated
    ((h_e | h_i), (c_e | c_i)), so actors and the replay store it as one; outputs stack the streams,
    q_values [T, B, 2, A] (index 0 extrinsic, 1 intrinsic)."""

    def __init__(self, extrinsic: NguQNetwork, intrinsic: NguQNetwork, rescaling_eps: float = 1e-3):
        super().__init__()
        self.extrinsic = extrinsic
        self.intrinsic = intrinsic
        self.rescaling_eps = rescaling_eps

    def initial_state(self, batch_size: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        e, i = (
            self.extrinsic.initial_state(batch_size, device),
            self.intrinsic.initial_state(batch_size, device),
        )
        return torch.cat([e[0], i[0]], -1), torch.cat([e[1], i[1]], -1)

    def forward(
        self, x: RecurrentQInput, hidden_state: tuple[torch.Tensor, torch.Tensor]
    ) -> RecurrentQNetworkOutput:
        size = self.extrinsic.lstm.hidden_size
        h, c = hidden_state
        e = self.extrinsic(x, (h[..., :size], c[..., :size]))
        i = self.intrinsic(x, (h[..., size:], c[..., size:]))
        state = (
            torch.cat([e.hidden_state[0], i.hidden_state[0]], -1),
            torch.cat([e.hidden_state[1], i.hidden_state[1]], -1),
        )
        return RecurrentQNetworkOutput(torch.stack([e.q_values, i.q_values], dim=-2), state)

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """The two networks, each clipped to the gradient-norm limit on its own (`NguNetworks`)."""
        return {
            "q_extrinsic": list(self.extrinsic.parameters()),
            "q_intrinsic": list(self.intrinsic.parameters()),
        }

    def acting_q_values(self, q_values: torch.Tensor, beta: float) -> torch.Tensor:
        """[..., 2, A] -> the combined [..., A] of policy beta."""
        return combined_q_values(q_values[..., 0, :], q_values[..., 1, :], beta, self.rescaling_eps)


class Agent57Extra(NamedTuple):
    extrinsic: R2d2Extra
    intrinsic: R2d2Extra
    bootstrap_action: torch.Tensor  # [L + 1, B] a* of the combined online Q


def agent57_td_errors(
    q_online: torch.Tensor,
    q_target: torch.Tensor,
    a_tm1: torch.Tensor,
    r_e: torch.Tensor,
    r_i: torch.Tensor,
    beta: torch.Tensor,
    discount_t: torch.Tensor,
    valid_t: torch.Tensor,
    n_step: int,
    rescaling_eps: float = 1e-3,
    retrace: RetraceSettings | None = None,
    mu_a_tm1: torch.Tensor | None = None,
) -> Agent57Extra:
    """Each stream's TD errors against its own transformed target, both following the greedy policy of
    the online networks' combined Q: with `retrace` None, n-step double-Q targets bootstrapping at its
    action a*; else transformed Retrace targets (`ngu.agent.retrace_td_errors`) under pi, epsilon-greedy
    in the combined Q, with the behaviour probabilities `mu_a_tm1` [L, B].

    Args:
      q_online, q_target: [L + 1, B, 2, A] (stream 0 extrinsic, 1 intrinsic), rescaled h(Q).
      a_tm1: [L, B] int64; r_e, r_i: [L, B] rewards of o_j -> o_{j+1}.
      beta: beta_j of the policy at each of o_0 .. o_L, [L + 1, B].
      discount_t: gamma_j, 0 where o_{j+1} is terminal, [L, B]; valid_t: [L, B] bool.
    """
    if q_online.shape != q_target.shape or q_online.dim() != 4 or q_online.shape[2] != 2:
        raise ValueError(f"q_online {tuple(q_online.shape)} and q_target must be [L+1, B, 2, A]")
    if beta.shape != q_online.shape[:2]:
        raise ValueError(f"beta {tuple(beta.shape)} must be [L+1, B] = {tuple(q_online.shape[:2])}")
    if a_tm1.shape != (q_online.shape[0] - 1, q_online.shape[1]) or a_tm1.dtype != torch.int64:
        raise ValueError(f"a_tm1 {tuple(a_tm1.shape)} {a_tm1.dtype} must be [L, B] int64")
    mask = valid_t.to(q_online.dtype)
    with torch.no_grad():
        combined = combined_q_values(
            q_online[:, :, 0].detach(), q_online[:, :, 1].detach(), beta, rescaling_eps
        )
        selected = combined.argmax(-1)  # [L + 1, B]
        if retrace is not None:
            pi_t = epsilon_greedy_probabilities(combined, retrace.target_epsilon)  # [L + 1, B, A]
    extras = []
    for stream, r_t in ((0, r_e), (1, r_i)):
        with torch.no_grad():
            if retrace is None:
                values = q_target[:, :, stream].gather(-1, selected[..., None]).squeeze(-1)  # [L + 1, B]
                target = multistep.transformed_n_step_returns(
                    r_t, discount_t, valid_t, values, n_step, rescaling_eps
                )
            else:
                target = multistep.transformed_retrace_returns(
                    r_t,
                    discount_t,
                    q_target[:, :, stream],
                    a_tm1,
                    pi_t,
                    mu_a_tm1,
                    retrace.lambda_,
                    valid_t,
                    rescaling_eps,
                )
        q_a = q_online[:-1, :, stream].gather(-1, a_tm1[..., None]).squeeze(-1)
        extras.append(R2d2Extra(td_error=(target - q_a) * mask, target=target, mask=mask))
    return Agent57Extra(extras[0], extras[1], selected)


class SlidingWindowBandit:
    """An actor's meta-controller: j for the next episode by sliding-window UCB over its recent
    (j, extrinsic return) pairs. `load` restores the pairs the learner kept (resume, restarted actor)."""

    def __init__(self, num_arms: int, rng: np.random.Generator, window: int, beta: float, epsilon: float):
        self._num_arms = num_arms
        self._rng = rng
        self._window = window
        self._beta = beta
        self._epsilon = epsilon
        self._arms: list[int] = []
        self._returns: list[float] = []

    def choose(self) -> int:
        return exploration.sliding_window_ucb_choice(
            self._arms, self._returns, self._num_arms, self._rng, self._window, self._beta, self._epsilon
        )

    def record(self, arm: int, episode_return: float) -> None:
        self._arms = [*self._arms, arm][-self._window :]
        self._returns = [*self._returns, episode_return][-self._window :]

    def state(self) -> dict:
        return {"bandit_arms": list(self._arms), "bandit_returns": list(self._returns)}

    def load(self, arms: list[int], returns: list[float]) -> None:
        self._arms, self._returns = list(arms)[-self._window :], list(returns)[-self._window :]


class Agent57(Ngu):
    """Agent57's learner: NGU's, with two Q-networks learned each from its own target (`q_loss`)."""

    agent_name = "Agent57"

    def q_loss(self, data: SequenceTensors) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        b = self._burn_in
        q_online, q_target = sequence_q_values(
            self._networks.q, self._target_network, data.inputs, data.first, data.stored_state, b
        )  # [L + 1, B, 2, A]
        policy = data.policy_index[b:]  # [L + 1, B]
        extra = agent57_td_errors(
            q_online,
            q_target,
            data.action[b:-1],
            data.extrinsic_reward[b + 1 :],
            data.intrinsic_reward[b + 1 :],
            self._betas[policy],
            self._gammas[policy[1:]] * (~data.terminated[b + 1 :]).to(torch.float32),
            ~data.first[b + 1 :],
            self._n_step,
            self._rescaling_eps,
            self._retrace,
            None if self._retrace is None else data.behaviour_probability[b:-1],
        )
        mask = extra.extrinsic.mask
        count = mask.sum(0).clamp(min=1.0)
        loss_e = 0.5 * extra.extrinsic.td_error.square().sum(0) / count
        loss_i = 0.5 * extra.intrinsic.td_error.square().sum(0) / count
        abs_td = (extra.extrinsic.td_error.abs() + extra.intrinsic.td_error.abs()).detach()
        total = max(mask.sum().item(), 1.0)
        statistics = {
            "extrinsic_q_loss": loss_e.mean().item(),
            "intrinsic_q_loss": loss_i.mean().item(),
            "mean_extrinsic_target": (extra.extrinsic.target * mask).sum().item() / total,
            "mean_intrinsic_target": (extra.intrinsic.target * mask).sum().item() / total,
        }
        return loss_e + loss_i, abs_td, mask, statistics
