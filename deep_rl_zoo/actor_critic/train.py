"""Actor-critic's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import torch

from deep_rl_zoo import optimization, training
from deep_rl_zoo.actor_critic import agent
from deep_rl_zoo.config import PolicyEvaluation, RunConfig, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks.policy import build_actor_critic_network
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class ActorCriticConfig(PolicyEvaluation, RunConfig):
    """Actor-critic hyper-parameters; defaults tuned here on CartPole-v1 (see README's results)."""

    learning_rate: float = field(1e-3, "Adam learning rate.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    unroll_length: int = field(32, "Env steps per update (fewer at the end of an episode).")
    gae_lambda: float = field(1.0, "GAE lambda: 1 gives n-step advantages, 0 one-step TD errors.")
    value_coef: float = field(0.5, "Weight of the value loss.")
    entropy_coef: float = field(0.01, "Weight of the entropy bonus.")
    normalize_advantages: bool = field(False, "Scale each unroll's advantages to mean 0, std 1.")
    max_grad_norm: float = field(0.5, "Clip the gradient's global norm to this; 0 disables.")
    shared_torso: bool = field(False, "One torso for policy and value (always on for the Atari default).")
    hidden_sizes: tuple[int, ...] = field((64, 64), "Hidden layer sizes of the MLPs (classic control).")

    def __post_init__(self):
        super().__post_init__()
        require(self.learning_rate > 0, f"--learning_rate must be positive, got {self.learning_rate}")
        require(self.unroll_length > 0, f"--unroll_length must be positive, got {self.unroll_length}")
        require(0.0 <= self.discount <= 1.0, f"--discount must be in [0, 1], got {self.discount}")
        require(0.0 <= self.gae_lambda <= 1.0, f"--gae_lambda must be in [0, 1], got {self.gae_lambda}")
        for name in ("value_coef", "entropy_coef", "max_grad_norm"):
            require(getattr(self, name) >= 0, f"--{name} must be >= 0, got {getattr(self, name)}")
        require(
            all(h > 0 for h in self.hidden_sizes), f"--hidden_sizes must be positive, got {self.hidden_sizes}"
        )


def build_agents(config: ActorCriticConfig, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and a greedy evaluation actor sharing its network."""
    network = build_actor_critic_network(
        env.observation_space.shape, int(env.action_space.n), config.hidden_sizes, config.shared_torso
    ).to(device)
    train_agent = agent.ActorCritic(
        network=network,
        optimizer=optimization.adam(network.parameters(), config.learning_rate, config.adam_eps),
        discount=config.discount,
        unroll_length=config.unroll_length,
        gae_lambda=config.gae_lambda,
        value_coef=config.value_coef,
        entropy_coef=config.entropy_coef,
        normalize_advantages=config.normalize_advantages,
        max_grad_norm=config.max_grad_norm,
        device=device,
    )
    eval_agent = PolicyGreedyActor(
        network, device, agent.ActorCritic.agent_name, config.evaluation_samples_actions()
    )
    return training.Agents(train_agent, eval_agent)


def main(config: ActorCriticConfig, on_log: LogCallback | None = None):
    return training.train(
        config,
        agent.ActorCritic.agent_name,
        lambda env, device: build_agents(config, env, device),
        on_log=on_log,
    )
