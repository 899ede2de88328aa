"""REINFORCE with a learned baseline (Williams 1992, "Simple statistical gradient-following algorithms
for connectionist reinforcement learning", https://doi.org/10.1007/BF00992696, section 4; Sutton &
Barto 2018, section 13.4): at the end of each episode, the policy follows
(G_t - V(s_t)) * grad log pi(a_t | s_t), and the critic V regresses on the Monte-Carlo returns G_t.
Subtracting a state-dependent baseline leaves the gradient unbiased and lowers its variance."""

import torch
from torch import nn

from deep_rl_zoo import policy_gradient
from deep_rl_zoo.optimization import apply_gradients
from deep_rl_zoo.reinforce.agent import EpisodeAgent, episode_chunks


class ReinforceBaseline(EpisodeAgent):
    """REINFORCE with a state-value baseline; one update of actor and critic per episode (or life).

    Episode memory as in `reinforce.agent.EpisodeAgent`: s_0..s_{T-1}, a_0..a_{T-1}, r_0..r_{T-1}.
    The returns are Monte-Carlo returns cut at the end of the episode, so a truncated episode is
    learnt like a terminated one: the baseline is only subtracted, never bootstrapped from.
    """

    agent_name = "REINFORCE-baseline"

    def __init__(
        self,
        *,
        policy_network: nn.Module,
        value_network: nn.Module,
        optimizer: torch.optim.Optimizer,
        discount: float,
        normalize_advantages: bool,
        entropy_coef: float,
        max_grad_norm: float,
        device: torch.device,
    ):
        """
        Args:
          policy_network: returns an output with `.distribution()` (e.g. `networks.policy.ActorOutput`).
          value_network: returns an output with `.value` [B] (e.g. `networks.policy.CriticOutput`).
          optimizer: over both networks' parameters (one parameter group each, with its own rate).
          discount: gamma of the Monte-Carlo return.
          normalize_advantages: scale each episode's advantages G_t - V(s_t) to mean 0, std 1.
          entropy_coef: weight of the entropy bonus.
          max_grad_norm: gradient-norm clip of each network; 0 disables it.
        """
        super().__init__(policy_network, discount, device)
        self._value_network = value_network
        self._optimizer = optimizer
        self._normalize_advantages = normalize_advantages
        self._entropy_coef = entropy_coef
        self._max_grad_norm = max_grad_norm
        self._stats = dict.fromkeys(
            ("loss", "grad_norm", "policy_loss", "value_loss", "entropy", "advantage_std"), float("nan")
        )

    def _learn(self) -> None:
        num_steps = len(self._rewards)
        returns, observations, actions = self._episode()
        returns = returns.to(self._device)
        with torch.no_grad():
            values = torch.cat(
                [
                    self._value_network(observations[chunk].to(self._device)).value
                    for chunk in episode_chunks(num_steps)
                ]
            )
        advantages = returns - values
        if self._normalize_advantages and num_steps > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

        self._optimizer.zero_grad(set_to_none=True)
        sums = dict.fromkeys(("policy_loss", "value_loss", "entropy"), 0.0)
        for chunk in episode_chunks(num_steps):
            x = observations[chunk].to(self._device)
            dist = self._policy_network(x).distribution()
            pg = policy_gradient.policy_gradient_loss(
                dist.log_prob(actions[chunk].to(self._device)), advantages[chunk]
            )
            entropy = policy_gradient.entropy_loss(dist.entropy())
            value = policy_gradient.value_loss(self._value_network(x).value, returns[chunk])
            # Sums divided by the episode length: the chunks add up to means over the episode.
            loss = (pg.loss.sum() + value.loss.sum() + self._entropy_coef * entropy.loss.sum()) / num_steps
            loss.backward()
            sums["policy_loss"] += pg.loss.sum().item()
            sums["value_loss"] += value.loss.sum().item()
            sums["entropy"] += entropy.extra.entropy.sum().item()
        stats = {k: v / num_steps for k, v in sums.items()}
        stats["loss"] = stats["policy_loss"] + stats["value_loss"] - self._entropy_coef * stats["entropy"]
        # Each network's gradient is clipped on its own.
        networks = [list(self._policy_network.parameters()), list(self._value_network.parameters())]
        step = apply_gradients(
            stats["loss"], self._optimizer, networks, self._max_grad_norm, self._learner_steps + 1
        )
        self._learner_steps += 1
        stats["grad_norm"] = step.grad_norm
        stats["advantage_std"] = advantages.std().item() if num_steps > 1 else 0.0
        self._stats = stats

    def state_dict(self) -> dict:
        return {
            "policy_network": self._policy_network.state_dict(),
            "value_network": self._value_network.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "env_steps": self._env_steps,
            "learner_steps": self._learner_steps,
            # Actions are sampled from torch's default generator (seeded once in main).
            "torch_rng": torch.get_rng_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self._policy_network.load_state_dict(state["policy_network"])
        self._value_network.load_state_dict(state["value_network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        torch.set_rng_state(state["torch_rng"])
