"""Advantage actor-critic, single process (the one-worker case of A3C: Mnih et al. 2016, "Asynchronous
Methods for Deep Reinforcement Learning", https://arxiv.org/abs/1602.01783).

Every `unroll_length` env steps (or at the end of an episode) the agent takes one gradient step on

    loss = -log pi(a_t | s_t) * A_t  +  value_coef * 0.5 * (G_t - V(s_t))^2  -  entropy_coef * H(pi(. | s_t))

with A_t the generalized advantage estimate (Schulman et al. 2015, https://arxiv.org/abs/1506.02438)
bootstrapped from the critic, and G_t = A_t + V(s_t) its lambda-return. With lambda = 1 (the default)
A_t is the n-step advantage of A3C: the discounted rewards to the end of the unroll, plus the
discounted value of its last state, minus V(s_t).
"""

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import multistep, policy_gradient
from deep_rl_zoo.optimization import gradient_step
from deep_rl_zoo.types_ import TimeStep


class ActorCritic:
    """Learns from unrolls of at most `unroll_length` transitions, which never span two episodes:

        timestep     s_0 (first)   s_1, r_0   ...   s_T, r_{T-1}     (T = unroll_length, or episode end)
        unroll       s_0, a_0      s_1, a_1   ...   bootstrap state s_T
        discount_t   gamma, or 0 when s_{t+1} is terminal

    The next unroll starts from s_T. A termination at s_T gives discount 0 (nothing bootstrapped);
    a truncation or the plain end of an unroll bootstraps from V(s_T).
    """

    agent_name = "ActorCritic"

    def __init__(
        self,
        *,
        network: nn.Module,
        optimizer: torch.optim.Optimizer,
        discount: float,
        unroll_length: int,
        gae_lambda: float,
        value_coef: float,
        entropy_coef: float,
        normalize_advantages: bool,
        max_grad_norm: float,
        device: torch.device,
    ):
        """
        Args:
          network: returns `networks.policy.ActorCriticOutput` (shared or separate torsos).
          optimizer: over the network's parameters.
          discount: gamma.
          unroll_length: env steps between two updates (fewer at the end of an episode).
          gae_lambda: lambda of GAE; 1 gives n-step advantages, 0 one-step TD errors.
          value_coef: weight of the value loss.
          entropy_coef: weight of the entropy bonus.
          normalize_advantages: scale each unroll's advantages to mean 0, std 1.
          max_grad_norm: global gradient-norm clip; 0 disables it.
        """
        if unroll_length < 1:
            raise ValueError(f"unroll_length must be >= 1, got {unroll_length}")
        self._network = network
        self._optimizer = optimizer
        self._discount = discount
        self._unroll_length = unroll_length
        self._gae_lambda = gae_lambda
        self._value_coef = value_coef
        self._entropy_coef = entropy_coef
        self._normalize_advantages = normalize_advantages
        self._max_grad_norm = max_grad_norm
        self._device = device
        self._observations: list[np.ndarray] = []
        self._actions: list[int] = []
        self._rewards: list[float] = []
        self._discounts: list[float] = []
        self._env_steps = 0
        self._learner_steps = 0
        self._stats = dict.fromkeys(
            ("loss", "grad_norm", "policy_loss", "value_loss", "entropy", "advantage_mean"), float("nan")
        )

    def step(self, timestep: TimeStep) -> int:
        """Records `timestep`, learns when an unroll is complete, and returns a sampled action."""
        if not timestep.first:
            self._env_steps += 1
            self._rewards.append(timestep.reward)
            self._discounts.append(0.0 if timestep.terminated else self._discount)
            if len(self._rewards) == self._unroll_length or timestep.last:
                self._learn(bootstrap_observation=timestep.observation)
                self.reset()
        if timestep.last:
            return 0  # ignored by the loop
        action = self._act(timestep.observation)
        self._observations.append(timestep.observation)
        self._actions.append(action)
        return action

    def reset(self) -> None:
        self._observations, self._actions, self._rewards, self._discounts = [], [], [], []

    @torch.no_grad()
    def _act(self, observation: np.ndarray) -> int:
        x = torch.as_tensor(observation, device=self._device).unsqueeze(0)
        return int(self._network(x).distribution().sample().item())

    def _learn(self, bootstrap_observation: np.ndarray) -> None:
        num_steps = len(self._rewards)
        observations = torch.as_tensor(
            np.stack([*self._observations, bootstrap_observation]), device=self._device
        )
        output = self._network(observations)  # T + 1 states: s_0 .. s_T
        values = output.value  # [T + 1]
        r_t = torch.tensor(self._rewards, dtype=torch.float32, device=self._device).unsqueeze(1)
        discount_t = torch.tensor(self._discounts, dtype=torch.float32, device=self._device).unsqueeze(1)
        advantages = multistep.generalized_advantage_estimation(
            r_t, discount_t, self._gae_lambda, values.detach().unsqueeze(1)
        ).squeeze(1)
        returns = advantages + values[:-1].detach()  # the lambda-returns, the critic's targets
        if self._normalize_advantages and num_steps > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

        dist = output._replace(pi_logits=output.pi_logits[:-1]).distribution()  # pi(. | s_0 .. s_{T-1})
        actions = torch.as_tensor(self._actions, dtype=torch.int64, device=self._device)
        pg = policy_gradient.policy_gradient_loss(dist.log_prob(actions), advantages)
        entropy = policy_gradient.entropy_loss(dist.entropy())
        value = policy_gradient.value_loss(values[:-1], returns)
        loss = (
            pg.loss.mean() + self._value_coef * value.loss.mean() + self._entropy_coef * entropy.loss.mean()
        )

        loss_value, grad_norm = gradient_step(
            loss, self._optimizer, self._network.parameters(), self._max_grad_norm, self._learner_steps + 1
        )
        self._learner_steps += 1
        self._stats = {
            "loss": loss_value,
            "grad_norm": grad_norm,
            "policy_loss": pg.loss.mean().item(),
            "value_loss": value.loss.mean().item(),
            "entropy": entropy.extra.entropy.mean().item(),
            "advantage_mean": pg.extra.advantage.mean().item(),
        }

    @property
    def statistics(self) -> dict[str, float]:
        return {**self._stats, "learner_steps": self._learner_steps}

    def state_dict(self) -> dict:
        return {
            "network": self._network.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "env_steps": self._env_steps,
            "learner_steps": self._learner_steps,
            # Actions are sampled from torch's default generator (seeded once in main).
            "torch_rng": torch.get_rng_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        torch.set_rng_state(state["torch_rng"])
