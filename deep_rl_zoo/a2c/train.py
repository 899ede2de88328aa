"""A2C's and A2C-grad's configuration, builders, and the `main`s the run scripts share."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from deep_rl_zoo import distributed, unrolls
from deep_rl_zoo.a2c.agent import A2c, A2cGrad, GradientComputer
from deep_rl_zoo.config import PolicyEvaluation, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks import policy
from deep_rl_zoo.normalizers import NormalizedNetwork
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.schedules import learning_rate_schedule
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class A2cConfig(PolicyEvaluation, distributed.DistributedConfig):
    """A2C hyper-parameters. Defaults are the classic-control ones tuned here on CartPole-v1 (4 actors x
    16 steps, RMSprop 1e-3, entropy 0.01); run_atari uses those of Mnih et al. 2016 / OpenAI baselines
    (16 actors x 5 steps, RMSprop 7e-4)."""

    batched_actors = True  # see DistributedConfig
    learner_waits_for_actors = True  # on-policy: the actors wait while it learns

    num_parallel_envs: int = distributed.num_parallel_envs_field(4, "A3C's actor-learners")
    num_actors: int = distributed.auto_num_actors_field()
    num_envs: int = distributed.auto_num_envs_field()
    unroll_length: int = field(16, "Env steps per unroll; one gradient step per unroll of every actor.")
    learning_rate: float = field(1e-3, "RMSprop learning rate (at the start, if annealed).")
    anneal_learning_rate: bool = field(
        False, "Decay the learning rate linearly to 0 over the whole run (as A3C and baselines' A2C do)."
    )
    rmsprop_alpha: float = field(0.99, "RMSprop smoothing constant.")
    rmsprop_eps: float = field(1e-5, "RMSprop epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    value_coef: float = field(0.5, "Weight of the value loss.")
    entropy_coef: float = field(0.01, "Weight of the entropy bonus.")
    max_grad_norm: float = field(0.5, "Clip the gradient's global norm to this; 0 disables.")
    hidden_sizes: tuple[int, ...] = field((64, 64), "Hidden layer sizes of the MLPs (vector observations).")
    shared_torso: bool = field(False, "One torso for policy and value (always shared on Atari).")

    def __post_init__(self):
        super().__post_init__()
        require(self.learning_rate > 0, f"--learning_rate must be positive, got {self.learning_rate}")
        require(0.0 <= self.discount <= 1.0, f"--discount must be in [0, 1], got {self.discount}")
        for name in ("value_coef", "entropy_coef", "max_grad_norm"):
            require(getattr(self, name) >= 0, f"--{name} must be >= 0, got {getattr(self, name)}")


def build_network(config: A2cConfig, env: gym.Env) -> NormalizedNetwork:
    network = policy.build_actor_critic_network(
        env.observation_space.shape, int(env.action_space.n), config.hidden_sizes, config.shared_torso
    )
    return NormalizedNetwork(network)  # no normaliser: the same module layout as PPO's


def build_learner(
    config: A2cConfig, env: gym.Env, device: torch.device, gradients_from_actors: bool
) -> distributed.DistributedAgents:
    network = build_network(config, env).to(device)
    learner_class = A2cGrad if gradients_from_actors else A2c
    learner = learner_class(
        network=network,
        optimizer=torch.optim.RMSprop(
            network.parameters(), lr=config.learning_rate, alpha=config.rmsprop_alpha, eps=config.rmsprop_eps
        ),
        num_actors=config.num_actors,
        discount=config.discount,
        value_coef=config.value_coef,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        device=device,
        learning_rate=_learning_rate_by_update(config) if config.anneal_learning_rate else None,
    )
    return distributed.DistributedAgents(
        learner,
        PolicyGreedyActor(network, device, learner_class.agent_name, config.evaluation_samples_actions()),
    )


def _learning_rate_by_update(config: A2cConfig):
    """The annealed learning rate of update k: every update learns from one unroll of every env."""
    schedule = learning_rate_schedule(config)
    batch = config.num_actors * config.num_envs * config.unroll_length
    return lambda k: schedule(k * batch)


def build_actor(
    config: A2cConfig, env: gym.Env, device: torch.device, link: LearnerLink, seed: int
) -> tuple[unrolls.UnrollActor, nn.Module]:
    """Runs in each A2C actor process: sends unrolls."""
    network = build_network(config, env).to(device).requires_grad_(False)
    return _unroll_actor(config, env, device, link, seed, network, A2c.agent_name, None), network


def build_gradient_actor(
    config: A2cConfig, env: gym.Env, device: torch.device, link: LearnerLink, seed: int
) -> tuple[unrolls.UnrollActor, nn.Module]:
    """Runs in each A2C-grad actor process: sends the gradient of A2C's loss on each unroll."""
    network = build_network(config, env).to(device)
    compute_gradient = GradientComputer(
        network, config.discount, config.value_coef, config.entropy_coef, device
    )
    return _unroll_actor(
        config, env, device, link, seed, network, A2cGrad.agent_name, compute_gradient
    ), network


def _unroll_actor(
    config, env, device, link, seed, network, agent_name, process_unrolls
) -> unrolls.UnrollActor:
    return unrolls.UnrollActor(
        policy=unrolls.policy_part(network),
        link=link,
        action_space=env.action_space,
        observation_space=env.observation_space,
        unroll_length=config.unroll_length,
        rng=np.random.default_rng(seed),
        device=device,
        agent_name=agent_name,
        process_unrolls=process_unrolls,
    )


def main(config: A2cConfig, on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        A2c.agent_name,
        lambda env, device: build_learner(config, env, device, False),
        build_actor,
        batched_actors=True,
        on_log=on_log,
    )


def main_grad(config: A2cConfig, on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        A2cGrad.agent_name,
        lambda env, device: build_learner(config, env, device, True),
        build_gradient_actor,
        batched_actors=True,
        on_log=on_log,
    )
