"""Double DQN learns CartPole.

Who selects and who evaluates the bootstrap action, with exact tables: test_q_agents_wiring.py
(`test_double_dqn_lets_the_online_network_select_and_the_target_network_evaluate`). Smoke runs of every
script, resume and bad input: test_replay_q_agents_common.py."""

import csv
import os

import numpy as np
import pytest

from deep_rl_zoo.double_dqn import train

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
