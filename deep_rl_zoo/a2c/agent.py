"""A2C: the synchronous advantage actor-critic (Mnih et al. 2016, "Asynchronous Methods for Deep
Reinforcement Learning", https://arxiv.org/abs/1602.01783, in its synchronous form), and A2C-grad.

A2C: actors (`unrolls.UnrollActor`) sample the policy for T steps, send the unroll and wait; the
learner takes one unroll from every actor and makes one gradient step on

    loss = -log pi(a_t|s_t) A_t + value_coef * 0.5 (G_t - V(s_t))^2 - entropy_coef * H(pi(.|s_t)),
    G_t  = r_{t+1} + gamma r_{t+2} + ... + gamma^{T-t} V(s_T)   (n-step return, bootstrapped),
    A_t  = G_t - V(s_t),

then publishes the new parameters.

A2C-grad: each actor computes that same loss's gradient on its own unrolls (one per env it steps) and
sends the gradient instead of the data; the learner averages the actors' gradients, each weighted by its
number of valid transitions, so that the step is A2C's (the loss is a mean over the batch's valid
transitions), and applies one optimiser step.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import policy_gradient, unrolls
from deep_rl_zoo.optimization import GradientStep, apply_gradients, gradient_step

# What the learners report (`a2c_loss`'s parts and the gradient norm).
STATISTICS_KEYS = ("loss", "policy_loss", "value_loss", "entropy", "grad_norm")


def a2c_loss(
    network: nn.Module,
    batch: unrolls.UnrollBatch,
    discount: float,
    value_coef: float,
    entropy_coef: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """A2C's loss, averaged over the valid transitions of a batch of unrolls, and its parts."""
    num_steps, num_unrolls = batch.reward.shape
    valid = batch.valid.flatten()
    output = network(batch.observation.flatten(0, 1))  # all T + 1 states in one forward pass
    values = output.value.reshape(num_steps + 1, num_unrolls)
    # lambda = 1: n-step returns bootstrapped from V(s_T) (and from the cut-off state at truncations).
    advantages, targets = unrolls.advantages_and_returns(batch, values.detach(), discount, 1.0)
    # s_T has no action in this unroll: give it a copy of a_{T-1}, then drop it with the invalid pairs.
    padded_action = torch.cat([batch.action, batch.action[-1:]]).flatten(0, 1)
    distribution = output.distribution()
    log_prob = distribution.log_prob(padded_action).reshape(num_steps + 1, num_unrolls)[:-1].flatten()[valid]
    entropy = distribution.entropy().reshape(num_steps + 1, num_unrolls)[:-1].flatten()[valid]
    policy = policy_gradient.policy_gradient_loss(log_prob, advantages.flatten()[valid])
    critic = policy_gradient.value_loss(values[:-1].flatten()[valid], targets.flatten()[valid])
    entropy_term = policy_gradient.entropy_loss(entropy)
    loss = policy.loss.mean() + value_coef * critic.loss.mean() + entropy_coef * entropy_term.loss.mean()
    return loss, {
        "loss": loss.item(),
        "policy_loss": policy.loss.mean().item(),
        "value_loss": critic.loss.mean().item(),
        "entropy": entropy_term.extra.entropy.mean().item(),
    }


class _Learner:
    """What A2C and A2C-grad share: the optimiser step, statistics and checkpoints."""

    agent_name = "A2C"
    on_policy = True  # the loop gives `learn` only data of the parameters published last

    def __init__(
        self,
        *,
        network: nn.Module,
        optimizer: torch.optim.Optimizer,
        num_actors: int,
        discount: float,
        value_coef: float,
        entropy_coef: float,
        max_grad_norm: float,
        device: torch.device,
        learning_rate: Callable[[int], float] | None = None,
    ):
        """
        Args:
          learning_rate: the learning rate of the update that follows `k` updates (k = 0, 1, ...), set
            on the optimiser before each; None keeps the optimiser's own.
        """
        self._network = network
        self._optimizer = optimizer
        self._learning_rate = learning_rate
        self.messages_per_step = num_actors
        self._discount = discount
        self._value_coef = value_coef
        self._entropy_coef = entropy_coef
        self._max_grad_norm = max_grad_norm
        self._device = device
        self._learner_steps = 0
        # NaN until the first update, so that every row of results.csv has the same columns.
        self._statistics = dict.fromkeys(STATISTICS_KEYS, float("nan"))

    @property
    def shared_module(self) -> nn.Module:
        return self._network

    def _start_step(self) -> None:
        if self._learning_rate is not None:
            for group in self._optimizer.param_groups:
                group["lr"] = self._learning_rate(self._learner_steps)

    def _finish_step(self, step: GradientStep) -> None:
        self._statistics["grad_norm"] = step.grad_norm
        self._learner_steps += 1

    @property
    def statistics(self) -> dict[str, float]:
        return {"learner_steps": self._learner_steps, **self._statistics}

    def state_dict(self) -> dict:
        return {
            "network": self._network.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "learner_steps": self._learner_steps,
        }

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._learner_steps = state["learner_steps"]


class A2c(_Learner):
    """The A2C learner: one gradient step on the unrolls of all actors."""

    agent_name = "A2C"

    def learn(self, payloads: list[unrolls.Unroll]) -> None:
        payloads = sorted(payloads, key=lambda u: u.actor_index)  # arrival order varies; results must not
        self._start_step()
        batch = unrolls.stack_unrolls(payloads, [u.reward for u in payloads], self._device)
        loss, self._statistics = a2c_loss(
            self._network, batch, self._discount, self._value_coef, self._entropy_coef
        )
        self._finish_step(
            gradient_step(
                loss,
                self._optimizer,
                self._network.parameters(),
                self._max_grad_norm,
                self._learner_steps + 1,
            )
        )


class Gradient(NamedTuple):
    """What an A2C-grad actor sends: the gradient of A2C's loss on its own unrolls."""

    actor_index: int  # its first unroll's (`actor * num_envs`): orders the learner's sum
    gradient: np.ndarray  # [num_parameters] float32, in `network.parameters()` order
    statistics: dict
    num_valid: int  # the valid transitions the loss averaged over: the learner's weight


class GradientComputer:
    """Runs in an A2C-grad actor: turns the unrolls of one send (one per env) into the gradient of A2C's
    loss on them."""

    def __init__(
        self,
        network: nn.Module,
        discount: float,
        value_coef: float,
        entropy_coef: float,
        device: torch.device,
    ):
        self._network = network
        self._discount = discount
        self._value_coef = value_coef
        self._entropy_coef = entropy_coef
        self._device = device

    def __call__(self, unrolls_: list[unrolls.Unroll]) -> Gradient:
        """The gradient of A2C's loss on the actor's unrolls (one per env), in one forward and backward."""
        batch = unrolls.stack_unrolls(unrolls_, [u.reward for u in unrolls_], self._device)
        actor_index = min(u.actor_index for u in unrolls_)
        num_valid = int(batch.valid.sum())
        if num_valid == 0:  # only resets (unroll_length 1 at an episode's end): nothing to learn from
            size = sum(p.numel() for p in self._network.parameters())
            return Gradient(actor_index, np.zeros(size, np.float32), {}, 0)
        self._network.zero_grad(set_to_none=False)
        loss, statistics = a2c_loss(
            self._network, batch, self._discount, self._value_coef, self._entropy_coef
        )
        loss.backward()
        gradient = torch.cat([p.grad.flatten() for p in self._network.parameters()])
        return Gradient(actor_index, gradient.cpu().numpy(), statistics, num_valid)


class A2cGrad(_Learner):
    """The A2C-grad learner: averages the actors' gradients, weighted by their valid transitions, and
    applies one optimiser step."""

    agent_name = "A2C-grad"

    def learn(self, payloads: list[Gradient]) -> None:
        payloads = sorted(payloads, key=lambda g: g.actor_index)  # float sums depend on the order
        self._start_step()
        # Weighted by valid transitions: the mean of A2C's loss over the whole batch, not of the actors'
        # means (they differ when an episode's end leaves one actor fewer valid transitions).
        weights = np.array([p.num_valid for p in payloads], np.float64)
        weights /= max(weights.sum(), 1.0)
        mean_gradient = np.zeros_like(payloads[0].gradient)
        for weight, payload in zip(weights, payloads, strict=True):
            mean_gradient += np.float32(weight) * payload.gradient
        mean_gradient = torch.as_tensor(mean_gradient, device=self._device)
        offset = 0
        for parameter in self._network.parameters():
            size = parameter.numel()
            parameter.grad = mean_gradient[offset : offset + size].view_as(parameter).clone()
            offset += size
        counted = [(w, p.statistics) for w, p in zip(weights, payloads, strict=True) if p.num_valid > 0]
        if counted:
            self._statistics = {
                key: float(sum(w * stats[key] for w, stats in counted)) for key in counted[0][1]
            }
        else:  # no actor had a valid transition
            self._statistics = dict.fromkeys(STATISTICS_KEYS, float("nan"))
        self._finish_step(
            apply_gradients(
                self._statistics["loss"],
                self._optimizer,
                self._network.parameters(),
                self._max_grad_norm,
                self._learner_steps + 1,
            )
        )
