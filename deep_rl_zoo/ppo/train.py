"""PPO's configuration, its network/learner/actor builders, and the `main` every run script shares."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from deep_rl_zoo import distributed, optimization, unrolls
from deep_rl_zoo.config import PolicyEvaluation, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks import policy
from deep_rl_zoo.normalizers import NormalizedNetwork, ObservationNormalizer, RewardScaler
from deep_rl_zoo.ppo.agent import Ppo
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.schedules import learning_rate_schedule
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class PpoConfig(PolicyEvaluation, distributed.DistributedConfig):
    """PPO hyper-parameters. The defaults are the classic-control ones, tuned here on CartPole-v1:
    RL Baselines3 Zoo's tuned CartPole setting (gamma 0.98, lambda 0.8, Adam 1e-3 decayed to 0, no
    entropy bonus) with 4 actors x 256 steps and 10 epochs of minibatches of 512: 20 gradient steps
    per 1024 env steps, a quarter of the Zoo's 20 per 256; seeds 1, 2, 3 reached 475 after 10k, 61k
    and 61k env steps. run_atari and run_continuous have their own defaults."""

    batched_actors = True  # see DistributedConfig
    learner_waits_for_actors = True  # on-policy: the actors wait while it learns

    num_parallel_envs: int = distributed.num_parallel_envs_field(4, "the PPO paper's N actors")
    num_actors: int = distributed.auto_num_actors_field()
    num_envs: int = distributed.auto_num_envs_field()
    unroll_length: int = field(256, "Env steps per unroll; an update learns from one unroll per actor.")
    num_epochs: int = field(10, "Passes over each batch of unrolls.")
    minibatch_size: int = field(512, "Transitions per gradient step.")
    learning_rate: float = field(1e-3, "Adam learning rate (at the start, if annealed).")
    anneal_learning_rate: bool = field(True, "Decay the learning rate linearly to 0 over the whole run.")
    adam_eps: float = field(1e-5, "Adam epsilon.")
    discount: float = field(0.98, "Discount factor gamma.")
    gae_lambda: float = field(0.8, "GAE lambda.")
    clip_epsilon: float = field(0.2, "Clipping range of the probability ratio.")
    value_clip_epsilon: float = field(0.0, "> 0: clip the value update to this range around the old value.")
    value_coef: float = field(0.5, "Weight of the value loss.")
    entropy_coef: float = field(0.0, "Weight of the entropy bonus.")
    max_grad_norm: float = field(0.5, "Clip the gradient's global norm to this; 0 disables.")
    hidden_sizes: tuple[int, ...] = field((64, 64), "Hidden layer sizes of the MLPs (vector observations).")
    shared_torso: bool = field(False, "One torso for policy and value (always shared on Atari).")
    normalize_observations: bool = field(False, "Normalise observations by running mean and std.")
    normalize_rewards: bool = field(False, "Divide rewards by the running std of the discounted return.")
    initial_action_std: float = field(1.0, "Continuous actions: initial std of the Gaussian policy.")

    def __post_init__(self):
        super().__post_init__()
        check_ranges(
            self,
            positive=("num_epochs", "minibatch_size", "learning_rate", "clip_epsilon", "initial_action_std"),
            unit_interval=("discount", "gae_lambda"),
            non_negative=("value_clip_epsilon", "value_coef", "entropy_coef", "max_grad_norm"),
        )


def check_ranges(
    config: distributed.DistributedConfig,
    *,
    positive: tuple[str, ...],
    unit_interval: tuple[str, ...],
    non_negative: tuple[str, ...],
) -> None:
    """The checks of a PPO-family config (PPO, PPO-RND, PPO-ICM): a one-line `ConfigError` for the first
    field out of its range, or a minibatch larger than one batch of unrolls."""
    for name in positive:
        require(getattr(config, name) > 0, f"--{name} must be positive, got {getattr(config, name)}")
    for name in unit_interval:
        value = getattr(config, name)
        require(0.0 <= value <= 1.0, f"--{name} must be in [0, 1], got {value}")
    for name in non_negative:
        require(getattr(config, name) >= 0, f"--{name} must be >= 0, got {getattr(config, name)}")
    batch = config.num_actors * config.num_envs * config.unroll_length
    require(
        config.minibatch_size <= batch,
        f"--minibatch_size={config.minibatch_size} is larger than a batch of --num_actors x --num_envs x "
        f"--unroll_length = {batch} transitions",
    )


def build_network(config: PpoConfig, env: gym.Env) -> NormalizedNetwork:
    """The actor-critic (categorical or Gaussian), behind an observation normaliser if configured."""
    shape = env.observation_space.shape
    if unrolls.is_continuous(env.action_space):
        state_dim, action_dim = int(shape[0]), int(env.action_space.shape[0])
        network = policy.GaussianActorCritic(
            policy.GaussianMlpActor(state_dim, action_dim, config.hidden_sizes, config.initial_action_std),
            policy.MlpCritic(state_dim, config.hidden_sizes),
        )
    else:
        network = policy.build_actor_critic_network(
            shape, int(env.action_space.n), config.hidden_sizes, shared_torso=config.shared_torso
        )
    normalizer = ObservationNormalizer(tuple(shape)) if config.normalize_observations else None
    return NormalizedNetwork(network, normalizer)


def build_learner(config: PpoConfig, env: gym.Env, device: torch.device) -> distributed.DistributedAgents:
    """The learner and a greedy evaluation actor sharing its network (in the learner process)."""
    network = build_network(config, env).to(device)
    learner = Ppo(
        network=network,
        optimizer=optimization.adam(network.parameters(), config.learning_rate, config.adam_eps),
        num_actors=config.num_actors,
        discount=config.discount,
        gae_lambda=config.gae_lambda,
        clip_epsilon=config.clip_epsilon,
        num_epochs=config.num_epochs,
        minibatch_size=config.minibatch_size,
        value_coef=config.value_coef,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        learning_rate=learning_rate_schedule(config),
        rng=np.random.default_rng(config.seed),
        device=device,
        observation_normalizer=network.normalizer if config.normalize_observations else None,
        reward_scaler=RewardScaler(config.num_actors * config.num_envs, config.discount)
        if config.normalize_rewards
        else None,
        value_clip_epsilon=config.value_clip_epsilon,
    )
    eval_agent = unrolls.ClippedActionActor(
        PolicyGreedyActor(network, device, Ppo.agent_name, config.evaluation_samples_actions()),
        env.action_space,
    )
    return distributed.DistributedAgents(learner, eval_agent)


def build_actor(
    config: PpoConfig, env: gym.Env, device: torch.device, link: LearnerLink, seed: int
) -> tuple[unrolls.UnrollActor, nn.Module]:
    """Runs in each actor process: a copy of the network and the actor sampling from it."""
    network = build_network(config, env).to(device).requires_grad_(False)
    return unroll_actor(
        config, env, device, link, seed, unrolls.policy_part(network), Ppo.agent_name
    ), network


def unroll_actor(
    config: distributed.DistributedConfig,
    env: gym.Env,
    device: torch.device,
    link: LearnerLink,
    seed: int,
    policy: nn.Module,
    agent_name: str,
) -> unrolls.UnrollActor:
    """The actor of a PPO-family agent: samples `policy` (its copy of the acting part of the network)
    for `--unroll_length` env steps, sends the unroll, waits for new parameters."""
    return unrolls.UnrollActor(
        policy=policy,
        link=link,
        action_space=env.action_space,
        observation_space=env.observation_space,
        unroll_length=config.unroll_length,
        rng=np.random.default_rng(seed),
        device=device,
        agent_name=agent_name,
    )


def main(config: PpoConfig, action_space: str = "discrete", on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        Ppo.agent_name,
        lambda env, device: build_learner(config, env, device),
        build_actor,
        action_space=action_space,
        batched_actors=True,
        on_log=on_log,
    )
