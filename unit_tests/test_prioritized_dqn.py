"""Prioritized DQN: priorities, importance weights, beta annealing, its own bad input, learning.

Smoke runs of every script, resume and the common bad input: test_replay_q_agents_common.py."""

import csv
import os

import numpy as np
import pytest
import torch

from deep_rl_zoo import environments
from deep_rl_zoo.prioritized_dqn import train
from deep_rl_zoo.types_ import TimeStep

NAME = "PrioritizedDQN"


def tiny_classic_config(tmp_path, **overrides) -> train.PrioritizedDqnConfig:
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
    return train.PrioritizedDqnConfig(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def _drive(agent, env, num_steps):
    """Feeds `num_steps` env steps of `env` to `agent` (whole episodes, reset in between)."""
    observation, _ = env.reset(seed=0)
    agent.reset()
    timestep = TimeStep(observation, 0.0, False, False, True, {})
    for _ in range(num_steps):
        action = agent.step(timestep)
        if timestep.last:
            observation, _ = env.reset()
            agent.reset()
            timestep = TimeStep(observation, 0.0, False, False, True, {})
            continue
        observation, reward, terminated, truncated, _ = env.step(action)
        timestep = TimeStep(observation, float(reward), terminated, truncated, False, {})


def test_learning_sets_priorities_to_td_errors_and_weights_the_loss(tmp_path, monkeypatch):
    config = tiny_classic_config(tmp_path, min_replay_size=16, batch_size=16)
    env = environments.make_environment(config, 0, train=True)
    agent = train.build_agents(config, env, torch.device("cpu")).train_agent
    memory = agent._replay
    seen = []
    real_update = memory.update_priorities

    def spy(indices, priorities):
        seen.append((np.array(indices), np.array(priorities)))
        real_update(indices, priorities)

    monkeypatch.setattr(memory, "update_priorities", spy)
    _drive(agent, env, 40)
    assert seen, "no gradient step happened"
    indices, priorities = seen[-1]
    assert priorities.shape == (16,) and np.all(priorities >= config.priority_epsilon)
    # The stored value is priority^alpha (alpha = 0.6) for the slots just updated.
    np.testing.assert_allclose(
        memory.priorities()[indices[-1]], priorities[-1] ** config.priority_exponent, rtol=1e-6
    )
    assert agent.statistics["importance_sampling_exponent"] > config.importance_sampling_exponent_begin_value


def test_beta_is_annealed_to_one(tmp_path):
    config = tiny_classic_config(
        tmp_path, min_replay_size=16, batch_size=16, importance_sampling_exponent_decay_steps=20
    )
    env = environments.make_environment(config, 0, train=True)
    agent = train.build_agents(config, env, torch.device("cpu")).train_agent
    assert agent.statistics["importance_sampling_exponent"] == pytest.approx(0.4)
    _drive(agent, env, 60)  # 60 > 16 warm-up + 20 decay steps
    assert agent.statistics["importance_sampling_exponent"] == pytest.approx(1.0)


@pytest.mark.learning
def test_prioritized_dqn_learns_cartpole(tmp_path):
    """Prioritized DQN's default classic flags reach a greedy mean of 200 (random play: about 22) within
    10,000 env steps.

    Guards the whole prioritized loop (sampling, weights, priority updates, Double DQN target) on a CI
    budget; every classic default as `run_classic` has it, only fewer iterations. Seeds 1-3 measured
    (deterministic per seed), greedy means after 5,000 and 10,000 env steps: 302/208, 182/262, 260/219:
    every seed passes even on its last evaluation alone, and the better of the two (302, 262, 260) with
    a 30% margin. Seed 1 is the config's default.
    """
    config = train.PrioritizedDqnConfig(
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
    assert best >= 200, f"best greedy evaluation mean {best} after {state.train_env_steps} env steps"
    assert np.isfinite(float(rows[-1]["learner_loss"]))
