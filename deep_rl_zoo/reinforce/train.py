"""REINFORCE's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import torch

from deep_rl_zoo import optimization, training
from deep_rl_zoo.config import PolicyEvaluation, RunConfig, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks.policy import build_actor_network
from deep_rl_zoo.reinforce import agent
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class ReinforceConfig(PolicyEvaluation, RunConfig):
    """REINFORCE hyper-parameters; the defaults were tuned here on CartPole-v1 (see README's results)."""

    learning_rate: float = field(1e-3, "Adam learning rate.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma of the Monte-Carlo return.")
    normalize_returns: bool = field(True, "Scale each episode's returns to mean 0, std 1 before learning.")
    entropy_coef: float = field(0.0, "Weight of the entropy bonus.")
    max_grad_norm: float = field(1.0, "Clip the gradient's global norm to this; 0 disables.")
    hidden_sizes: tuple[int, ...] = field((64, 64), "Hidden layer sizes of the MLP (classic control).")

    def __post_init__(self):
        super().__post_init__()
        require(self.learning_rate > 0, f"--learning_rate must be positive, got {self.learning_rate}")
        require(0.0 <= self.discount <= 1.0, f"--discount must be in [0, 1], got {self.discount}")
        require(self.entropy_coef >= 0, f"--entropy_coef must be >= 0, got {self.entropy_coef}")
        require(self.max_grad_norm >= 0, f"--max_grad_norm must be >= 0, got {self.max_grad_norm}")
        require(
            all(h > 0 for h in self.hidden_sizes), f"--hidden_sizes must be positive, got {self.hidden_sizes}"
        )


def build_agents(config: ReinforceConfig, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and a greedy evaluation actor sharing its policy network."""
    network = build_actor_network(
        env.observation_space.shape, int(env.action_space.n), config.hidden_sizes
    ).to(device)
    train_agent = agent.Reinforce(
        policy_network=network,
        optimizer=optimization.adam(network.parameters(), config.learning_rate, config.adam_eps),
        discount=config.discount,
        normalize_returns=config.normalize_returns,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        device=device,
    )
    eval_agent = PolicyGreedyActor(
        network, device, agent.Reinforce.agent_name, config.evaluation_samples_actions()
    )
    return training.Agents(train_agent, eval_agent)


def main(config: ReinforceConfig, on_log: LogCallback | None = None):
    return training.train(
        config,
        agent.Reinforce.agent_name,
        lambda env, device: build_agents(config, env, device),
        on_log=on_log,
    )
