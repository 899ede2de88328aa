"""Agent57's configuration and builders: NGU's (`ngu.train`) with two Q-networks and a bandit per actor."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import distributed
from deep_rl_zoo.agent57.agent import Agent57, Agent57QNetworks, SlidingWindowBandit
from deep_rl_zoo.config import field
from deep_rl_zoo.drqn.obscured import obscuring_wrapper
from deep_rl_zoo.errors import require
from deep_rl_zoo.ngu import train as ngu_train
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class Agent57Config(ngu_train.NguConfig):
    """NGU's hyper-parameters plus the meta-controller's (Badia et al. 2020, Agent57's appendix).

    Classic control keeps NGU's 2 policies: here the bandit, not j = i mod N, picks each episode's j, so
    every actor (every Ape-X epsilon) plays the greedy j = 0 in some episodes whatever N is; with 2 arms
    the bandit's random half (epsilon 0.5) alone plays j = 0 in a quarter of the episodes (N = 4: an
    eighth), which is what the evaluated Q_e(., j = 0) learns from. Atari: the paper's 32, with the
    appendix's discounts (0.9999 for j = 0 down to 0.99; `exploration.agent57_policy_family`); classic
    control keeps NGU's 0.997 .. 0.99 (the appendix's layout needs 10 policies or more)."""

    # Two of NGU's fields mean something else here: the bandit, not the actor's index, picks j, and with
    # the appendix's discounts gamma_max is gamma_7 (gamma_0 is --gamma_exploit).
    num_policies: int = field(
        2, "N, policies of the family (beta_j, gamma_j); each actor's meta-controller picks j per episode."
    )
    gamma_max: float = field(
        0.997, "Discount of j = 0 with --discount_family=ngu; of j = 7 with agent57 (j = 0: --gamma_exploit)."
    )
    bandit_window: int = field(160, "Episodes of each actor's sliding-window UCB meta-controller.")
    bandit_beta: float = field(1.0, "Exploration bonus weight of the UCB meta-controller.")
    bandit_epsilon: float = field(0.5, "Probability the meta-controller picks a random policy index.")
    discount_family: str = field(
        "ngu",
        "'agent57': the appendix's discounts (j = 0 at --gamma_exploit, j = 1 .. 6 between it and "
        "--gamma_max, j = 7 --gamma_max, then down to --gamma_min; needs --num_policies >= 10; run_atari's "
        "default); 'ngu': NGU's, --gamma_max down to --gamma_min (classic control's 2 policies).",
    )
    gamma_exploit: float = field(0.9999, "gamma_0 of --discount_family=agent57 (the exploitative policy).")

    def __post_init__(self):
        super().__post_init__()
        require(self.bandit_window > 0, f"--bandit_window must be positive, got {self.bandit_window}")
        require(self.bandit_beta >= 0, f"--bandit_beta must be >= 0, got {self.bandit_beta}")
        require(
            0 <= self.bandit_epsilon <= 1, f"--bandit_epsilon must be in [0, 1], got {self.bandit_epsilon}"
        )
        require(
            self.discount_family in ("agent57", "ngu"),
            f"--discount_family must be agent57 or ngu, got {self.discount_family!r}",
        )
        if self.discount_family == "agent57":
            require(
                self.num_policies >= 10,
                f"--discount_family=agent57 needs --num_policies >= 10, got {self.num_policies}",
            )
            require(
                self.gamma_max <= self.gamma_exploit < 1.0,
                f"need --gamma_max <= --gamma_exploit < 1, got {self.gamma_max}, {self.gamma_exploit}",
            )


def build_networks(config_values: dict, observation_shape, num_actions: int):
    q = Agent57QNetworks(
        ngu_train.q_network(config_values, observation_shape, num_actions),
        ngu_train.q_network(config_values, observation_shape, num_actions),
        config_values.get("value_rescaling_eps", Agent57Config.value_rescaling_eps),
    )
    window = config_values.get("bandit_window", Agent57Config.bandit_window)
    return ngu_train.build_novelty_modules(config_values, q, observation_shape, num_actions, window)


def build_learner(config: Agent57Config, env: gym.Env, device: torch.device) -> distributed.DistributedAgents:
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    networks = build_networks(dataclasses.asdict(config), shape, num_actions).to(device)
    rng = np.random.default_rng(config.seed)
    learner = Agent57(
        networks=networks,
        optimizer=ngu_train.optimizer_for(config, networks),
        replay=ngu_train.replay_for(config, shape, rng),
        **ngu_train.learner_arguments(config, device),
    )
    eval_actor = ngu_train.evaluation_actor(
        dataclasses.asdict(config),
        networks,
        num_actions,
        config.eval_exploration_epsilon,
        int(rng.integers(2**31)),
        device,
        Agent57.agent_name,
    )
    return distributed.DistributedAgents(learner, eval_actor)


def build_actor(config: Agent57Config, env: gym.Env, device: torch.device, link: LearnerLink, seed: int):
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    networks = build_networks(dataclasses.asdict(config), shape, num_actions).to(device).requires_grad_(False)
    rng = np.random.default_rng(seed)
    bandit = SlidingWindowBandit(
        config.num_policies,
        np.random.default_rng(rng.integers(2**63)),
        config.bandit_window,
        config.bandit_beta,
        config.bandit_epsilon,
    )
    actor = ngu_train.actor_for(
        config, env, device, link, int(rng.integers(2**31)), networks, bandit, Agent57.agent_name
    )
    return actor, networks


def main(config: Agent57Config, on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        Agent57.agent_name,
        lambda env, device: build_learner(config, env, device),
        build_actor,
        wrap_env=obscuring_wrapper(config.obscure_probability),
        on_log=on_log,
    )
