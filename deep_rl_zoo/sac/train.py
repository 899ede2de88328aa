"""SAC's configuration, its network/learner/actor builders, and the `main` every run script shares."""

import copy
import dataclasses
import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from deep_rl_zoo import distributed, optimization, run_folders, unrolls
from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo.config import PolicyEvaluation, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks import common, policy, value
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.sac.agent import Sac, SacNetworks
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class SacConfig(PolicyEvaluation, distributed.DistributedConfig):
    """SAC-discrete hyper-parameters. The defaults are the classic-control ones, tuned here on
    CartPole-v1; run_atari uses the paper's Atari setting (Christodoulou 2019, table 1)."""

    learner_sets_the_pace = True  # a replay ratio: see DistributedConfig

    num_actors: int = field(4, "Actor processes, each with its own environment and copy of the policy.")
    unroll_length: int = field(32, "Env steps per chunk of transitions an actor sends.")
    replay_capacity: int = field(100_000, "Transitions the replay holds (kept across iterations).")
    checkpoint_replay: bool = run_folders.checkpoint_replay_field()
    min_replay_size: int = field(1_000, "Transitions stored before the first gradient step.")
    batch_size: int = field(64, "Transitions per gradient step.")
    updates_per_env_step: float = field(0.5, "Gradient steps per env step received (replay ratio).")
    learning_rate: float = field(1e-3, "Adam learning rate of the Q-networks, the policy and log alpha.")
    adam_eps: float = field(
        1e-8, "Adam epsilon of the Q-networks (and of the policy and log alpha, unless set)."
    )
    policy_adam_eps: float | None = field(
        None,
        "Adam epsilon of the policy and log alpha; unset: --adam_eps. Adam's step of a gradient far below "
        "its epsilon shrinks in proportion, so a larger one here slows only the policy's weakest pulls.",
    )
    discount: float = field(0.99, "Discount factor gamma.")
    target_entropy_ratio: float = field(0.5, "Target entropy as a fraction of the maximum, log |A|.")
    target_update_rate: float = field(
        0.005, "tau: target <- tau * online + (1 - tau) * target, every --target_update_period steps."
    )
    target_update_period: int = field(
        1, "Gradient steps between target updates (1: every step, Polyak; with tau 1: a hard copy)."
    )
    max_grad_norm: float = field(10.0, "Clip each network's gradient norm to this; 0 disables.")
    actor_on_critic_features: bool = field(
        False,
        "Frames only: the actor is a linear policy head on the first critic's convolutional torso, which "
        "only the critics' loss trains (SAC-AE's stopped actor gradient), in place of a network of its own.",
    )
    hidden_sizes: tuple[int, ...] = field((64, 64), "Hidden layer sizes of the MLPs (vector observations).")

    def __post_init__(self):
        super().__post_init__()
        for name in (
            "replay_capacity",
            "batch_size",
            "learning_rate",
            "updates_per_env_step",
            "target_update_period",
        ):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        for name in ("adam_eps", "policy_adam_eps"):
            value = getattr(self, name)
            require(value is None or value > 0, f"--{name} must be positive, got {value}")
        for name in ("discount", "target_update_rate"):
            require(
                0.0 <= getattr(self, name) <= 1.0, f"--{name} must be in [0, 1], got {getattr(self, name)}"
            )
        require(
            0.0 < self.target_entropy_ratio < 1.0,
            f"--target_entropy_ratio must be in (0, 1), got {self.target_entropy_ratio}",
        )
        require(self.max_grad_norm >= 0, f"--max_grad_norm must be >= 0, got {self.max_grad_norm}")
        require(
            self.batch_size <= self.min_replay_size <= self.replay_capacity,
            f"need --batch_size ({self.batch_size}) <= --min_replay_size ({self.min_replay_size}) <= "
            f"--replay_capacity ({self.replay_capacity})",
        )


def build_policy_network(config: SacConfig, env: gym.Env) -> nn.Module:
    """What the actors and the evaluation act with: Nature CNN or MLP, one logit per action. On frames
    every layer starts with He's initialisation, as CleanRL's SAC does (see `build_q_network`)."""
    network = policy.build_actor_network(
        env.observation_space.shape, int(env.action_space.n), config.hidden_sizes
    )
    if common.is_image_observation(env.observation_space.shape):
        common.he_normal_init_(network)
    return network


class ActorOnCriticFeatures(nn.Module):
    """SAC's actor with `--actor_on_critic_features`: a linear policy head on the first critic's torso.

    The torso is the critic's module itself (one set of weights), and the policy's loss never trains it:
    its features come out of the torso without gradient, and the policy's optimiser holds the head alone.
    So the features are what the critics' TD learning keeps (SAC-AE, Yarats et al. 2019, "Improving
    Sample Efficiency in Model-Free Reinforcement Learning from Images", https://arxiv.org/abs/1910.01741,
    stops the actor's gradient into a shared pixel encoder the same way). A linear head on them can
    express the Boltzmann policy softmax(Q1 / alpha) of the critic, whose own head is linear on them too.

    Why: a SAC actor with a torso of its own went blind on Pong within its first few thousand gradient
    steps (docs/agents/sac.md): while alpha is near 1 and the critics' values hardly differ between
    screens, the policy's loss asks for the same distribution on every screen, and silencing the torso's
    ReLUs gives it; units that never fire get no gradient and never come back.

    Its parameters carry the names of `NatureCnnActor`'s (`torso.*`, `policy_head.*`), so actors,
    evaluation and checkpoints use a plain `NatureCnnActor` with them.
    """

    def __init__(self, torso: common.NatureCnnTorso, num_actions: int):
        super().__init__()
        self.torso = torso
        self.policy_head = common.he_normal_init_(nn.Linear(torso.output_size, num_actions))

    def forward(self, x: torch.Tensor) -> policy.ActorOutput:
        with torch.no_grad():  # the critics' features, as constants: no backward through the torso
            features = self.torso(x)
        return policy.ActorOutput(pi_logits=self.policy_head(features))


def load_trained_part(module: nn.Module, checkpoint: dict, name: str) -> None:
    """Loads one of `SacNetworks`' modules (`policy`, `q1`, ...) from a checkpoint's learner state."""
    prefix = name + "."
    weights = checkpoint["agent"]["networks"]
    module.load_state_dict({k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)})


def build_q_network(config: SacConfig, env: gym.Env) -> nn.Module:
    """One of the twin soft Q-networks: Nature CNN or MLP, one value per action.

    On frames every layer of the actor and both critics starts with He's initialisation (normal, std
    sqrt(2 / fan_in)), the output layers included, as CleanRL's discrete SAC, which reaches Pong 19 at 5M
    env steps, does. Two starts failed on Pong here. PyTorch's default leaves the critics' values of Pong
    screens nearly the same on every screen (over 40 random-play screens they varied by 0.0002 across
    states, against 0.0085 with orthogonal gain sqrt(2), seed 0). PPO's actor start (orthogonal, a policy
    head of gain 0.01: a uniform first policy) let the actor's 512 features die while alpha was near 1
    (mean 7e-5 at 100k env steps), then come back at once at 118k: the logits spread by 30 within 1,000 env
    steps, the policy turned deterministic (entropy 1e-7), and its gradient (1e-8) stayed below Adam's
    epsilon of 1e-4, so it could not recover (docs/agents/sac.md).
    """
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    network = value.build_q_network(shape, num_actions, config.hidden_sizes)
    if common.is_image_observation(shape):
        common.he_normal_init_(network)
    return network


def build_learner(config: SacConfig, env: gym.Env, device: torch.device) -> distributed.DistributedAgents:
    """The learner (policy, twin Q-networks and targets, replay) and a greedy evaluation actor."""
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    q1, q2 = build_q_network(config, env), build_q_network(config, env)
    if config.actor_on_critic_features:
        require(
            common.is_image_observation(shape),
            f"--actor_on_critic_features needs frames (an Atari game); {config.environment_name} gives "
            f"vectors of shape {shape}",
        )
        actor = ActorOnCriticFeatures(q1.torso, num_actions)
        actor_parameters = list(actor.policy_head.parameters())
    else:
        actor = build_policy_network(config, env)
        actor_parameters = list(actor.parameters())
    networks = SacNetworks(actor, q1, q2, copy.deepcopy(q1), copy.deepcopy(q2))
    networks.to(device)
    frame_store = None
    if common.is_image_observation(shape):
        # Each chunk re-adds the S frames of its first stack: S - 1 extra frames per T env steps.
        stack = shape[0]
        capacity = replay_lib.frame_store_capacity(config.replay_capacity, 1, stack)
        capacity = math.ceil(capacity * (config.unroll_length + stack) / config.unroll_length)
        frame_store = replay_lib.FrameStackStore(capacity, tuple(shape[1:]), stack)
    policy_eps = config.adam_eps if config.policy_adam_eps is None else config.policy_adam_eps
    learner = Sac(
        networks=networks,
        q_optimizer=optimization.adam(
            [*networks.q1.parameters(), *networks.q2.parameters()], config.learning_rate, config.adam_eps
        ),
        policy_optimizer=optimization.adam(actor_parameters, config.learning_rate, policy_eps),
        alpha_optimizer=optimization.adam([networks.log_alpha], config.learning_rate, policy_eps),
        replay=replay_lib.UniformReplay(config.replay_capacity, np.random.default_rng(config.seed)),
        frame_store=frame_store,
        batch_size=config.batch_size,
        min_replay_size=config.min_replay_size,
        updates_per_env_step=config.updates_per_env_step,
        discount=config.discount,
        target_entropy=config.target_entropy_ratio * math.log(num_actions),
        target_update_rate=config.target_update_rate,
        target_update_period=config.target_update_period,
        max_grad_norm=config.max_grad_norm,
        device=device,
    )
    return distributed.DistributedAgents(
        learner,
        PolicyGreedyActor(networks.policy, device, Sac.agent_name, config.evaluation_samples_actions()),
    )


def build_actor(
    config: SacConfig, env: gym.Env, device: torch.device, link: LearnerLink, seed: int
) -> tuple[unrolls.UnrollActor, nn.Module]:
    """Runs in each actor process: a copy of the policy, sampled by an actor that never waits."""
    network = build_policy_network(config, env).to(device).requires_grad_(False)
    actor = unrolls.UnrollActor(
        policy=network,
        link=link,
        action_space=env.action_space,
        observation_space=env.observation_space,
        unroll_length=config.unroll_length,
        rng=np.random.default_rng(seed),
        device=device,
        agent_name=Sac.agent_name,
        wait_for_parameters=False,
    )
    return actor, network


def main(config: SacConfig, on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        Sac.agent_name,
        lambda env, device: build_learner(config, env, device),
        build_actor,
        on_log=on_log,
    )
