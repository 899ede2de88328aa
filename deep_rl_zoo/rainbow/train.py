"""Rainbow's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import run_support
from deep_rl_zoo.config import RunConfig, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.networks.value import build_rainbow_network
from deep_rl_zoo.rainbow import agent
from deep_rl_zoo.schedules import LinearSchedule


@dataclasses.dataclass(frozen=True)
class RainbowConfig(RunConfig):
    """Rainbow hyper-parameters. Atari defaults (run_atari) follow Hessel et al. 2017; classic-control
    defaults were tuned here on CartPole-v1. There is no epsilon: noisy layers explore."""

    num_iterations: int = field(20, "Iterations of training then evaluation; a checkpoint after each.")
    replay_capacity: int = field(50_000, "Transitions the replay holds.")
    min_replay_size: int = field(1000, "Transitions collected before learning starts.")
    batch_size: int = field(64, "Transitions per gradient step.")
    learning_rate: float = field(5e-4, "Adam learning rate.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    n_step: int = field(3, "Steps of the bootstrapped return.")
    learn_interval: int = field(2, "Env steps between two gradient steps (2 was faster than 1 here).")
    target_network_update_period: int = field(200, "Gradient steps between two target-network copies.")
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
    max_grad_norm: float = field(10.0, "Clip the gradient's global norm to this; 0 disables.")
    checkpoint_replay: bool = run_support.checkpoint_replay_field()
    hidden_sizes: tuple[int, ...] = field(
        (128, 128), "MLP torso sizes; the last one is the width of the dueling noisy streams."
    )

    def __post_init__(self):
        super().__post_init__()
        for name in (
            "replay_capacity",
            "batch_size",
            "n_step",
            "learn_interval",
            "target_network_update_period",
        ):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        require(self.min_replay_size >= 0, f"--min_replay_size must be >= 0, got {self.min_replay_size}")
        require(
            self.batch_size <= self.replay_capacity,
            f"--batch_size={self.batch_size} is larger than --replay_capacity={self.replay_capacity}",
        )
        require(
            self.min_replay_size <= self.replay_capacity,
            f"--min_replay_size={self.min_replay_size} is larger than --replay_capacity={self.replay_capacity}",
        )
        require(0.0 <= self.discount <= 1.0, f"--discount must be in [0, 1], got {self.discount}")
        require(self.learning_rate > 0, f"--learning_rate must be positive, got {self.learning_rate}")
        require(self.num_atoms >= 2, f"--num_atoms must be >= 2, got {self.num_atoms}")
        require(self.v_min < self.v_max, f"--v_min ({self.v_min}) must be below --v_max ({self.v_max})")
        require(self.noisy_sigma0 >= 0, f"--noisy_sigma0 must be >= 0, got {self.noisy_sigma0}")
        require(
            self.priority_exponent >= 0, f"--priority_exponent must be >= 0, got {self.priority_exponent}"
        )
        for name in ("importance_sampling_exponent_begin_value", "importance_sampling_exponent_end_value"):
            require(
                0.0 <= getattr(self, name) <= 1.0, f"--{name} must be in [0, 1], got {getattr(self, name)}"
            )
        require(
            self.importance_sampling_exponent_decay_steps >= 0,
            "--importance_sampling_exponent_decay_steps must be >= 0",
        )
        require(
            self.priority_epsilon > 0, f"--priority_epsilon must be positive, got {self.priority_epsilon}"
        )
        require(len(self.hidden_sizes) >= 1, "--hidden_sizes needs at least one size")


def build_network(config: RainbowConfig, observation_shape, num_actions: int) -> torch.nn.Module:
    atoms = torch.linspace(config.v_min, config.v_max, config.num_atoms)
    return build_rainbow_network(
        observation_shape, num_actions, atoms, config.hidden_sizes, config.noisy_sigma0
    )


def build_agents(config: RainbowConfig, env: gym.Env, device: torch.device) -> run_support.Agents:
    """The learning agent and an evaluation actor sharing its online network (mean weights)."""
    observation_shape = env.observation_space.shape
    network = build_network(config, observation_shape, int(env.action_space.n)).to(device)
    rng = np.random.default_rng(config.seed)
    frame_store = replay_lib.frame_store_for(observation_shape, config.replay_capacity, config.n_step)
    train_agent = agent.Rainbow(
        network=network,
        optimizer=torch.optim.Adam(
            network.parameters(), lr=config.learning_rate, eps=config.adam_eps, fused=True
        ),
        replay=replay_lib.PrioritizedReplay(
            config.replay_capacity,
            priority_exponent=config.priority_exponent,
            rng=np.random.default_rng(rng.integers(2**63)),
        ),
        transition_accumulator=replay_lib.TransitionAccumulator(n=config.n_step, discount=config.discount),
        importance_sampling_exponent=LinearSchedule(
            begin_value=config.importance_sampling_exponent_begin_value,
            end_value=config.importance_sampling_exponent_end_value,
            begin_t=config.min_replay_size,
            decay_steps=config.importance_sampling_exponent_decay_steps,
        ),
        priority_epsilon=config.priority_epsilon,
        min_replay_size=config.min_replay_size,
        learn_interval=config.learn_interval,
        batch_size=config.batch_size,
        target_network_update_period=config.target_network_update_period,
        max_grad_norm=config.max_grad_norm,
        device=device,
        frame_store=frame_store,
    )
    return run_support.Agents(train_agent, agent.MeanNetworkActor(network, device))


def main(config: RainbowConfig):
    return run_support.train(
        config, agent.Rainbow.agent_name, lambda env, device: build_agents(config, env, device)
    )
