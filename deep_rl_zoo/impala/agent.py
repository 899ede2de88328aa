"""IMPALA (Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
Actor-Learner Architectures", https://arxiv.org/abs/1802.01561).

Actors (the shared `unrolls.UnrollActor` with `ImpalaActingPolicy`, one per slot) sample their copy of
the policy for T env steps, send the unroll with the behaviour policy's logits, the `first` flags and
the LSTM state before it, pick up the newest parameters if there are any, and go on without waiting: their policy lags the learner's by a few updates. The learner (`Impala`) takes a
batch of B unrolls in arrival order, runs them through its current network (the LSTM from each
unroll's recorded initial state), corrects for the lag with V-trace and takes one gradient step on

    loss = -mean(A_t log pi(a_t|s_t)) + value_coef * mean(0.5 (v_t - V(s_t))^2) - entropy_coef * mean(H)

over the valid pairs of the batch (see `deep_rl_zoo.unrolls` for the unroll layout).
"""

from typing import Any

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import policy_gradient, unrolls, vtrace
from deep_rl_zoo.networks.impala_resnet import ImpalaActorCritic
from deep_rl_zoo.optimization import gradient_step
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.types_ import TimeStep


class ImpalaActingPolicy:
    """The `unrolls.ActingPolicy` of IMPALA's actors: the logits of one observation, carrying the LSTM
    state from step to step (the network resets it where `first` is set)."""

    def __init__(self, network: ImpalaActorCritic, device: torch.device):
        self._network = network
        self._device = device
        self._core_state = network.initial_state(1, device)

    @torch.inference_mode()
    def __call__(self, observation: np.ndarray, first: bool) -> np.ndarray:
        x = torch.as_tensor(observation, device=self._device)[None, None]
        output, self._core_state = self._network(
            x, torch.tensor([[first]], device=self._device), self._core_state
        )
        return output.pi_logits[0, 0].double().cpu().numpy()

    def state(self) -> tuple:
        return tuple(s[0].cpu().numpy() for s in self._core_state)


class ImpalaGreedyActor:
    """Evaluation: the most probable action of the network it is given (the learner's own, during
    training), or a sample from its policy when `sample_actions` is set, carrying the LSTM state
    through each episode."""

    def __init__(
        self, network: ImpalaActorCritic, device: torch.device, agent_name: str, sample_actions: bool = False
    ):
        self.agent_name = agent_name
        self._network = network
        self._device = device
        self._sample_actions = sample_actions
        self._core_state = network.initial_state(1, device)

    @torch.inference_mode()
    def step(self, timestep: TimeStep) -> int:
        x = torch.as_tensor(timestep.observation, device=self._device)[None, None]
        first = torch.tensor([[timestep.first]], device=self._device)
        output, self._core_state = self._network(x, first, self._core_state)
        if self._sample_actions:
            return int(output.distribution().sample()[0, 0].item())
        return int(output.pi_logits[0, 0].argmax().item())

    def reset(self) -> None:
        self._core_state = self._network.initial_state(1, self._device)

    @property
    def statistics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class Impala:
    """The IMPALA learner: one V-trace actor-critic gradient step per batch of unrolls."""

    agent_name = "IMPALA"
    on_policy = False  # V-trace corrects for the actors' lag (the loop logs it as mean_parameter_lag)

    def __init__(
        self,
        *,
        network: ImpalaActorCritic,
        optimizer: torch.optim.Optimizer,
        batch_size: int,
        discount: float,
        rho_bar: float,
        c_bar: float,
        pg_rho_bar: float,
        vtrace_lambda: float,
        value_coef: float,
        entropy_coef: float,
        max_grad_norm: float,
        learning_rate: LinearSchedule,
        device: torch.device,
    ):
        """
        Args:
          network: the actor-critic the learner trains and publishes.
          batch_size: unrolls per gradient step, in arrival order (any actors, possibly one twice).
          rho_bar, c_bar, pg_rho_bar, vtrace_lambda: V-trace's clipping thresholds and lambda.
          learning_rate: as a function of env steps learned from (linear decay).
        """
        self._network = network
        self._optimizer = optimizer
        self.messages_per_step = batch_size
        self._discount = discount
        self._vtrace_args = dict(rho_bar=rho_bar, c_bar=c_bar, pg_rho_bar=pg_rho_bar, lambda_=vtrace_lambda)
        self._value_coef = value_coef
        self._entropy_coef = entropy_coef
        self._max_grad_norm = max_grad_norm
        self._learning_rate = learning_rate
        self._device = device
        self._env_steps = 0  # transitions learned from (the learning-rate schedule's clock)
        self._learner_steps = 0
        # NaN until the first update, so that every row of results.csv has the same columns.
        self._statistics = dict.fromkeys(
            (
                "loss",
                "policy_loss",
                "value_loss",
                "entropy",
                "mean_clipped_rho",
                "grad_norm",
                "learning_rate",
            ),
            float("nan"),
        )

    @property
    def shared_module(self) -> nn.Module:
        return self._network

    def learn(self, payloads: list[unrolls.Unroll]) -> None:
        batch = self._stack(payloads)
        num_steps = batch["reward"].shape[0]
        output, _ = self._network(batch["observation"], batch["first"], batch["core_state"])
        log_pi = torch.log_softmax(output.pi_logits[:-1], dim=-1)  # [T, B, A]
        log_prob = log_pi.gather(-1, batch["action"].unsqueeze(-1)).squeeze(-1)  # log pi(a_t|s_t)
        log_mu = torch.log_softmax(batch["behaviour_logits"], dim=-1)
        behaviour_log_prob = log_mu.gather(-1, batch["action"].unsqueeze(-1)).squeeze(-1)
        valid = batch["valid"]
        log_rho = torch.where(valid, log_prob.detach() - behaviour_log_prob, torch.zeros_like(log_prob))

        # Episode ends become a zero discount; at a time-limit truncation the bootstrap gamma * V(s_{t+1})
        # of the cut-off state is folded into the reward (as in `unrolls.advantages_and_returns`).
        values = output.value.detach()
        ended = batch["terminated"] | batch["truncated"]
        truncated_only = (batch["truncated"] & ~batch["terminated"]).float()
        r_t = batch["reward"] + truncated_only * self._discount * values[1:]
        discount_t = self._discount * (~ended).float()
        targets = vtrace.vtrace(values, r_t, discount_t, log_rho, **self._vtrace_args)

        entropy = -(log_pi.exp() * log_pi).sum(-1)  # exact, over the discrete actions
        policy = policy_gradient.policy_gradient_loss(log_prob[valid], targets.pg_advantages[valid])
        critic = policy_gradient.value_loss(output.value[:-1][valid], targets.vs[valid])
        entropy_term = policy_gradient.entropy_loss(entropy[valid])
        loss = (
            policy.loss.mean()
            + self._value_coef * critic.loss.mean()
            + self._entropy_coef * entropy_term.loss.mean()
        )
        for group in self._optimizer.param_groups:
            group["lr"] = self._learning_rate(self._env_steps)
        loss_value, grad_norm = gradient_step(
            loss, self._optimizer, self._network.parameters(), self._max_grad_norm, self._learner_steps + 1
        )

        self._env_steps += num_steps * len(payloads)
        self._learner_steps += 1
        self._statistics = {
            "loss": loss_value,
            "policy_loss": policy.loss.mean().item(),
            "value_loss": critic.loss.mean().item(),
            "entropy": entropy_term.extra.entropy.mean().item(),
            "mean_clipped_rho": targets.clipped_rho[valid].mean().item(),
            "grad_norm": grad_norm,
            "learning_rate": self._optimizer.param_groups[0]["lr"],
        }

    def _stack(self, payloads: list[unrolls.Unroll]) -> dict[str, Any]:
        lengths = {len(u.reward) for u in payloads}
        if len(lengths) != 1:
            raise ValueError(f"unrolls of different lengths {sorted(lengths)}")

        def stack(name: str) -> torch.Tensor:
            return torch.as_tensor(
                np.stack([getattr(u, name) for u in payloads], axis=1), device=self._device
            )

        batch = {
            name: stack(name)
            for name in (
                "observation",
                "first",
                "action",
                "behaviour_logits",
                "reward",
                "terminated",
                "truncated",
            )
        }
        batch["valid"] = stack("valid")
        batch["core_state"] = tuple(
            torch.as_tensor(np.stack([u.core_state[i] for u in payloads]), device=self._device)
            for i in range(len(payloads[0].core_state))
        )
        return batch

    @property
    def statistics(self) -> dict[str, float]:
        return {
            "learner_steps": self._learner_steps,
            "env_steps_learned": self._env_steps,
            **self._statistics,
        }

    def state_dict(self) -> dict:
        return {
            "network": self._network.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "env_steps": self._env_steps,
            "learner_steps": self._learner_steps,
        }

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
