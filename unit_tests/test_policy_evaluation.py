"""How the policy agents' evaluation picks actions: the arg-max of the policy (a Gaussian's mean) on
classic control, a sample from it on Atari, where an arg-max policy can stall for good.

Measured on a PPO Breakout checkpoint after 250k env steps: after the first lost life the ball waits
for FIRE, and the most probable action on that screen is LEFT (p = 0.61, FIRE 0.18) on every step,
so the greedy evaluation never finished a game in 10k env steps. RL Zoo (Stable-Baselines3) evaluates
Atari agents stochastically by default for the same reason.
"""

import importlib
import typing

import numpy as np
import pytest
import torch

from deep_rl_zoo import environments
from deep_rl_zoo.types_ import TimeStep

POLICY_AGENTS = [
    "reinforce",
    "reinforce_baseline",
    "actor_critic",
    "a2c",
    "ppo",
    "ppo_icm",
    "ppo_rnd",
    "sac",
    "impala",
]


def _modules(name):
    return importlib.import_module(f"deep_rl_zoo.{name}.train"), importlib.import_module(
        f"deep_rl_zoo.{name}.eval_agent"
    )


def _build(train):
    """The training module's builder of its agents: `build_learner` (distributed) or `build_agents`."""
    return getattr(train, "build_learner", None) or train.build_agents


def _config_class(train):
    return typing.get_type_hints(_build(train))["config"]


def _eval_actor(train, **fields):
    """The evaluation actor the training run builds, for a fresh network on the config's environment."""
    config = _config_class(train)(**fields)
    env = environments.make_environment(config, config.seed, train=False)
    try:
        extra = {"gradients_from_actors": False} if train.__name__ == "deep_rl_zoo.a2c.train" else {}
        agents = _build(train)(config, env, torch.device("cpu"), **extra)
        observation, _ = env.reset(seed=0)
    finally:
        env.close()
    return agents.eval_agent, np.asarray(observation)


def _actions(actor, observation, n):
    actor.reset()
    actions = []
    for i in range(n):
        actions.append(actor.step(TimeStep(observation, 0.0, False, False, i == 0, {})))
    return set(actions)


@pytest.mark.parametrize("name", POLICY_AGENTS)
def test_unset_flag_samples_on_atari_and_takes_the_most_probable_action_elsewhere(name):
    train, eval_agent = _modules(name)
    eval_config = typing.get_type_hints(eval_agent.main)["config"]
    for config_class in (_config_class(train), eval_config):
        assert config_class().eval_sample_actions is None
        assert config_class(environment_name="Breakout").evaluation_samples_actions()
        assert not config_class(environment_name="CartPole-v1").evaluation_samples_actions()
        assert not config_class(
            environment_name="Breakout", eval_sample_actions=False
        ).evaluation_samples_actions()
        assert config_class(
            environment_name="CartPole-v1", eval_sample_actions=True
        ).evaluation_samples_actions()


@pytest.mark.parametrize("name", ["reinforce", "actor_critic", "a2c", "ppo", "sac", "impala"])
def test_training_evaluation_follows_the_flag(name):
    """The evaluation actor of a training run: one action for a repeated screen when it takes the
    most probable action, several when it samples (a fresh network's policy is near uniform)."""
    train, _ = _modules(name)
    torch.manual_seed(0)
    small = dict(environment_name="CartPole-v1", seed=1)
    greedy, observation = _eval_actor(train, **small)
    assert len(_actions(greedy, observation, 40)) == 1
    sampling, observation = _eval_actor(train, eval_sample_actions=True, **small)
    assert len(_actions(sampling, observation, 40)) == 2


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ppo", "impala"])
def test_atari_evaluation_samples_by_default(name):
    train, _ = _modules(name)
    torch.manual_seed(0)
    actor, observation = _eval_actor(train, environment_name="Breakout", seed=1)
    assert len(_actions(actor, observation, 40)) > 1
    actor, observation = _eval_actor(train, environment_name="Breakout", seed=1, eval_sample_actions=False)
    assert len(_actions(actor, observation, 40)) == 1


def test_only_value_based_eval_scripts_offer_an_exploration_epsilon():
    """A policy agent's `eval_agent` has no epsilon-greedy actor, so it must not offer the flag."""
    import dataclasses
    import pathlib

    import deep_rl_zoo

    root = pathlib.Path(deep_rl_zoo.__file__).parent
    packages = sorted(p.parent.name for p in root.glob("*/eval_agent.py"))
    assert set(POLICY_AGENTS) < set(packages)
    for name in packages:
        eval_config = typing.get_type_hints(_modules(name)[1].main)["config"]
        fields = {f.name for f in dataclasses.fields(eval_config)}
        assert ("eval_exploration_epsilon" in fields) == (name not in POLICY_AGENTS), name
        assert ("eval_sample_actions" in fields) == (name in POLICY_AGENTS), name
