"""Actor-critic: bootstrapped advantages (termination vs truncation), unrolls, end-to-end runs, learning."""

import csv
import os

import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint
from deep_rl_zoo.actor_critic import agent as ac_agent
from deep_rl_zoo.actor_critic import eval_agent, run_atari, train
from deep_rl_zoo.config import PolicyEvalConfig
from deep_rl_zoo.errors import ConfigError, NonFiniteLossError
from deep_rl_zoo.networks.policy import ActorCriticOutput, NatureCnnActorCritic, SeparateActorCritic
from deep_rl_zoo.types_ import TimeStep


def tiny_classic_config(tmp_path, **overrides) -> train.ActorCriticConfig:
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
    return train.ActorCriticConfig(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


class _ConstantActorCritic(torch.nn.Module):
    """Uniform policy over 2 actions and V(s) = c everywhere (parameters only so an optimizer fits)."""

    def __init__(self, c: float):
        super().__init__()
        self.c = torch.nn.Parameter(torch.tensor(c))
        self.logits = torch.nn.Parameter(torch.zeros(2))

    def forward(self, x):
        n = x.shape[0]
        return ActorCriticOutput(pi_logits=self.logits.expand(n, 2), value=self.c.expand(n))


def _make_agent(network=None, unroll_length=2, gae_lambda=1.0):
    network = network if network is not None else _ConstantActorCritic(2.0)
    return ac_agent.ActorCritic(
        network=network,
        optimizer=torch.optim.SGD(network.parameters(), lr=0.0),
        discount=0.5,
        unroll_length=unroll_length,
        gae_lambda=gae_lambda,
        value_coef=0.5,
        entropy_coef=0.0,
        normalize_advantages=False,
        max_grad_norm=0.0,
        device=torch.device("cpu"),
    )


def _steps(agent, rewards, end=None):
    """First timestep, then one per reward; the last one ends the episode as `end` says (or not)."""
    observation = np.zeros(2, dtype=np.float32)
    agent.reset()
    agent.step(TimeStep(observation, 0.0, False, False, True, {}))
    for i, reward in enumerate(rewards):
        last = i == len(rewards) - 1
        terminated, truncated = last and end == "terminated", last and end == "truncated"
        agent.step(TimeStep(observation, reward, terminated, truncated, False, {}))


def test_termination_does_not_bootstrap_and_truncation_does():
    # one step, reward 1, gamma 0.5, V = 2 everywhere:
    # truncated:  target 1 + 0.5 * 2 = 2, advantage 2 - 2 = 0, value loss 0
    # terminated: target 1 + 0 * 2 = 1,   advantage 1 - 2 = -1, value loss 0.5 * 1^2 = 0.5
    truncated, terminated = _make_agent(), _make_agent()
    _steps(truncated, [1.0], end="truncated")
    _steps(terminated, [1.0], end="terminated")
    assert truncated.statistics["advantage_mean"] == pytest.approx(0.0)
    assert truncated.statistics["value_loss"] == pytest.approx(0.0)
    assert terminated.statistics["advantage_mean"] == pytest.approx(-1.0)
    assert terminated.statistics["value_loss"] == pytest.approx(0.5)


def test_unroll_end_bootstraps_from_the_last_state():
    # two steps of reward 1 mid-episode, gamma 0.5, V = 2, lambda 1:
    # G1 = 1 + 0.5 * V(s_2) = 2; G0 = 1 + 0.5 * G1 = 2: both advantages 0
    agent = _make_agent(_ConstantActorCritic(2.0), unroll_length=2)
    _steps(agent, [1.0, 1.0])
    assert agent.statistics["learner_steps"] == 1
    assert agent.statistics["advantage_mean"] == pytest.approx(0.0)


def test_learns_every_unroll_length_steps_and_at_episode_end():
    agent = _make_agent(unroll_length=2)
    _steps(agent, [1.0] * 5, end="terminated")  # unrolls of 2, 2 and 1 steps
    assert agent.statistics["learner_steps"] == 3


def test_lambda_zero_uses_one_step_td_errors():
    # rewards 1, 1 then termination, gamma 0.5, V = 2, lambda 0:
    # delta0 = 1 + 0.5 * 2 - 2 = 0; delta1 = 1 + 0 - 2 = -1: mean advantage -0.5
    agent = _make_agent(unroll_length=4, gae_lambda=0.0)
    _steps(agent, [1.0, 1.0], end="terminated")
    assert agent.statistics["advantage_mean"] == pytest.approx(-0.5)


def test_gradient_step_favours_the_better_action():
    torch.manual_seed(0)
    network = SeparateActorCritic(*_separate_mlps())
    agent = ac_agent.ActorCritic(
        network=network,
        optimizer=torch.optim.SGD(network.parameters(), lr=1.0),
        discount=0.0,
        unroll_length=1,
        gae_lambda=1.0,
        value_coef=0.5,
        entropy_coef=0.0,
        normalize_advantages=False,
        max_grad_norm=0.0,
        device=torch.device("cpu"),
    )
    x = torch.ones(1, 2)
    with torch.no_grad():
        value = network(x).value.item()
    agent._observations, agent._actions, agent._rewards, agent._discounts = (
        [np.ones(2, np.float32)],
        [1],
        [value + 1],
        [0.0],
    )
    before = torch.softmax(network(x).pi_logits, 1)[0, 1].item()
    agent._learn(bootstrap_observation=np.ones(2, np.float32))  # advantage of action 1: +1
    after = torch.softmax(network(x).pi_logits, 1)[0, 1].item()
    assert after > before


def _separate_mlps():
    from deep_rl_zoo.networks.policy import MlpActor, MlpCritic

    return MlpActor(2, 2, (8,)), MlpCritic(2, (8,))


def test_a_nan_loss_stops_the_run_naming_the_step():
    agent = _make_agent()
    with pytest.raises(NonFiniteLossError, match="learner step 1"):
        _steps(agent, [1.0, float("nan")])


def test_unroll_length_must_be_positive():
    with pytest.raises(ValueError, match="unroll_length"):
        _make_agent(unroll_length=0)


@pytest.mark.smoke
def test_run_classic_writes_a_checkpoint_and_a_csv_row_per_iteration(tmp_path):
    state = train.main(tiny_classic_config(tmp_path))
    for iteration in (0, 1):
        assert os.path.isfile(
            tmp_path / "checkpoints" / "ActorCritic_CartPole-v1" / f"ActorCritic_CartPole-v1_{iteration}.ckpt"
        )
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    assert [int(r["train_env_steps"]) for r in rows] == [300, 600]
    # at least one update per 32 env steps
    assert int(rows[-1]["learner_learner_steps"]) >= 600 // 32


@pytest.mark.smoke
def test_run_atari_smoke_uses_the_shared_cnn(tmp_path):
    config = train.ActorCriticConfig(
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
    from deep_rl_zoo import environments

    agents = train.build_agents(
        config, environments.make_environment(config, 0, train=True), torch.device("cpu")
    )
    assert isinstance(agents.train_agent._network, NatureCnnActorCritic)
    assert train.main(config).train_env_steps == 50
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "ActorCritic_Pong" / "ActorCritic_Pong_0.ckpt"),
        "ActorCritic",
        "PongNoFrameskip-v4",
    )
    assert saved["agent"]["learner_steps"] >= 50 // 5


@pytest.mark.smoke
def test_eval_agent_plays_a_checkpoint_and_records_a_video(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    returns = eval_agent.main(
        PolicyEvalConfig(
            num_episodes=2,
            load_checkpoint_file="latest",
            checkpoint_dir=str(tmp_path / "checkpoints"),
            recording_video_dir=str(tmp_path / "recordings"),
        )
    )
    assert len(returns) == 2 and all(r >= 1 for r in returns)
    assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "recordings"))


@pytest.mark.smoke
def test_eval_agent_can_sample_actions(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    returns = eval_agent.main(
        PolicyEvalConfig(
            num_episodes=1,
            eval_sample_actions=True,
            load_checkpoint_file="latest",
            checkpoint_dir=str(tmp_path / "checkpoints"),
            recording_video_dir="",
        )
    )
    assert len(returns) == 1


@pytest.mark.smoke
def test_resume_continues_counters(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=2))
    resumed = train.main(tiny_classic_config(tmp_path, num_iterations=3, resume=True))
    assert resumed.train_env_steps == 900
    final = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "ActorCritic_CartPole-v1" / "ActorCritic_CartPole-v1_2.ckpt"),
        "ActorCritic",
        "CartPole-v1",
    )
    assert final["agent"]["env_steps"] == 900


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
        ({"unroll_length": 0}, "unroll_length"),
        ({"gae_lambda": 1.5}, "gae_lambda"),
        ({"value_coef": -1.0}, "value_coef"),
    ],
)
def test_bad_input_is_rejected_before_any_work(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        train.main(tiny_classic_config(tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")


@pytest.mark.learning
def test_actor_critic_learns_cartpole(tmp_path):
    """Guards the whole actor-critic loop (unrolls, bootstrapping, one update per unroll).

    Threshold: the env's own, a greedy mean of 475 over the 10 episodes of a 5,000-step evaluation.
    Budget: run_classic's defaults (evaluation every 10k env steps) for 80k env steps, what the slowest
    of the five measured seeds needed (README: seeds 1-5 solve at 30k-80k). One process, so seed 1
    (the default, not picked) repeats exactly: 334, 113, 171, then 493 at 40k (measured 2026-12-01;
    about 4 min at a load of 20 on 2 cores). The earlier version (the best of four 1,000-step
    evaluations >= 200 within 20k) could pass on an early peak such as that 334, although the policy
    reads 113 at 20k.
    """
    config = tiny_classic_config(
        tmp_path, num_iterations=8, num_train_steps=10_000, num_eval_steps=5000, stop_when_solved=True
    )
    state = train.main(config)
    assert state.solved, (
        f"ActorCritic did not reach a greedy mean of 475 within {state.train_env_steps} env steps"
    )
