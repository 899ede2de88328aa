"""IMPALA (Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
Actor-Learner Architectures", https://arxiv.org/abs/1802.01561).

Actors (`ImpalaActor`, one process each) sample their copy of the policy for T env steps, send the
unroll with the behaviour policy's logits, pick up the newest parameters if there are any, and go on
without waiting: their policy lags the learner's by a few updates. The learner (`Impala`) takes a
batch of B unrolls in arrival order, runs them through its current network (the LSTM from each
unroll's recorded initial state), corrects for the lag with V-trace and takes one gradient step on

    loss = -mean(A_t log pi(a_t|s_t)) + value_coef * mean(0.5 (v_t - V(s_t))^2) - entropy_coef * mean(H)

over the valid pairs of the batch (see `deep_rl_zoo.unrolls` for the unroll layout).
"""

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from deep_rl_zoo import policy_gradient, unrolls, vtrace
from deep_rl_zoo.main_loop import LearnerLink
from deep_rl_zoo.networks.impala_resnet import ImpalaActorCritic
from deep_rl_zoo.optimization import gradient_step
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.types_ import TimeStep


class ImpalaUnroll(NamedTuple):
    """An `unrolls.Unroll` plus what off-policy correction and the LSTM need (numpy arrays)."""

    actor_index: int
    parameter_version: int  # the parameters the actor held when it sent the unroll
    observation: np.ndarray  # [T + 1, *observation_shape], s_0 ... s_T
    first: np.ndarray  # [T + 1] bool, s_t starts an episode (the LSTM state is reset before it)
    action: np.ndarray  # [T] int64, a_t in s_t (0 where s_t ended an episode)
    behaviour_logits: np.ndarray  # [T, A] float32, mu's logits in s_t
    reward: np.ndarray  # [T] float32, r_{t+1}
    terminated: np.ndarray  # [T] bool, s_{t+1} is terminal
    truncated: np.ndarray  # [T] bool, s_{t+1} was cut by a time limit
    valid: np.ndarray  # [T] bool, s_t did not end an episode (so pair t is a transition)
    core_state: tuple  # LSTM (h, c) each [H] float32 before s_0, or ()


class ImpalaActor:
    """Samples the policy, sends an `ImpalaUnroll` every T steps, then pulls new parameters (if any)
    without waiting for them."""

    def __init__(
        self,
        *,
        network: ImpalaActorCritic,
        link: LearnerLink,
        observation_space: gym.Space,
        unroll_length: int,
        rng: np.random.Generator,
        device: torch.device,
        agent_name: str,
    ):
        self.agent_name = agent_name
        self._network = network
        self._link = link
        self._unroll_length = unroll_length
        self._rng = rng
        self._device = device
        self._observation_dtype = unrolls.observation_dtype(observation_space)
        self._core_state = network.initial_state(1, device)
        self._clear(self._core_state)

    def _clear(self, core_state) -> None:
        self._initial_core_state = tuple(s[0].cpu().numpy() for s in core_state)
        self._observations: list[np.ndarray] = []
        self._first: list[bool] = []
        self._actions: list[int] = []
        self._logits: list[np.ndarray] = []
        self._rewards: list[float] = []
        self._terminated: list[bool] = []
        self._truncated: list[bool] = []
        self._valid: list[bool] = []

    def step(self, timestep: TimeStep) -> int:
        if self._observations:  # timestep completes the pair that started at the previous one
            self._rewards.append(float(timestep.reward))
            self._terminated.append(timestep.terminated)
            self._truncated.append(timestep.truncated)
        self._observations.append(np.asarray(timestep.observation, dtype=self._observation_dtype))
        self._first.append(timestep.first)
        if len(self._observations) == self._unroll_length + 1:
            self._send()
        logits, self._core_state = self._policy(timestep)
        self._valid.append(not timestep.last)
        if timestep.last:  # the env resets next; this action is never used
            self._actions.append(0)
            self._logits.append(np.zeros_like(logits, dtype=np.float32))
            return 0
        cumulative = np.cumsum(np.exp(logits - logits.max()))
        action = int(np.searchsorted(cumulative, self._rng.random() * cumulative[-1], side="right"))
        self._actions.append(action)
        self._logits.append(logits.astype(np.float32))
        return action

    @torch.inference_mode()
    def _policy(self, timestep: TimeStep) -> tuple[np.ndarray, Any]:
        x = torch.as_tensor(self._observations[-1], device=self._device)[None, None]
        first = torch.tensor([[timestep.first]], device=self._device)
        output, core_state = self._network(x, first, self._core_state)
        return output.pi_logits[0, 0].double().cpu().numpy(), core_state

    def _send(self) -> None:
        unroll = ImpalaUnroll(
            actor_index=self._link.actor_index,
            parameter_version=self._link.parameter_version,
            observation=np.stack(self._observations),
            first=np.asarray(self._first, dtype=bool),
            action=np.asarray(self._actions, dtype=np.int64),
            behaviour_logits=np.stack(self._logits),
            reward=np.asarray(self._rewards, dtype=np.float32),
            terminated=np.asarray(self._terminated, dtype=bool),
            truncated=np.asarray(self._truncated, dtype=bool),
            valid=np.asarray(self._valid, dtype=bool),
            core_state=self._initial_core_state,
        )
        last_observation, last_first = self._observations[-1], self._first[-1]
        # The next unroll starts at s_T, whose core state is the one before the network reads s_T.
        self._clear(self._core_state)
        self._observations.append(last_observation)
        self._first.append(last_first)
        self._link.send(unroll)
        self._link.pull_parameters()  # asynchronous: take newer parameters if published, never wait

    def reset(self) -> None:
        pass  # episodes follow each other inside unrolls; `first` resets the LSTM state

    @property
    def statistics(self) -> dict[str, float]:
        return {"parameter_version": self._link.parameter_version}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class ImpalaGreedyActor:
    """Evaluation: the most probable action of the network it is given (the learner's own, during
    training), carrying the LSTM state through each episode."""

    def __init__(self, network: ImpalaActorCritic, device: torch.device, agent_name: str):
        self.agent_name = agent_name
        self._network = network
        self._device = device
        self._core_state = network.initial_state(1, device)

    @torch.inference_mode()
    def step(self, timestep: TimeStep) -> int:
        x = torch.as_tensor(timestep.observation, device=self._device)[None, None]
        first = torch.tensor([[timestep.first]], device=self._device)
        output, self._core_state = self._network(x, first, self._core_state)
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
        self._parameter_version = 1  # what the actors hold: ActorPool publishes once at start
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
                "mean_parameter_lag",
            ),
            float("nan"),
        )

    @property
    def shared_module(self) -> nn.Module:
        return self._network

    def learn(self, payloads: list[ImpalaUnroll]) -> None:
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

        lags = [self._parameter_version - u.parameter_version for u in payloads]
        self._env_steps += num_steps * len(payloads)
        self._learner_steps += 1
        self._parameter_version += 1  # the loop publishes right after this returns
        self._statistics = {
            "loss": loss_value,
            "policy_loss": policy.loss.mean().item(),
            "value_loss": critic.loss.mean().item(),
            "entropy": entropy_term.extra.entropy.mean().item(),
            "mean_clipped_rho": targets.clipped_rho[valid].mean().item(),
            "grad_norm": grad_norm,
            "learning_rate": self._optimizer.param_groups[0]["lr"],
            "mean_parameter_lag": float(np.mean(lags)),  # learner updates the actors were behind
        }

    def _stack(self, payloads: list[ImpalaUnroll]) -> dict[str, Any]:
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
