"""QR-DQN's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import torch

from deep_rl_zoo import replay_q_agents, training
from deep_rl_zoo.config import field
from deep_rl_zoo.errors import require
from deep_rl_zoo.networks.value import QrQNetwork
from deep_rl_zoo.qr_dqn import agent
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class QrDqnConfig(replay_q_agents.EpsilonGreedyConfig):
    """QR-DQN hyper-parameters: the flags of every epsilon-greedy replay Q agent (`replay_q_agents`) and
    the quantiles. Atari defaults (run_atari) follow Dabney et al. 2017; the classic-control defaults
    below were tuned here on CartPole-v1 (3-step returns, a faster target refresh)."""

    batch_size: int = field(64, "Transitions per gradient step.")
    learning_rate: float = field(5e-4, "Adam learning rate.")
    n_step: int = field(3, "Steps of the bootstrapped return.")
    learn_interval: int = field(1, "Env steps between two gradient steps.")
    target_network_update_period: int = field(200, "Gradient steps between two target-network copies.")
    exploration_epsilon_decay_steps: int = field(
        10_000, "Env steps over which epsilon decays, after warm-up."
    )
    num_quantiles: int = field(51, "N, the number of fixed quantile fractions (2i + 1) / 2N.")
    huber_delta: float = field(1.0, "kappa of the quantile Huber loss; 0 for the plain quantile loss.")

    def __post_init__(self):
        super().__post_init__()
        require(self.num_quantiles > 0, f"--num_quantiles must be positive, got {self.num_quantiles}")
        require(self.huber_delta >= 0, f"--huber_delta must be >= 0, got {self.huber_delta}")


def build_network(config: QrDqnConfig, observation_shape: tuple[int, ...], num_actions: int) -> QrQNetwork:
    """The network a config describes; `eval_agent` rebuilds it from a checkpoint's config."""
    return QrQNetwork(observation_shape, num_actions, config.num_quantiles, config.hidden_sizes)


def build_agents(config: QrDqnConfig, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and an evaluation actor sharing its online network."""
    return replay_q_agents.build_epsilon_greedy_agents(
        config,
        env,
        device,
        agent.QrDqn,
        build_network,
        num_quantiles=config.num_quantiles,
        huber_delta=config.huber_delta or None,
    )


def main(config: QrDqnConfig, on_log: LogCallback | None = None):
    return training.train(
        config, agent.QrDqn.agent_name, lambda env, device: build_agents(config, env, device), on_log=on_log
    )
