"""Rainbow's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import replay_q_agents, training
from deep_rl_zoo.config import field
from deep_rl_zoo.errors import require
from deep_rl_zoo.networks.value import build_rainbow_network
from deep_rl_zoo.rainbow import agent
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class RainbowConfig(replay_q_agents.ReplayQConfig):
    """Rainbow hyper-parameters: the flags of every replay Q agent (`replay_q_agents`), those of the
    prioritized replay, the categorical support and the noisy layers. Atari defaults (run_atari) follow
    Hessel et al. 2017; classic-control defaults were tuned here on CartPole-v1. There is no epsilon:
    noisy layers explore."""

    num_iterations: int = field(20, "Iterations of training then evaluation; a checkpoint after each.")
    batch_size: int = field(64, "Transitions per gradient step.")
    learning_rate: float = field(5e-4, "Adam learning rate.")
    n_step: int = field(3, "Steps of the bootstrapped return.")
    learn_interval: int = field(2, "Env steps between two gradient steps (2 was faster than 1 here).")
    target_network_update_period: int = field(200, "Gradient steps between two target-network copies.")
    hidden_sizes: tuple[int, ...] = field(
        (128, 128), "MLP torso sizes; the last one is the width of the dueling noisy streams."
    )
    num_atoms: int = field(51, "Atoms of the categorical return distribution.")
    v_min: float = field(-100.0, "Smallest atom (a return).")
    v_max: float = field(100.0, "Largest atom (a return).")
    noisy_sigma0: float = field(0.5, "Initial noise scale of the factorised noisy layers (sigma_0).")
    priority_exponent: float = field(0.5, "alpha: sampling probability is proportional to priority^alpha.")
    importance_sampling_exponent_begin_value: float = field(0.4, "beta at the start of learning.")
    importance_sampling_exponent_end_value: float = field(1.0, "beta after the annealing (1: unbiased).")
    importance_sampling_exponent_decay_steps: int = field(
        100_000, "Env steps over which beta is annealed, after warm-up (the whole run, in the paper)."
    )
    priority_epsilon: float = field(1e-6, "Added to the KL priority so no transition has priority 0.")

    def __post_init__(self):
        super().__post_init__()
        replay_q_agents.check_categorical_support(self)
        replay_q_agents.check_prioritized_replay(self)
        require(self.noisy_sigma0 >= 0, f"--noisy_sigma0 must be >= 0, got {self.noisy_sigma0}")
        require(len(self.hidden_sizes) >= 1, "--hidden_sizes needs at least one size")


def build_network(
    config: RainbowConfig, observation_shape: tuple[int, ...], num_actions: int
) -> torch.nn.Module:
    """The network a config describes; `eval_agent` rebuilds it from a checkpoint's config."""
    atoms = torch.linspace(config.v_min, config.v_max, config.num_atoms)
    return build_rainbow_network(
        observation_shape, num_actions, atoms, config.hidden_sizes, config.noisy_sigma0
    )


def build_agents(config: RainbowConfig, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and an evaluation actor sharing its online network (mean weights)."""
    observation_shape = env.observation_space.shape
    network = build_network(config, observation_shape, int(env.action_space.n)).to(device)
    rng = np.random.default_rng(config.seed)
    train_agent = agent.Rainbow(
        **replay_q_agents.learner_arguments(config, network, device),
        **replay_q_agents.transition_storage(config, observation_shape, rng, prioritized=True),
        importance_sampling_exponent=replay_q_agents.importance_sampling_schedule(config),
        priority_epsilon=config.priority_epsilon,
        overlap_learning=config.overlap_learning,
    )
    return training.Agents(train_agent, agent.MeanNetworkActor(network, device))


def main(config: RainbowConfig, on_log: LogCallback | None = None):
    return training.train(
        config, agent.Rainbow.agent_name, lambda env, device: build_agents(config, env, device), on_log=on_log
    )
