"""REINFORCE-with-baseline's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import torch

from deep_rl_zoo import optimization, training
from deep_rl_zoo.config import PolicyEvaluation, RunConfig, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks.policy import build_actor_network, build_critic_network
from deep_rl_zoo.reinforce_baseline import agent
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class ReinforceBaselineConfig(PolicyEvaluation, RunConfig):
    """REINFORCE-with-baseline hyper-parameters; defaults tuned here on CartPole-v1 (see README)."""

    learning_rate: float = field(2e-3, "Adam learning rate of the policy.")
    value_learning_rate: float = field(5e-3, "Adam learning rate of the value baseline.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma of the Monte-Carlo return.")
    normalize_advantages: bool = field(True, "Scale each episode's advantages to mean 0, std 1.")
    entropy_coef: float = field(0.0, "Weight of the entropy bonus.")
    max_grad_norm: float = field(1.0, "Clip each network's gradient norm to this; 0 disables.")
    hidden_sizes: tuple[int, ...] = field((64, 64), "Hidden layer sizes of both MLPs (classic control).")

    def __post_init__(self):
        super().__post_init__()
        for name in ("learning_rate", "value_learning_rate"):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        require(0.0 <= self.discount <= 1.0, f"--discount must be in [0, 1], got {self.discount}")
        require(self.entropy_coef >= 0, f"--entropy_coef must be >= 0, got {self.entropy_coef}")
        require(self.max_grad_norm >= 0, f"--max_grad_norm must be >= 0, got {self.max_grad_norm}")
        require(
            all(h > 0 for h in self.hidden_sizes), f"--hidden_sizes must be positive, got {self.hidden_sizes}"
        )


def build_agents(config: ReinforceBaselineConfig, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and a greedy evaluation actor sharing its policy network."""
    observation_shape = env.observation_space.shape
    policy_network = build_actor_network(observation_shape, int(env.action_space.n), config.hidden_sizes)
    value_network = build_critic_network(observation_shape, config.hidden_sizes)
    policy_network.to(device)
    value_network.to(device)
    optimizer = optimization.adam(
        [
            {"params": policy_network.parameters(), "lr": config.learning_rate},
            {"params": value_network.parameters(), "lr": config.value_learning_rate},
        ],
        config.learning_rate,
        config.adam_eps,
    )
    train_agent = agent.ReinforceBaseline(
        policy_network=policy_network,
        value_network=value_network,
        optimizer=optimizer,
        discount=config.discount,
        normalize_advantages=config.normalize_advantages,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        device=device,
    )
    eval_agent = PolicyGreedyActor(
        policy_network, device, agent.ReinforceBaseline.agent_name, config.evaluation_samples_actions()
    )
    return training.Agents(train_agent, eval_agent)


def main(config: ReinforceBaselineConfig, on_log: LogCallback | None = None):
    return training.train(
        config,
        agent.ReinforceBaseline.agent_name,
        lambda env, device: build_agents(config, env, device),
        on_log=on_log,
    )
