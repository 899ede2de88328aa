"""PPO-RND's configuration, its network/learner/actor builders, and the `main` its run scripts share."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from deep_rl_zoo import distributed, environments, optimization, schedules, unrolls
from deep_rl_zoo.config import PolicyEvaluation, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks import curiosity
from deep_rl_zoo.normalizers import NormalizedNetwork, ObservationNormalizer, RewardScaler
from deep_rl_zoo.ppo import train as ppo_train
from deep_rl_zoo.ppo_rnd.agent import PpoRnd
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class PpoRndConfig(PolicyEvaluation, distributed.DistributedConfig):
    """PPO-RND hyper-parameters. The defaults are the classic-control ones, tuned here on MountainCar-v0;
    run_atari has the paper's Atari setting (Burda et al. 2018, appendix A.4).

    Kept from the paper: coefficients 2 (extrinsic) and 1 (intrinsic), gamma_I 0.99, lambda 0.95, 4
    epochs of 4 minibatches, entropy 0.001, 25% of each batch for the predictor. Changed for
    MountainCar, and why: gamma_E 0.99 instead of 0.999, with extrinsic rewards divided by the running
    std of their return (PPO's reward normalisation). With the paper's gamma_E = 0.999 and raw rewards
    of -1 per step, the extrinsic critic chases returns near -1000 (value loss ~130 after 25k env steps)
    and its errors give an extrinsic advantage of std ~4, against ~0.0005 for the intrinsic one: the
    intrinsic reward never showed and seed 1 stayed at -200 for 150k env steps. Adam 1e-3 (the paper's
    1e-4 is for its CNN) and clip 0.2 are PPO's classic settings; 4 actors x 256 steps. Measured: see
    README's curiosity results (seeds 1-3, 500k env steps each).
    """

    batched_actors = True  # see DistributedConfig
    learner_waits_for_actors = True  # on-policy: the actors wait while it learns (DistributedConfig)

    num_parallel_envs: int = distributed.num_parallel_envs_field(4, "one unroll of each makes a batch")
    num_actors: int = distributed.auto_num_actors_field()
    num_envs: int = distributed.auto_num_envs_field()
    unroll_length: int = field(256, "Env steps per unroll; an update learns from one unroll per actor.")
    num_epochs: int = field(4, "Passes over each batch of unrolls.")
    minibatch_size: int = field(256, "Transitions per gradient step.")
    learning_rate: float = field(1e-3, "Adam learning rate (policy, both value heads and the predictor).")
    anneal_learning_rate: bool = field(False, "Decay the learning rate linearly to 0 over the whole run.")
    adam_eps: float = field(1e-5, "Adam epsilon.")
    extrinsic_discount: float = field(0.99, "Discount of the episodic extrinsic return, gamma_E.")
    intrinsic_discount: float = field(0.99, "Discount of the non-episodic intrinsic return, gamma_I.")
    gae_lambda: float = field(0.95, "GAE lambda of both returns.")
    extrinsic_coef: float = field(2.0, "Weight of the extrinsic advantage.")
    intrinsic_coef: float = field(1.0, "Weight of the intrinsic advantage; 0 is plain PPO with two heads.")
    clip_epsilon: float = field(0.2, "Clipping range of the probability ratio.")
    value_coef: float = field(1.0, "Weight of the sum of both value losses (each 0.5 * squared error).")
    entropy_coef: float = field(0.001, "Weight of the entropy bonus.")
    max_grad_norm: float = field(0.5, "Clip each network's gradient norm to this; 0 disables.")
    hidden_sizes: tuple[int, ...] = field((64, 64), "Hidden layer sizes of the MLPs (vector observations).")
    rnd_feature_size: int = field(
        64, "Output features of RND's target and predictor (vectors; 512 on Atari)."
    )
    predictor_proportion: float = field(0.25, "Fraction of each minibatch the RND predictor learns from.")
    observation_warmup_steps: int = field(
        2048, "Env steps of the initial policy that only feed the observation statistics."
    )
    normalize_observations: bool = field(True, "Normalise the policy's observations by running statistics.")
    normalize_extrinsic_rewards: bool = field(
        True, "Divide extrinsic rewards by the running std of their discounted return (not in the paper)."
    )

    def __post_init__(self):
        super().__post_init__()
        ppo_train.check_ranges(
            self,
            positive=("num_epochs", "minibatch_size", "learning_rate", "clip_epsilon", "rnd_feature_size"),
            unit_interval=("extrinsic_discount", "intrinsic_discount", "gae_lambda"),
            non_negative=("extrinsic_coef", "intrinsic_coef", "value_coef", "entropy_coef", "max_grad_norm"),
        )
        require(
            0.0 < self.predictor_proportion <= 1.0,
            f"--predictor_proportion must be in (0, 1], got {self.predictor_proportion}",
        )
        require(
            self.observation_warmup_steps >= 0,
            f"--observation_warmup_steps must be >= 0, got {self.observation_warmup_steps}",
        )


def build_network(config: PpoRndConfig, env: gym.Env) -> NormalizedNetwork:
    """The policy with two value heads, behind the policy's observation normaliser on vectors."""
    shape = env.observation_space.shape
    network = curiosity.build_two_value_actor_critic(shape, int(env.action_space.n), config.hidden_sizes)
    use_normalizer = config.normalize_observations and not environments.is_atari_config(config)
    return NormalizedNetwork(network, ObservationNormalizer(tuple(shape)) if use_normalizer else None)


def acting_policy(network: NormalizedNetwork) -> nn.Module:
    """What an actor needs to act: the MLP actor alone (numpy-mirrored), or the whole CNN network."""
    inner = network.network
    if isinstance(inner, curiosity.MlpTwoValueActorCritic):
        return NormalizedNetwork(inner.actor, network.normalizer)  # the very same parameters
    return network


def build_learner(config: PpoRndConfig, env: gym.Env, device: torch.device) -> distributed.DistributedAgents:
    """The learner and a greedy evaluation actor sharing its network (in the learner process)."""
    network = build_network(config, env).to(device)
    rnd = curiosity.RandomNetworkDistillation(
        env.observation_space.shape, config.hidden_sizes, config.rnd_feature_size
    ).to(device)
    parameters = list(network.parameters()) + rnd.trainable_parameters()
    learner = PpoRnd(
        network=network,
        rnd=rnd,
        optimizer=optimization.adam(parameters, config.learning_rate, config.adam_eps),
        num_actors=config.num_actors,
        envs_per_actor=config.num_envs,
        extrinsic_discount=config.extrinsic_discount,
        intrinsic_discount=config.intrinsic_discount,
        gae_lambda=config.gae_lambda,
        extrinsic_coef=config.extrinsic_coef,
        intrinsic_coef=config.intrinsic_coef,
        clip_epsilon=config.clip_epsilon,
        num_epochs=config.num_epochs,
        minibatch_size=config.minibatch_size,
        value_coef=config.value_coef,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        learning_rate=schedules.learning_rate_schedule(config),
        predictor_proportion=config.predictor_proportion,
        observation_warmup_steps=config.observation_warmup_steps,
        rng=np.random.default_rng(config.seed),
        device=device,
        observation_normalizer=network.normalizer
        if isinstance(network.normalizer, ObservationNormalizer)
        else None,
        extrinsic_reward_scaler=(
            RewardScaler(config.num_actors * config.num_envs, config.extrinsic_discount)
            if config.normalize_extrinsic_rewards
            else None
        ),
    )
    return distributed.DistributedAgents(
        learner,
        PolicyGreedyActor(
            acting_policy(network), device, PpoRnd.agent_name, config.evaluation_samples_actions()
        ),
    )


def build_actor(
    config: PpoRndConfig, env: gym.Env, device: torch.device, link: LearnerLink, seed: int
) -> tuple[unrolls.UnrollActor, nn.Module]:
    """Runs in each actor process: a copy of the policy network and the actor sampling from it."""
    network = build_network(config, env).to(device).requires_grad_(False)
    policy = acting_policy(network)
    return ppo_train.unroll_actor(config, env, device, link, seed, policy, PpoRnd.agent_name), network


def main(config: PpoRndConfig, on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        PpoRnd.agent_name,
        lambda env, device: build_learner(config, env, device),
        build_actor,
        batched_actors=True,
        on_log=on_log,
    )
