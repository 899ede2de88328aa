"""Agent57: the combined Q in the transformed space, each stream's own target (bootstrapping at the
combined Q's greedy action), the two networks' separate gradients, the sliding-window UCB
meta-controller and its state surviving a resume, smoke runs of every script, and bad input."""

import dataclasses
import functools
import os

import numpy as np
import pytest
import torch

from deep_rl_zoo import exploration, value_learning
from deep_rl_zoo.agent57 import agent, eval_agent, run_atari, train
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.networks.value import RecurrentQInput, RecurrentQNetworkOutput
from deep_rl_zoo.ngu import agent as ngu_agent
from unit_tests.distributed_helpers import (
    TINY_SEQUENCE_RUN,
    PositionVelocityEnv,
    RecordingLink,
    evaluate_latest,
    novelty_learner,
    recurrent_replay_atari_smoke,
    timestep,
    tiny_config,
    train_then_resume,
    train_until_mountaincar_flag,
)

h = value_learning.signed_hyperbolic

# ----------------------------------------------------------------------------------------------------
# Combining the two streams


def test_streams_combine_in_the_untransformed_space():
    # h(h^-1(h(3)) + 0.5 h^-1(h(4))) = h(3 + 0.5 * 4) = h(5)
    combined = agent.combined_q_values(h(torch.tensor([3.0])), h(torch.tensor([4.0])), 0.5)
    torch.testing.assert_close(combined, h(torch.tensor([5.0])))
    # one beta per row: row 0 beta 0 -> h(3); row 1 beta 1 -> h(3 + 4) = h(7)
    combined = agent.combined_q_values(
        h(torch.tensor([[3.0], [3.0]])), h(torch.tensor([[4.0], [4.0]])), torch.tensor([0.0, 1.0])
    )
    torch.testing.assert_close(combined, h(torch.tensor([[3.0], [7.0]])))
    with pytest.raises(ValueError):
        agent.combined_q_values(torch.zeros(2), torch.zeros(3), 0.5)


def _two_stream(extrinsic, intrinsic):
    """[T, B, 2, A] from per-stream [T, B, A] real-scale values (rescaled by h)."""
    return torch.stack([h(torch.tensor(extrinsic)), h(torch.tensor(intrinsic))], dim=-2)


def test_each_stream_learns_its_own_reward_and_bootstraps_at_the_combined_greedy_action():
    # One transition o_0 -> o_1 in two sequences; at o_1 Q_e = [1, 0], Q_i = [0, 10] in both.
    # Sequence 0 plays beta 0: combined [1, 0] -> a* = 0; sequence 1 beta 1: [1, 10] -> a* = 1.
    q = _two_stream(
        [[[0.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]],
        [[[0.0, 0.0], [0.0, 0.0]], [[0.0, 10.0], [0.0, 10.0]]],
    )
    extra = agent.agent57_td_errors(
        q_online=q,
        q_target=q,
        a_tm1=torch.tensor([[0, 0]]),
        r_e=torch.tensor([[1.0, 1.0]]),
        r_i=torch.tensor([[2.0, 2.0]]),
        beta=torch.tensor([[0.0, 1.0], [0.0, 1.0]]),
        discount_t=torch.tensor([[0.5, 0.5]]),
        valid_t=torch.tensor([[True, True]]),
        n_step=1,
    )
    assert extra.bootstrap_action[1].tolist() == [0, 1]
    # extrinsic: 1 + 0.5 * Q_e(o_1, a*) = 1 + 0.5 * 1 = 1.5 (seq 0), 1 + 0.5 * 0 = 1 (seq 1)
    torch.testing.assert_close(extra.extrinsic.target, h(torch.tensor([[1.5, 1.0]])))
    # intrinsic: 2 + 0.5 * Q_i(o_1, a*) = 2 + 0 = 2 (seq 0), 2 + 0.5 * 10 = 7 (seq 1)
    torch.testing.assert_close(extra.intrinsic.target, h(torch.tensor([[2.0, 7.0]])))
    # td = target - h(Q(o_0, a_0)) = target - 0 for both streams
    torch.testing.assert_close(extra.extrinsic.td_error, extra.extrinsic.target)


def test_with_retrace_each_stream_follows_the_combined_epsilon_greedy_policy():
    # The example above with Retrace (lambda 1, target epsilon 0, one transition: G = r + 0.5 E_pi Q'(o_1)):
    # pi is greedy in the combined Q, as the n-step target's a*, so the targets are the same.
    q = _two_stream(
        [[[0.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]],
        [[[0.0, 0.0], [0.0, 0.0]], [[0.0, 10.0], [0.0, 10.0]]],
    )
    arguments = dict(
        q_online=q,
        q_target=q,
        a_tm1=torch.tensor([[0, 0]]),
        r_e=torch.tensor([[1.0, 1.0]]),
        r_i=torch.tensor([[2.0, 2.0]]),
        beta=torch.tensor([[0.0, 1.0], [0.0, 1.0]]),
        discount_t=torch.tensor([[0.5, 0.5]]),
        valid_t=torch.tensor([[True, True]]),
        n_step=1,
        mu_a_tm1=torch.tensor([[0.5, 0.5]]),
    )
    extra = agent.agent57_td_errors(**arguments, retrace=ngu_agent.RetraceSettings(1.0, 0.0))
    torch.testing.assert_close(extra.extrinsic.target, h(torch.tensor([[1.5, 1.0]])))
    torch.testing.assert_close(extra.intrinsic.target, h(torch.tensor([[2.0, 7.0]])))
    # Target epsilon 1 (uniform pi): extrinsic 1 + 0.5 * (1 + 0) / 2 = 1.25, intrinsic 2 + 0.5 * 5 = 4.5
    extra = agent.agent57_td_errors(**arguments, retrace=ngu_agent.RetraceSettings(1.0, 1.0))
    torch.testing.assert_close(extra.extrinsic.target, h(torch.tensor([[1.25, 1.25]])))
    torch.testing.assert_close(extra.intrinsic.target, h(torch.tensor([[4.5, 4.5]])))


def test_a_stream_gets_gradient_only_from_its_own_loss():
    config = train.Agent57Config(
        environment_name="MountainCar-v0", num_policies=2, burn_in=0, trace_length=3, replay_period=2
    )
    networks = train.build_networks(dataclasses.asdict(config), (2,), 3)
    steps, batch = 4, 2
    zeros = torch.zeros(steps, batch, dtype=torch.int64)
    x = RecurrentQInput(
        torch.randn(steps, batch, 2), zeros, torch.ones(steps, batch), zeros, torch.ones(steps, batch)
    )
    q = networks.q(x, networks.q.initial_state(batch)).q_values  # [T, B, 2, A]
    q[..., 0, :].sum().backward()  # an extrinsic-only loss
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in networks.q.intrinsic.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in networks.q.extrinsic.parameters())


def test_learner_q_loss_is_the_sum_of_the_two_streams_losses():
    class Fixed(torch.nn.Module):
        """h(Q_e) = 0 and h(Q_i) = 0 everywhere."""

        def __init__(self):
            super().__init__()
            self.bias = torch.nn.Parameter(torch.zeros(()))
            self.lstm = torch.nn.LSTM(1, 1)

        def initial_state(self, batch_size, device=None):
            return torch.zeros(1, batch_size, 1), torch.zeros(1, batch_size, 1)

        def forward(self, x, hidden_state):
            steps, b = x.observation.shape[:2]
            return RecurrentQNetworkOutput(torch.zeros(steps, b, 2, 2) + 0 * self.bias, hidden_state)

    networks = train.ngu_train.build_novelty_modules({"num_actors": 1}, Fixed(), (2,), 2)
    learner = novelty_learner(agent.Agent57, networks, n_step=1, target_network_update_period=10)
    steps, batch = 3, 1
    zeros = torch.zeros(steps, batch, dtype=torch.int64)
    r_e, r_i = torch.full((steps, batch), 1.0), torch.full((steps, batch), 2.0)
    j = torch.ones(steps, batch, dtype=torch.int64)
    data = ngu_agent.SequenceTensors(
        inputs=RecurrentQInput(torch.zeros(steps, batch, 2), zeros, r_e, j, r_i),
        action=zeros,
        extrinsic_reward=r_e,
        intrinsic_reward=r_i,
        terminated=torch.zeros(steps, batch, dtype=torch.bool),
        first=torch.zeros(steps, batch, dtype=torch.bool),
        policy_index=j,
        stored_state=(torch.zeros(1, batch, 1), torch.zeros(1, batch, 1)),
        weights=torch.ones(batch),
    )
    per_sequence, abs_td, _, statistics = learner.q_loss(data)
    # Targets with zero bootstraps: extrinsic h(1), intrinsic h(2) (not h(1 + 0.5 * 2): no mixing).
    e, i = h(torch.tensor(1.0)), h(torch.tensor(2.0))
    torch.testing.assert_close(per_sequence, (0.5 * e**2 + 0.5 * i**2).reshape(1))
    torch.testing.assert_close(abs_td, (e + i).expand(2, 1))
    assert statistics["mean_extrinsic_target"] == pytest.approx(float(e))
    assert statistics["mean_intrinsic_target"] == pytest.approx(float(i))


# ----------------------------------------------------------------------------------------------------
# The meta-controller


def test_agent57_discounts_raise_the_exploitative_policys_horizon_as_the_appendix():
    betas, gammas = exploration.agent57_policy_family(32)
    assert betas == exploration.policy_family(32)[0]  # NGU's betas
    # j = 0: 0.9999; j = 3: sigmoid(0) = 1/2 of the way from 0.997 to 0.9999 = 0.99845; j = 7 and 8: 0.997;
    # j = 31: 0.99 (1 - gamma log-linear in between)
    assert [gammas[j] for j in (0, 3, 7, 8, 31)] == pytest.approx([0.9999, 0.99845, 0.997, 0.997, 0.99])
    assert all(a > b for a, b in zip(gammas[8:], gammas[9:], strict=False))  # decreasing from j = 8 on
    config = train.Agent57Config(**{**run_atari.DEFAULTS, "environment_name": "Pitfall"})
    assert train.ngu_train.family_of(dataclasses.asdict(config)) == (betas, gammas)
    # Classic control's 2 policies keep NGU's 0.997 .. 0.99 (the appendix's layout needs N >= 10).
    assert train.ngu_train.family_of(dataclasses.asdict(train.Agent57Config()))[1] == pytest.approx(
        [0.997, 0.99]
    )


def test_bandit_tries_every_arm_then_picks_by_ucb_within_its_window():
    bandit = agent.SlidingWindowBandit(3, np.random.default_rng(0), window=4, beta=1.0, epsilon=0.0)
    played = []
    for episode_return in (1.0, 0.0, 3.0):  # arms 0, 1, 2 in order first
        arm = bandit.choose()
        played.append(arm)
        bandit.record(arm, episode_return)
    assert played == [0, 1, 2]
    bandit.record(1, 3.0)
    # counts 0:1, 1:2, 2:1; means 1, 1.5, 3: scores 1 + 1, 1.5 + sqrt(1/2) = 2.207, 3 + 1 = 4 -> arm 2
    assert bandit.choose() == 2
    bandit.record(2, -10.0)  # window 4 now drops the first episode (arm 0): arm 0 is unplayed again
    assert bandit.choose() == 0
    state = bandit.state()
    assert state == {"bandit_arms": [1, 2, 1, 2], "bandit_returns": [0.0, 3.0, 3.0, -10.0]}
    restored = agent.SlidingWindowBandit(3, np.random.default_rng(1), window=4, beta=1.0, epsilon=0.0)
    restored.load(state["bandit_arms"], state["bandit_returns"])
    assert restored.choose() == 0


def test_actor_reads_its_bandit_row_once_and_chooses_j_at_each_episode_start():
    config = train.Agent57Config(
        environment_name="MountainCar-v0",
        num_actors=2,
        num_policies=3,
        burn_in=0,
        trace_length=3,
        replay_period=2,
        bandit_epsilon=0.0,
    )
    networks = train.build_networks(dataclasses.asdict(config), (2,), 3).requires_grad_(False)
    networks.actor_memory.write(
        1,
        {
            "distance_mean": 1.0,
            "distance_count": 1.0,
            "bandit_arms": [0, 1, 2],
            "bandit_returns": [-5.0, -9.0, 0.0],
        },
    )
    link = RecordingLink(actor_index=1)
    actor, _ = train.build_actor(config, PositionVelocityEnv(), torch.device("cpu"), link, 0)
    actor._networks.load_state_dict(networks.state_dict())  # what wait_for_new_parameters does
    actor.step(timestep([0.0, 0.0], first=True))
    # scores -5 + 1, -9 + 1, 0 + 1: arm 2
    assert actor.statistics["policy_index"] == 2.0
    actor.step(timestep([0.1, 0.0], reward=-1.0))
    actor.step(timestep([0.2, 0.0], reward=-1.0, terminated=True))  # return -2 for arm 2: mean -1
    actor.step(timestep([0.0, 0.0], first=True))
    # means -5, -9, (0 - 2) / 2 = -1 with count 2: -1 + sqrt(1/2) = -0.29 still the best
    assert actor.statistics["policy_index"] == 2.0
    actor.step(timestep([0.1, 0.0], reward=-1.0))  # completes a block of 2: its message carries the bandit
    assert link.sent[-1].actor_state["bandit_arms"] == [0, 1, 2, 2]
    assert link.sent[-1].actor_state["bandit_returns"] == [-5.0, -9.0, 0.0, -2.0]


# ----------------------------------------------------------------------------------------------------
# Configuration, bad input, smoke runs


def _config(tmp_path, **overrides) -> train.Agent57Config:
    mountain_car = dict(environment_name="MountainCar-v0", max_episode_steps=20, num_policies=2)
    return tiny_config(train.Agent57Config, tmp_path, TINY_SEQUENCE_RUN, mountain_car, overrides)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(bandit_window=0), "bandit_window"),
        (dict(bandit_epsilon=1.5), "bandit_epsilon"),
        (dict(bandit_beta=-1.0), "bandit_beta"),
        (dict(num_policies=0), "num_policies"),
        (dict(discount_family="agent57"), "num_policies >= 10"),
        (dict(discount_family="r2d2"), "discount_family"),
    ],
)
def test_bad_flags_are_config_errors(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, **overrides)


def test_continuous_env_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="discrete"):
        train.main(_config(tmp_path, environment_name="Pendulum-v1"))
    assert not os.path.exists(tmp_path / "runs")


@pytest.mark.smoke
def test_run_classic_resume_keeps_the_bandits_then_eval_agent(tmp_path):
    first, later = train_then_resume(train, functools.partial(_config, tmp_path), "Agent57")
    saved = first["networks"]
    assert int(saved["actor_memory.bandit_length"][:2].sum()) > 0  # episodes of 20 steps: bandits played
    assert "q.extrinsic.head.weight" in saved and "q.intrinsic.head.weight" in saved
    # The resumed actors read their rows: each bandit's history continued from the checkpoint's.
    for row in range(2):
        before = int(saved["actor_memory.bandit_length"][row])
        after = int(later["networks"]["actor_memory.bandit_length"][row])
        assert after >= before
        np.testing.assert_array_equal(
            later["networks"]["actor_memory.bandit_arms"][row, :before],
            saved["actor_memory.bandit_arms"][row, :before],
        )
    returns = evaluate_latest(
        eval_agent, tmp_path, environment_name="MountainCar-v0", num_episodes=1, max_episode_steps=20
    )
    assert returns == [-20.0]


@pytest.mark.smoke
def test_run_atari_smoke_with_one_actor(tmp_path):
    recurrent_replay_atari_smoke(
        tmp_path,
        "Agent57",
        train,
        train.Agent57Config,
        run_atari.DEFAULTS,
        eval_agent,
        num_policies=10,  # the fewest the appendix's discount family (run_atari's) allows
        episodic_memory_capacity=100,
    )


@pytest.mark.learning
def test_agent57_actors_reach_the_mountaincar_flag_within_40k_steps(tmp_path):
    """NGU's learning milestone (unit_tests/test_ngu.py says what it guards and what not) for Agent57's
    classic defaults: some training episode reaches MountainCar's flag within 40k env steps, trained 10k
    at a time until it does. Measured (seed 1, load 40-60): 5 of 77 training episodes up to 15.4k env
    steps reached it, the first at 11.2k; none in the first 10k."""
    best, iterations = train_until_mountaincar_flag(train, train.Agent57Config, "Agent57", tmp_path)
    assert best > -200, (
        f"no Agent57 actor reached MountainCar's flag in {iterations * 10}k env steps (best training mean {best})"
    )
