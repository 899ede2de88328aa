"""REINFORCE: the agent's return computation, end-to-end smoke runs, resume, bad input, learning."""

import csv
import dataclasses
import os

import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint
from deep_rl_zoo.config import PolicyEvalConfig
from deep_rl_zoo.errors import ConfigError, NonFiniteLossError
from deep_rl_zoo.networks.policy import MlpActor
from deep_rl_zoo.reinforce import agent as reinforce_agent
from deep_rl_zoo.reinforce import eval_agent, run_atari, train
from deep_rl_zoo.types_ import TimeStep


def tiny_classic_config(tmp_path, **overrides) -> train.ReinforceConfig:
    values = dict(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_train_steps=300,
        num_eval_steps=200,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    values.update(overrides)
    return train.ReinforceConfig(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def _make_agent(normalize_returns, network=None, discount=0.5):
    network = network or MlpActor(state_dim=2, num_actions=2, hidden_sizes=(8,))
    return reinforce_agent.Reinforce(
        policy_network=network,
        optimizer=torch.optim.SGD(network.parameters(), lr=0.0),
        discount=discount,
        normalize_returns=normalize_returns,
        entropy_coef=0.0,
        max_grad_norm=0.0,
        device=torch.device("cpu"),
    )


def _play_episode(agent, rewards, terminated=True):
    observation = np.zeros(2, dtype=np.float32)
    agent.reset()
    agent.step(TimeStep(observation, 0.0, False, False, True, {}))
    for i, reward in enumerate(rewards):
        last = i == len(rewards) - 1
        agent.step(TimeStep(observation, reward, last and terminated, last and not terminated, False, {}))


# ----------------------------------------------------------------------------------------------------
# The agent's maths.


def test_learns_once_per_episode_from_its_monte_carlo_returns():
    agent = _make_agent(normalize_returns=False)
    # rewards 1, 2, 4 and gamma 0.5: G = [1 + 0.5 * 4, 2 + 0.5 * 4, 4] = [3, 4, 4]; mean 11 / 3
    _play_episode(agent, [1.0, 2.0, 4.0])
    stats = agent.statistics
    assert stats["learner_steps"] == 1
    assert stats["weight_mean"] == pytest.approx(11 / 3)


def test_truncated_episode_is_also_cut_at_its_end():
    # no critic to bootstrap from: the same returns as a terminated episode
    agent = _make_agent(normalize_returns=False)
    _play_episode(agent, [1.0, 2.0, 4.0], terminated=False)
    assert agent.statistics["weight_mean"] == pytest.approx(11 / 3)


def test_return_normalisation_is_applied_when_its_flag_is_set():
    normalised, raw = _make_agent(normalize_returns=True), _make_agent(normalize_returns=False)
    for agent in (normalised, raw):
        _play_episode(agent, [1.0, 2.0, 4.0])
    assert normalised.statistics["weight_mean"] == pytest.approx(0.0, abs=1e-6)
    assert normalised.statistics["weight_std"] == pytest.approx(1.0, abs=1e-6)
    # unnormalised [3, 4, 4]: sample std sqrt(((3 - 11/3)^2 + 2 (4 - 11/3)^2) / 2) = sqrt(1/3)
    assert raw.statistics["weight_std"] == pytest.approx(np.sqrt(1 / 3))


def test_update_makes_the_rewarded_action_more_likely():
    torch.manual_seed(0)
    network = MlpActor(state_dim=2, num_actions=2, hidden_sizes=(8,))
    agent = reinforce_agent.Reinforce(
        policy_network=network,
        optimizer=torch.optim.SGD(network.parameters(), lr=1.0),
        discount=1.0,
        normalize_returns=False,
        entropy_coef=0.0,
        max_grad_norm=0.0,
        device=torch.device("cpu"),
    )
    observation = np.ones(2, dtype=np.float32)
    agent._observations, agent._actions, agent._rewards = [observation], [1], [1.0]  # action 1, return 1
    before = torch.softmax(network(torch.ones(1, 2)).pi_logits, 1)[0, 1].item()
    agent._learn()
    after = torch.softmax(network(torch.ones(1, 2)).pi_logits, 1)[0, 1].item()
    assert after > before


def test_a_nan_loss_stops_the_run_naming_the_step():
    agent = _make_agent(normalize_returns=False)
    with pytest.raises(NonFiniteLossError, match="learner step 1"):
        _play_episode(agent, [1.0, float("nan")])  # e.g. a broken environment's reward


# ----------------------------------------------------------------------------------------------------
# End to end.


@pytest.mark.smoke
def test_run_classic_writes_a_checkpoint_and_a_csv_row_per_iteration(tmp_path):
    state = train.main(tiny_classic_config(tmp_path))
    for iteration in (0, 1):
        assert os.path.isfile(
            tmp_path / "checkpoints" / "REINFORCE_CartPole-v1" / f"REINFORCE_CartPole-v1_{iteration}.ckpt"
        )
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    assert [int(r["train_env_steps"]) for r in rows] == [300, 600]
    assert int(rows[-1]["learner_learner_steps"]) >= 1  # learnt at the end of each episode


@pytest.mark.smoke
def test_run_atari_smoke(tmp_path):
    config = train.ReinforceConfig(
        **{
            **run_atari.DEFAULTS,
            "num_iterations": 1,
            "num_train_steps": 50,
            "num_eval_steps": 30,
            "max_episode_steps": 30,
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "runs_dir": str(tmp_path / "runs"),
            "use_tensorboard": False,
            "show_progress": False,
        }
    )
    state = train.main(config)
    assert state.train_env_steps == 50
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "REINFORCE_Pong" / "REINFORCE_Pong_0.ckpt"),
        "REINFORCE",
        "PongNoFrameskip-v4",
    )
    assert saved["agent"]["learner_steps"] >= 1  # a 30-step episode ended and was learnt from


@pytest.mark.smoke
def test_eval_agent_plays_a_checkpoint_greedily_and_records_a_video(tmp_path, capsys):
    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    config = PolicyEvalConfig(
        num_episodes=2,
        load_checkpoint_file=str(
            tmp_path / "checkpoints" / "REINFORCE_CartPole-v1" / "REINFORCE_CartPole-v1_0.ckpt"
        ),
        recording_video_dir=str(tmp_path / "recordings"),
    )
    returns = eval_agent.main(config)
    assert len(returns) == 2 and all(r >= 1 for r in returns)
    assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "recordings"))
    # greedy play is deterministic given the environment's seed: two runs give the same returns
    assert eval_agent.main(dataclasses.replace(config, recording_video_dir="")) == returns
    assert "mean return over 2 episodes" in capsys.readouterr().out


@pytest.mark.smoke
def test_resume_continues_counters_and_optimizer(tmp_path):
    first = train.main(tiny_classic_config(tmp_path, num_iterations=2))
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "REINFORCE_CartPole-v1" / "REINFORCE_CartPole-v1_1.ckpt"),
        "REINFORCE",
        "CartPole-v1",
    )
    resumed = train.main(tiny_classic_config(tmp_path, num_iterations=3, resume=True))
    assert resumed.run_dir == first.run_dir and resumed.train_env_steps == 900
    final = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "REINFORCE_CartPole-v1" / "REINFORCE_CartPole-v1_2.ckpt"),
        "REINFORCE",
        "CartPole-v1",
    )
    assert final["agent"]["env_steps"] == saved["agent"]["env_steps"] + 300
    assert final["agent"]["learner_steps"] > saved["agent"]["learner_steps"]
    assert final["agent"]["optimizer"]["state"][0]["step"] > saved["agent"]["optimizer"]["state"][0]["step"]


@pytest.mark.smoke
def test_same_seed_gives_identical_returns(tmp_path):
    a = train.main(tiny_classic_config(tmp_path / "a", seed=3))
    b = train.main(tiny_classic_config(tmp_path / "b", seed=3))
    keys = ("train_mean_episode_return", "eval_mean_episode_return", "learner_loss")
    rows_a, rows_b = (read_csv(os.path.join(s.run_dir, "results.csv")) for s in (a, b))
    assert [[r[k] for k in keys] for r in rows_a] == [[r[k] for k in keys] for r in rows_b]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"environment_name": "Pendulum-v1"}, "discrete"),
        ({"environment_name": "CartPol-v1"}, "CartPole-v1"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"discount": 1.5}, "discount"),
        ({"hidden_sizes": (64, 0)}, "hidden_sizes"),
    ],
)
def test_bad_input_is_rejected_before_any_work(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        train.main(tiny_classic_config(tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")


def test_resume_without_checkpoint_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no REINFORCE checkpoint"):
        train.main(tiny_classic_config(tmp_path, resume=True))


# ----------------------------------------------------------------------------------------------------


@pytest.mark.learning
def test_reinforce_learns_cartpole(tmp_path):
    """Guards the whole REINFORCE loop: a bug the unit tests miss shows up as a run that never solves.

    Threshold: the env's own, a greedy mean of 475 over the 10 episodes of a 5,000-step evaluation (a
    policy that is only half trained does not reach it by luck). Budget: run_classic's defaults
    (evaluation every 10k env steps) for 30k env steps, what the slowest of the five measured seeds
    needed (README: seeds 1-5 solve at 10k, 10k, 30k, 10k, 30k). One process, so seed 1 (the default,
    not picked) repeats exactly: solved at its first evaluation, 494.7 at 10k, in about 20 s.
    """
    config = tiny_classic_config(
        tmp_path, num_iterations=3, num_train_steps=10_000, num_eval_steps=5000, stop_when_solved=True
    )
    state = train.main(config)
    assert state.solved, (
        f"REINFORCE did not reach a greedy mean of 475 within {state.train_env_steps} env steps"
    )
