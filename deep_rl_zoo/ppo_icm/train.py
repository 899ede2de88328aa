"""PPO-ICM's configuration, its network/learner/actor builders, and the `main` its run scripts share."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from deep_rl_zoo import distributed, environments, optimization, schedules, unrolls
from deep_rl_zoo.config import PolicyEvaluation, field
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks import curiosity, policy
from deep_rl_zoo.normalizers import NormalizedNetwork, ObservationNormalizer, RewardScaler
from deep_rl_zoo.ppo import train as ppo_train
from deep_rl_zoo.ppo_icm.agent import PpoIcm
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.trackers import LogCallback

# Pathak et al. feed ICM 42x42 frames: 2x2 blocks of the zoo's 84x84 averaged (`networks.curiosity`).
ICM_IMAGE_DOWNSAMPLE = 2


@dataclasses.dataclass(frozen=True)
class PpoIcmConfig(PolicyEvaluation, distributed.DistributedConfig):
    """PPO-ICM hyper-parameters. The defaults are the classic-control ones, tuned here on MountainCar-v0;
    run_atari has Pathak et al.'s ICM setting (eta 0.01, beta 0.2, Adam 1e-3) on PPO's Atari setting.

    Kept from the paper: beta 0.2, Adam 1e-3, ICM's 256-unit inverse and forward models, gamma 0.99,
    the summed reward with one value head. Changed for MountainCar, and why: the intrinsic reward is
    divided by the running std of its return and eta is 1 (the paper's eta 0.01 assumes the scale of its
    288 conv features; an MLP embedding of a 2-d state has another, so the scale is taken out and eta
    becomes the intrinsic reward's weight), and extrinsic rewards are divided by the running std of
    their return, as for PPO-RND (see PpoRndConfig). PPO's classic settings otherwise (4 actors x 256,
    4 epochs of minibatches of 256, clip 0.2, entropy 0.01). Measured: see README's curiosity results.
    """

    batched_actors = True  # see DistributedConfig
    learner_waits_for_actors = True  # on-policy: the actors wait while it learns (DistributedConfig)

    num_parallel_envs: int = distributed.num_parallel_envs_field(4, "one unroll of each makes a batch")
    num_actors: int = distributed.auto_num_actors_field()
    num_envs: int = distributed.auto_num_envs_field()
    unroll_length: int = field(256, "Env steps per unroll; an update learns from one unroll per actor.")
    num_epochs: int = field(4, "Passes over each batch of unrolls.")
    minibatch_size: int = field(256, "Transitions per gradient step.")
    learning_rate: float = field(1e-3, "Adam learning rate (policy, value and ICM).")
    anneal_learning_rate: bool = field(False, "Decay the learning rate linearly to 0 over the whole run.")
    adam_eps: float = field(1e-5, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma of the summed reward.")
    gae_lambda: float = field(0.95, "GAE lambda.")
    clip_epsilon: float = field(0.2, "Clipping range of the probability ratio.")
    value_coef: float = field(0.5, "Weight of the value loss.")
    entropy_coef: float = field(0.01, "Weight of the entropy bonus.")
    max_grad_norm: float = field(0.5, "Clip each network's gradient norm to this; 0 disables.")
    hidden_sizes: tuple[int, ...] = field((64, 64), "Hidden layer sizes of the MLPs (vector observations).")
    shared_torso: bool = field(False, "One torso for policy and value (always shared on Atari).")
    normalize_observations: bool = field(
        True, "Normalise observations (policy and ICM) by running statistics."
    )
    eta: float = field(1.0, "Scale of the intrinsic reward eta * 0.5 * ||phi_hat - phi||^2; 0: not used.")
    beta: float = field(0.2, "Weight of ICM's forward loss against its inverse loss.")
    icm_hidden_sizes: tuple[int, ...] = field(
        (64, 64), "Layers of ICM's embedding MLP (vector observations)."
    )
    normalize_extrinsic_rewards: bool = field(
        True, "Divide extrinsic rewards by the running std of their discounted return (not in the paper)."
    )
    normalize_intrinsic_reward: bool = field(
        True, "Divide intrinsic rewards by the running std of their discounted return (not in the paper)."
    )

    def __post_init__(self):
        super().__post_init__()
        ppo_train.check_ranges(
            self,
            positive=("num_epochs", "minibatch_size", "learning_rate", "clip_epsilon"),
            unit_interval=("discount", "gae_lambda", "beta"),
            non_negative=("eta", "value_coef", "entropy_coef", "max_grad_norm"),
        )


def build_network(config: PpoIcmConfig, env: gym.Env) -> NormalizedNetwork:
    """PPO's actor-critic, behind an observation normaliser on vectors (the ICM reads through it too)."""
    shape = env.observation_space.shape
    network = policy.build_actor_critic_network(
        shape, int(env.action_space.n), config.hidden_sizes, shared_torso=config.shared_torso
    )
    use_normalizer = config.normalize_observations and not environments.is_atari_config(config)
    return NormalizedNetwork(network, ObservationNormalizer(tuple(shape)) if use_normalizer else None)


def build_learner(config: PpoIcmConfig, env: gym.Env, device: torch.device) -> distributed.DistributedAgents:
    """The learner and a greedy evaluation actor sharing its network (in the learner process)."""
    network = build_network(config, env).to(device)
    icm = curiosity.IntrinsicCuriosityModule(
        env.observation_space.shape,
        int(env.action_space.n),
        config.icm_hidden_sizes,
        image_downsample=ICM_IMAGE_DOWNSAMPLE,
    ).to(device)
    normalizer = network.normalizer if isinstance(network.normalizer, ObservationNormalizer) else None
    learner = PpoIcm(
        network=network,
        icm=icm,
        optimizer=optimization.adam(
            list(network.parameters()) + list(icm.parameters()), config.learning_rate, config.adam_eps
        ),
        num_actors=config.num_actors,
        envs_per_actor=config.num_envs,
        discount=config.discount,
        gae_lambda=config.gae_lambda,
        eta=config.eta,
        beta=config.beta,
        clip_epsilon=config.clip_epsilon,
        num_epochs=config.num_epochs,
        minibatch_size=config.minibatch_size,
        value_coef=config.value_coef,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        learning_rate=schedules.learning_rate_schedule(config),
        rng=np.random.default_rng(config.seed),
        device=device,
        observation_normalizer=normalizer,
        normalize_intrinsic_reward=config.normalize_intrinsic_reward,
        extrinsic_reward_scaler=(
            RewardScaler(config.num_actors * config.num_envs, config.discount)
            if config.normalize_extrinsic_rewards
            else None
        ),
    )
    eval_agent = PolicyGreedyActor(
        unrolls.policy_part(network), device, PpoIcm.agent_name, config.evaluation_samples_actions()
    )
    return distributed.DistributedAgents(learner, eval_agent)


def build_actor(
    config: PpoIcmConfig, env: gym.Env, device: torch.device, link: LearnerLink, seed: int
) -> tuple[unrolls.UnrollActor, nn.Module]:
    """Runs in each actor process: a copy of the network and the actor sampling from it."""
    network = build_network(config, env).to(device).requires_grad_(False)
    policy = unrolls.policy_part(network)
    return ppo_train.unroll_actor(config, env, device, link, seed, policy, PpoIcm.agent_name), network


def main(config: PpoIcmConfig, on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        PpoIcm.agent_name,
        lambda env, device: build_learner(config, env, device),
        build_actor,
        batched_actors=True,
        on_log=on_log,
    )
