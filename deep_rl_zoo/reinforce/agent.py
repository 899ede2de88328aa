"""REINFORCE (Williams 1992, "Simple statistical gradient-following algorithms for connectionist
reinforcement learning", https://doi.org/10.1007/BF00992696): sample actions from a stochastic policy,
and at the end of each episode take one gradient step on -sum_t G_t log pi(a_t | s_t), with G_t the
Monte-Carlo discounted return from step t."""

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import multistep, policy_gradient
from deep_rl_zoo.optimization import apply_gradients
from deep_rl_zoo.types_ import TimeStep

# Steps per forward/backward pass when learning from an episode: gradients of the chunks accumulate, so
# a long Atari episode never needs all its activations in memory at once.
LEARN_CHUNK_SIZE = 1024


def normalize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """x shifted to mean 0 and scaled to standard deviation 1 (a single element becomes 0)."""
    if x.numel() < 2:
        return torch.zeros_like(x)
    return (x - x.mean()) / (x.std() + eps)


def episode_chunks(num_steps: int) -> list[slice]:
    """The slices of an episode's steps that one forward/backward pass takes (LEARN_CHUNK_SIZE each)."""
    return [slice(start, start + LEARN_CHUNK_SIZE) for start in range(0, num_steps, LEARN_CHUNK_SIZE)]


class EpisodeAgent:
    """What REINFORCE and REINFORCE with a baseline share: an agent that samples its actions from a policy
    network, records whole episodes (or lives, on Atari) and learns once at their end.

    Episode memory, one entry per env step (the last timestep of an episode adds no action):

        timestep   first: s_0     s_1, r_0     s_2, r_1   ...   last: s_T, r_{T-1}
        stored     s_0, a_0       s_1, a_1     s_2, a_2   ...   (learn from s_0..s_{T-1}, r_0..r_{T-1})

    A truncated episode is learnt like a terminated one (the return is cut at the time limit): neither
    agent bootstraps, REINFORCE having no value function and the baseline only being subtracted.
    Subclasses give `_learn`, called at the end of an episode of at least one step.
    """

    def __init__(self, policy_network: nn.Module, discount: float, device: torch.device):
        self._policy_network = policy_network
        self._discount = discount
        self._device = device
        self._observations: list[np.ndarray] = []
        self._actions: list[int] = []
        self._rewards: list[float] = []
        self._env_steps = 0
        self._learner_steps = 0
        self._stats: dict[str, float] = {}

    def step(self, timestep: TimeStep) -> int:
        """Records `timestep`; at the end of an episode learns from it; returns a sampled action."""
        if not timestep.first:
            self._env_steps += 1
            self._rewards.append(timestep.reward)
        if timestep.last:
            if self._rewards:
                self._learn()
            return 0  # ignored by the loop
        action = self._act(timestep.observation)
        self._observations.append(timestep.observation)
        self._actions.append(action)
        return action

    def reset(self) -> None:
        self._observations, self._actions, self._rewards = [], [], []

    @torch.no_grad()
    def _act(self, observation: np.ndarray) -> int:
        x = torch.as_tensor(observation, device=self._device).unsqueeze(0)
        return int(self._policy_network(x).distribution().sample().item())

    def _episode(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The recorded episode on the CPU: the Monte-Carlo returns G_t [T], states s_0..s_{T-1} and
        actions a_0..a_{T-1} [T]."""
        r_t = torch.tensor(self._rewards, dtype=torch.float32).unsqueeze(1)
        discount_t = torch.full_like(r_t, self._discount)
        discount_t[-1] = 0.0  # the return stops at the end of the episode, terminated or truncated
        returns = multistep.discounted_returns(r_t, discount_t, torch.zeros(1)).squeeze(1)
        observations = torch.as_tensor(np.stack(self._observations))
        return returns, observations, torch.as_tensor(self._actions, dtype=torch.int64)

    def _learn(self) -> None:
        raise NotImplementedError

    @property
    def statistics(self) -> dict[str, float]:
        return {**self._stats, "learner_steps": self._learner_steps}


class Reinforce(EpisodeAgent):
    """A REINFORCE agent: one gradient step per episode (or life), its memory as in `EpisodeAgent`.
    Its statistics `weight_*` describe the policy-gradient weights of the last update (the returns, or
    the normalised returns)."""

    agent_name = "REINFORCE"

    def __init__(
        self,
        *,
        policy_network: nn.Module,
        optimizer: torch.optim.Optimizer,
        discount: float,
        normalize_returns: bool,
        entropy_coef: float,
        max_grad_norm: float,
        device: torch.device,
    ):
        """
        Args:
          policy_network: returns an output with `.distribution()` (e.g. `networks.policy.ActorOutput`).
          optimizer: over the policy network's parameters.
          discount: gamma of the Monte-Carlo return.
          normalize_returns: shift and scale each episode's returns to mean 0 and std 1 before using them
            as the policy-gradient weights (a simple variance reduction).
          entropy_coef: weight of the entropy bonus; 0 for the plain algorithm.
          max_grad_norm: global gradient-norm clip; 0 disables it.
        """
        super().__init__(policy_network, discount, device)
        self._optimizer = optimizer
        self._normalize_returns = normalize_returns
        self._entropy_coef = entropy_coef
        self._max_grad_norm = max_grad_norm
        self._stats = dict.fromkeys(
            ("loss", "grad_norm", "entropy", "weight_mean", "weight_std"), float("nan")
        )

    def _learn(self) -> None:
        num_steps = len(self._rewards)
        returns, observations, actions = self._episode()
        weights = normalize(returns) if self._normalize_returns else returns
        self._optimizer.zero_grad(set_to_none=True)
        total_loss, total_entropy = 0.0, 0.0
        for chunk in episode_chunks(num_steps):
            dist = self._policy_network(observations[chunk].to(self._device)).distribution()
            pg = policy_gradient.policy_gradient_loss(
                dist.log_prob(actions[chunk].to(self._device)), weights[chunk].to(self._device)
            )
            entropy = policy_gradient.entropy_loss(dist.entropy())
            # Sums divided by the episode length: the chunks add up to the mean over the episode.
            loss = (pg.loss.sum() + self._entropy_coef * entropy.loss.sum()) / num_steps
            loss.backward()
            total_loss += loss.item()
            total_entropy -= entropy.loss.sum().item()
        step = apply_gradients(
            total_loss,
            self._optimizer,
            self._policy_network.parameters(),
            self._max_grad_norm,
            self._learner_steps + 1,
        )
        self._learner_steps += 1
        self._stats = {
            "loss": total_loss,
            "grad_norm": step.grad_norm,
            "entropy": total_entropy / num_steps,
            "weight_mean": weights.mean().item(),
            "weight_std": weights.std().item() if num_steps > 1 else 0.0,
        }

    def state_dict(self) -> dict:
        return {
            "network": self._policy_network.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "env_steps": self._env_steps,
            "learner_steps": self._learner_steps,
            # Actions are sampled from torch's default generator (seeded once in main).
            "torch_rng": torch.get_rng_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self._policy_network.load_state_dict(state["network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        torch.set_rng_state(state["torch_rng"])
