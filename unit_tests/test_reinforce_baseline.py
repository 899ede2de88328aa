"""REINFORCE with baseline: advantages against the learned baseline, end-to-end runs, bad input, learning."""

import csv
import os

import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint
from deep_rl_zoo.config import PolicyEvalConfig
from deep_rl_zoo.errors import ConfigError, NonFiniteLossError
from deep_rl_zoo.networks.policy import CriticOutput, MlpActor, MlpCritic
from deep_rl_zoo.reinforce_baseline import agent as baseline_agent
from deep_rl_zoo.reinforce_baseline import eval_agent, run_atari, train
from deep_rl_zoo.types_ import TimeStep


def tiny_classic_config(tmp_path, **overrides) -> train.ReinforceBaselineConfig:
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
    return train.ReinforceBaselineConfig(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


class _ConstantCritic(torch.nn.Module):
    """V(s) = c for every state, with one trainable parameter so the optimizer has something to hold."""

    def __init__(self, c: float):
        super().__init__()
        self.c = torch.nn.Parameter(torch.tensor(c))

    def forward(self, x):
        return CriticOutput(value=self.c.expand(x.shape[0]))


def _make_agent(value_network, normalize_advantages=False, policy_lr=0.0, value_lr=0.0):
    policy = MlpActor(state_dim=2, num_actions=2, hidden_sizes=(8,))
    optimizer = torch.optim.SGD(
        [
            {"params": policy.parameters(), "lr": policy_lr},
            {"params": value_network.parameters(), "lr": value_lr},
        ]
    )
    return baseline_agent.ReinforceBaseline(
        policy_network=policy,
        value_network=value_network,
        optimizer=optimizer,
        discount=0.5,
        normalize_advantages=normalize_advantages,
        entropy_coef=0.0,
        max_grad_norm=0.0,
        device=torch.device("cpu"),
    )


def _play_episode(agent, rewards):
    observation = np.zeros(2, dtype=np.float32)
    agent.reset()
    agent.step(TimeStep(observation, 0.0, False, False, True, {}))
    for i, reward in enumerate(rewards):
        agent.step(TimeStep(observation, reward, i == len(rewards) - 1, False, False, {}))


def test_value_loss_is_against_monte_carlo_returns():
    agent = _make_agent(_ConstantCritic(3.0))
    # rewards 1, 2, 4, gamma 0.5: G = [3, 4, 4]; V = 3: errors 0, 1, 1 -> mean 0.5 * (0 + 1 + 1) / 3 = 1/3
    _play_episode(agent, [1.0, 2.0, 4.0])
    assert agent.statistics["value_loss"] == pytest.approx(1 / 3)


def test_baseline_is_subtracted_from_the_return():
    # advantages G - V: [3, 4, 4] - 3 = [0, 1, 1] (mean 2/3), against [3, 4, 4] (mean 11/3) for V = 0
    with_baseline, without = _make_agent(_ConstantCritic(3.0)), _make_agent(_ConstantCritic(0.0))
    for agent in (with_baseline, without):
        _play_episode(agent, [1.0, 2.0, 4.0])
    # near-uniform initial policy over 2 actions: log pi ~ -log 2, so loss ~ log 2 * mean advantage
    assert with_baseline.statistics["policy_loss"] == pytest.approx(np.log(2) * 2 / 3, rel=1e-2)
    assert without.statistics["policy_loss"] == pytest.approx(np.log(2) * 11 / 3, rel=1e-2)


def test_normalised_advantages_have_unit_spread():
    agent = _make_agent(_ConstantCritic(3.0), normalize_advantages=True)
    _play_episode(agent, [1.0, 2.0, 4.0])
    assert agent.statistics["advantage_std"] == pytest.approx(1.0, abs=1e-5)


def test_the_critic_moves_towards_the_returns():
    critic = _ConstantCritic(0.0)
    agent = _make_agent(critic, value_lr=0.1)
    _play_episode(agent, [1.0, 2.0, 4.0])
    # d/dc mean 0.5 (G - c)^2 = -(mean G) = -11/3 at c = 0: c = 0.1 * 11/3
    assert critic.c.item() == pytest.approx(0.1 * 11 / 3)


def test_a_nan_loss_stops_the_run_naming_the_step():
    agent = _make_agent(MlpCritic(2, (8,)))
    with pytest.raises(NonFiniteLossError, match="learner step 1"):
        _play_episode(agent, [1.0, float("nan")])


@pytest.mark.smoke
def test_run_classic_writes_a_checkpoint_and_a_csv_row_per_iteration(tmp_path):
    state = train.main(tiny_classic_config(tmp_path))
    for iteration in (0, 1):
        assert os.path.isfile(
            tmp_path
            / "checkpoints"
            / "REINFORCE-baseline_CartPole-v1"
            / f"REINFORCE-baseline_CartPole-v1_{iteration}.ckpt"
        )
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    assert [int(r["train_env_steps"]) for r in rows] == [300, 600]
    assert float(rows[-1]["learner_value_loss"]) >= 0


@pytest.mark.smoke
def test_run_atari_smoke(tmp_path):
    config = train.ReinforceBaselineConfig(
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
    assert train.main(config).train_env_steps == 50
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "REINFORCE-baseline_Pong" / "REINFORCE-baseline_Pong_0.ckpt"),
        "REINFORCE-baseline",
        "PongNoFrameskip-v4",
    )
    assert saved["agent"]["learner_steps"] >= 1


@pytest.mark.smoke
def test_eval_agent_plays_a_checkpoint_and_records_a_video(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    returns = eval_agent.main(
        PolicyEvalConfig(
            num_episodes=2,
            load_checkpoint_file=str(
                tmp_path
                / "checkpoints"
                / "REINFORCE-baseline_CartPole-v1"
                / "REINFORCE-baseline_CartPole-v1_0.ckpt"
            ),
            recording_video_dir=str(tmp_path / "recordings"),
        )
    )
    assert len(returns) == 2 and all(r >= 1 for r in returns)
    assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "recordings"))


@pytest.mark.smoke
def test_resume_continues_counters(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=2))
    resumed = train.main(tiny_classic_config(tmp_path, num_iterations=3, resume=True))
    assert resumed.train_env_steps == 900
    final = checkpoint.load_checkpoint(
        str(
            tmp_path
            / "checkpoints"
            / "REINFORCE-baseline_CartPole-v1"
            / "REINFORCE-baseline_CartPole-v1_2.ckpt"
        ),
        "REINFORCE-baseline",
        "CartPole-v1",
    )
    assert final["agent"]["env_steps"] == 900


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"environment_name": "Pendulum-v1"}, "discrete"),
        ({"value_learning_rate": -1.0}, "value_learning_rate"),
        ({"entropy_coef": -0.1}, "entropy_coef"),
    ],
)
def test_bad_input_is_rejected_before_any_work(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        train.main(tiny_classic_config(tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")


@pytest.mark.learning
def test_reinforce_baseline_learns_cartpole(tmp_path):
    """Guards the whole REINFORCE-with-baseline loop (policy and critic learning together).

    Threshold: the env's own, a greedy mean of 475 over the 10 episodes of a 5,000-step evaluation.
    Budget: run_classic's defaults (evaluation every 10k env steps) for 40k env steps, what the slowest
    of the five measured seeds needed (README: seeds 1-5 solve at 10k, 20k, 40k, 20k, 10k). One
    process, so seed 1 (the default, not picked) repeats exactly: 500 at its first evaluation (10k).
    """
    config = tiny_classic_config(
        tmp_path, num_iterations=4, num_train_steps=10_000, num_eval_steps=5000, stop_when_solved=True
    )
    state = train.main(config)
    assert state.solved, (
        f"REINFORCE-baseline did not reach a greedy mean of 475 within {state.train_env_steps} env steps"
    )
