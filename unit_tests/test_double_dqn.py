"""Double DQN: the double target, its own bad input, learning.

Smoke runs of every script, resume and the common bad input: test_replay_q_agents_common.py."""

import csv
import os

import numpy as np
import pytest
import torch

from deep_rl_zoo import run_support, value_learning
from deep_rl_zoo.double_dqn import train
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.types_ import TimeStep

NAME = "DoubleDQN"


def tiny_classic_config(tmp_path, **overrides) -> train.DoubleDqnConfig:
    values = dict(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_train_steps=300,
        num_eval_steps=200,
        replay_capacity=1000,
        min_replay_size=100,
        batch_size=16,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    values.update(overrides)
    return train.DoubleDqnConfig(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"target_network_update_period": 0}, "target_network_update_period"),
    ],
)
def test_agent_specific_bad_input_is_rejected_before_any_work(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        train.main(tiny_classic_config(tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")


def test_the_online_network_selects_and_the_target_network_evaluates(tmp_path, monkeypatch):
    config = tiny_classic_config(tmp_path, min_replay_size=16, batch_size=16)
    env = run_support.make_environment(config, 0, train=True)
    agent = train.build_agents(config, env, torch.device("cpu")).train_agent
    # Make the two networks disagree, so that selecting with the wrong one would be visible.
    with torch.no_grad():
        for parameter in agent._target_network.parameters():
            parameter.add_(torch.randn_like(parameter))
    calls = []
    real = value_learning.double_qlearning

    def spy(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, **kwargs):
        calls.append((q_t_value.clone(), q_t_selector.clone()))
        return real(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, **kwargs)

    monkeypatch.setattr(value_learning, "double_qlearning", spy)
    observation, _ = env.reset(seed=0)
    agent.reset()
    timestep = TimeStep(observation, 0.0, False, False, True, {})
    while not calls:
        observation, reward, terminated, truncated, _ = env.step(agent.step(timestep))
        timestep = TimeStep(observation, float(reward), terminated, truncated, False, {})
        if timestep.last:
            agent.step(timestep)
            observation, _ = env.reset()
            agent.reset()
            timestep = TimeStep(observation, 0.0, False, False, True, {})
    q_t_value, q_t_selector = calls[0]
    assert not torch.allclose(q_t_value, q_t_selector)  # two different networks at s_t
    assert not q_t_selector.requires_grad and not q_t_value.requires_grad


@pytest.mark.learning
def test_double_dqn_learns_cartpole(tmp_path):
    """Double DQN's default classic flags reach a greedy mean of 150 (random play: about 22) within
    10,000 env steps.

    Guards the whole Double DQN loop on a CI budget: a bug that stops learning leaves the greedy mean
    under 100. Seeds 1-3 measured (runs are deterministic per seed), greedy means after 5,000 and 10,000
    env steps: 220/141, 205/242, 182/500. This early the greedy mean swings by ~100 between two
    evaluations, so the better of the two counts; 150 is under every seed's best (220, 242, 500) with
    a margin. (This test used to run seed 3, the only one of the three above 300, against 300.)
    Seed 1 is the config's default.
    """
    config = train.DoubleDqnConfig(
        seed=1,
        num_iterations=2,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
    )
    state = train.main(config)
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    best = max(float(r["eval_mean_episode_return"]) for r in rows)
    assert best >= 150, f"best greedy evaluation mean {best} after {state.train_env_steps} env steps"
    assert np.isfinite(float(rows[-1]["learner_loss"]))
