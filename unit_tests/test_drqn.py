"""DRQN: sequence replay, the LSTM network and its resets, the recurrent actor, the obscuring
wrapper, smoke runs of every script, resume, bad input and learning."""

import csv
import dataclasses
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from deep_rl_zoo import run_support
from deep_rl_zoo.drqn import eval_agent, run_atari, train
from deep_rl_zoo.drqn.agent import RecurrentEpsilonGreedyActor, unroll
from deep_rl_zoo.drqn.obscured import ObscuredObservation
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.multistep import n_step_transitions
from deep_rl_zoo.networks.value import DrqnNetwork
from deep_rl_zoo.sequence_replay import SequenceReplay, SequenceStep
from deep_rl_zoo.types_ import TimeStep


def tiny_classic_config(tmp_path, **overrides) -> train.DrqnConfig:
    values = dict(
        num_iterations=2,
        num_train_steps=300,
        num_eval_steps=200,
        unroll_length=3,
        burn_in=2,
        replay_capacity=1000,
        min_replay_size=100,
        batch_size=8,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    values.update(overrides)
    return train.DrqnConfig(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def _step(t: int, first: bool = False) -> SequenceStep:
    return SequenceStep(np.array([t], dtype=np.int64), t, np.float32(t), False, first)


# ----------------------------------------------------------------------------------------------------
# Sequence replay


def test_sequences_are_consecutive_time_major_windows():
    replay = SequenceReplay(capacity=10, sequence_length=3, rng=np.random.default_rng(0))
    for t in range(6):
        replay.add(_step(t, first=t == 0))
    assert replay.num_sequences == 4  # windows starting at 0, 1, 2, 3
    batch = replay.sample(20)
    assert batch.observation.shape == (3, 20, 1) and batch.action.shape == (3, 20)
    # each column is t0, t0 + 1, t0 + 2 with t0 in 0..3
    assert (np.diff(batch.action, axis=0) == 1).all()
    assert set(batch.action[0].tolist()) <= {0, 1, 2, 3}


def test_a_full_ring_keeps_only_the_newest_steps_and_never_wraps_a_window():
    replay = SequenceReplay(capacity=4, sequence_length=2, rng=np.random.default_rng(0))
    for t in range(7):  # keeps steps 3, 4, 5, 6
        replay.add(_step(t, first=t == 0))
    batch = replay.sample(50)
    assert set(batch.action[0].tolist()) == {3, 4, 5}  # a window starting at 6 would need step 7
    assert (batch.action[1] == batch.action[0] + 1).all()


def test_sampling_before_one_whole_sequence_is_an_error():
    replay = SequenceReplay(capacity=10, sequence_length=3, rng=np.random.default_rng(0))
    replay.add(_step(0, first=True))
    with pytest.raises(ValueError, match="fewer than one sequence"):
        replay.sample(1)


# ----------------------------------------------------------------------------------------------------
# n-step transitions of a window


def test_n_step_transitions_stop_at_a_termination_and_bootstrap_at_a_time_limit():
    # One window of 5 transitions, gamma 0.5, n = 3. o_2 is terminal (discount_t[1] = 0), o_3 starts
    # the next episode (transition 2, o_2 -> o_3, is invalid), o_5 is the last state of the window.
    r_t = torch.tensor([[1.0], [2.0], [9.0], [4.0], [8.0]])
    discount_t = torch.tensor([[0.5], [0.0], [0.5], [0.5], [0.5]])
    valid_t = torch.tensor([[True], [True], [False], [True], [True]])
    got = n_step_transitions(r_t, discount_t, valid_t, n=3)
    # j=0: 1 + 0.5 * 2 = 2, discount 0.5 * 0 = 0 (o_2 terminal), bootstrap at 2 (ignored)
    # j=1: 2, discount 0, bootstrap at 2
    # j=2: invalid: nothing, discount 1, bootstrap at 2 (masked by the learner)
    # j=3: 4 + 0.5 * 8 = 8, discount 0.5 * 0.5 = 0.25, bootstrap at the window's end, 5
    # j=4: 8, discount 0.5, bootstrap at 5
    torch.testing.assert_close(got.r_n[:, 0], torch.tensor([2.0, 2.0, 0.0, 8.0, 8.0]))
    torch.testing.assert_close(got.discount_n[:, 0], torch.tensor([0.0, 0.0, 1.0, 0.25, 0.5]))
    assert got.bootstrap_index[:, 0].tolist() == [2, 2, 2, 5, 5]


def test_n_step_transitions_of_a_time_limit_bootstrap_from_the_episodes_last_state():
    # o_2 ends an episode by truncation (discount_t[1] = gamma = 0.5) and o_3 starts the next one.
    r_t = torch.tensor([[1.0], [2.0], [0.0], [4.0]])
    discount_t = torch.tensor([[0.5], [0.5], [0.5], [0.5]])
    valid_t = torch.tensor([[True], [True], [False], [True]])
    got = n_step_transitions(r_t, discount_t, valid_t, n=4)
    # j=0: 1 + 0.5 * 2 = 2, then 0.25 * V(o_2): the cut-off state still bootstraps
    assert got.bootstrap_index[0, 0] == 2 and got.discount_n[0, 0] == 0.25 and got.r_n[0, 0] == 2.0


def test_n_step_transitions_equal_a_naive_loop_and_n_1_is_the_one_step_transition():
    generator = torch.Generator().manual_seed(0)
    r_t = torch.randint(0, 5, (9, 6), generator=generator).float()
    discount_t = 0.9 * (torch.rand(9, 6, generator=generator) > 0.2).float()
    valid_t = torch.rand(9, 6, generator=generator) > 0.2
    for n in (1, 2, 4, 12):
        got = n_step_transitions(r_t, discount_t, valid_t, n)
        for j in range(9):
            for b in range(6):
                total, discount, k = 0.0, 1.0, j
                while k < min(j + n, 9) and valid_t[k, b]:
                    total, discount, k = (
                        total + discount * r_t[k, b].item(),
                        discount * discount_t[k, b].item(),
                        k + 1,
                    )
                assert got.r_n[j, b].item() == pytest.approx(total)
                assert got.discount_n[j, b].item() == pytest.approx(discount)
                assert got.bootstrap_index[j, b].item() == k
    one = n_step_transitions(r_t, discount_t, valid_t, 1)
    torch.testing.assert_close(one.r_n, torch.where(valid_t, r_t, 0.0))
    torch.testing.assert_close(one.discount_n, torch.where(valid_t, discount_t, 1.0))


def test_n_step_transitions_reject_bad_input():
    r_t = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="n must be"):
        n_step_transitions(r_t, r_t, r_t.bool(), 0)
    with pytest.raises(ValueError, match="valid_t"):
        n_step_transitions(r_t, r_t, r_t, 2)  # float mask


# ----------------------------------------------------------------------------------------------------
# Network and actor


def test_first_flag_resets_the_state_exactly_as_a_fresh_start():
    torch.manual_seed(0)
    network = DrqnNetwork((3,), num_actions=2, hidden_sizes=(8,), lstm_size=5)
    x = torch.randn(6, 2, 3)
    first = torch.zeros(6, 2, dtype=torch.bool)
    first[3, 0] = True  # sequence 0 starts a new episode at t = 3
    zeros = network.initial_state(2)
    with torch.no_grad():
        q = network(x, zeros, first).q_values
        fresh = network(x[3:, :1], network.initial_state(1)).q_values
        no_reset = network(x, zeros).q_values
    torch.testing.assert_close(q[3:, :1], fresh)
    torch.testing.assert_close(q[:, 1], no_reset[:, 1])  # sequence 1 had no reset
    assert not torch.allclose(q[3:, 0], no_reset[3:, 0])


def test_a_checkpoint_config_without_head_hidden_sizes_builds_the_papers_linear_head():
    # Checkpoints saved before `head_hidden_sizes` existed hold exactly these parameters.
    network = train.build_network({"hidden_sizes": (8,), "lstm_size": 5}, (3,), 2)
    assert {name for name, _ in network.named_parameters()} == {
        "torso.0.weight",
        "torso.0.bias",
        "lstm.weight_ih_l0",
        "lstm.weight_hh_l0",
        "lstm.bias_ih_l0",
        "lstm.bias_hh_l0",
        "head.weight",
        "head.bias",
    }
    deeper = train.build_network({"hidden_sizes": (8,), "lstm_size": 5, "head_hidden_sizes": (6,)}, (3,), 2)
    assert deeper.head.in_features == 6 and deeper.post_lstm[0].in_features == 5


def test_unroll_in_stretches_equals_the_step_by_step_first_path():
    torch.manual_seed(0)
    network = DrqnNetwork((3,), num_actions=2, hidden_sizes=(8,), lstm_size=5)
    x = torch.randn(7, 3, 3)
    first = torch.zeros(7, 3, dtype=torch.bool)
    first[0, 1] = first[2, 0] = first[5, 0] = first[5, 2] = True  # resets at t = 0, 2, 5
    state = (torch.randn(1, 3, 5), torch.randn(1, 3, 5))  # nonzero, so a missed reset would show
    with torch.no_grad():
        expected = network(x, state, first)
        got = unroll(network, x, state, first)
    torch.testing.assert_close(got.q_values, expected.q_values)
    torch.testing.assert_close(got.hidden_state, expected.hidden_state)


def test_the_actor_carries_its_state_through_the_episode_and_resets_at_the_next():
    torch.manual_seed(0)
    network = DrqnNetwork((3,), num_actions=2, hidden_sizes=(8,), lstm_size=5)
    actor = RecurrentEpsilonGreedyActor(
        network, 2, 0.0, np.random.default_rng(0), torch.device("cpu"), "DRQN"
    )
    observations = torch.randn(4, 3).numpy()
    actor.reset()
    actor.step(TimeStep(observations[0], 0.0, False, False, True, {}))
    state_after_one = actor._hidden_state
    for o in observations[1:]:
        actor.step(TimeStep(o, 0.0, False, False, False, {}))
    with torch.no_grad():
        expected = network(torch.as_tensor(observations)[:, None], network.initial_state(1)).hidden_state
    torch.testing.assert_close(actor._hidden_state[0], expected[0])
    actor.step(TimeStep(observations[0], 0.0, False, False, True, {}))  # a new episode
    torch.testing.assert_close(actor._hidden_state[0], state_after_one[0])


def test_obscured_observation_blanks_whole_observations_at_the_given_rate():
    env = ObscuredObservation(gym.make("CartPole-v1"), probability=0.5)
    env.reset(seed=0)
    blank = 0
    for _ in range(200):
        observation, *_, terminated, truncated, _ = env.step(env.action_space.sample())
        blank += not observation.any()
        if terminated or truncated:
            env.reset()
    assert 60 <= blank <= 140  # about half of 200
    with pytest.raises(ValueError, match="probability"):
        ObscuredObservation(gym.make("CartPole-v1"), probability=1.5)


# ----------------------------------------------------------------------------------------------------
# End to end


@pytest.mark.smoke
def test_run_classic_writes_a_checkpoint_and_a_csv_row_per_iteration(tmp_path):
    state = train.main(tiny_classic_config(tmp_path))
    for iteration in (0, 1):
        assert os.path.isfile(
            tmp_path / "checkpoints" / "DRQN_CartPole-v1" / f"DRQN_CartPole-v1_{iteration}.ckpt"
        )
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    assert [int(r["train_env_steps"]) for r in rows] == [300, 600]
    assert all(float(r["learner_learner_steps"]) > 0 for r in rows)


@pytest.mark.smoke
def test_run_atari_smoke_stores_each_frame_once(tmp_path):
    config = train.DrqnConfig(
        **{
            **run_atari.DEFAULTS,
            "num_iterations": 1,
            "num_train_steps": 60,
            "num_eval_steps": 20,
            "max_episode_steps": 30,
            "unroll_length": 3,
            "burn_in": 2,
            "lstm_size": 32,
            "replay_capacity": 200,
            "min_replay_size": 30,
            "batch_size": 2,
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "runs_dir": str(tmp_path / "runs"),
            "use_tensorboard": False,
            "show_progress": False,
        }
    )
    env = run_support.make_environment(config, 0, train=True)
    assert env.observation_space.shape == (1, 84, 84)  # one frame per step, as in the paper
    agents = train.build_agents(config, env, torch.device("cpu"))
    assert agents.train_agent._frame_store is not None  # the sequence replay holds frame handles
    env.close()
    state = train.main(config)
    assert state.train_env_steps == 60
    assert os.path.isfile(tmp_path / "checkpoints" / "DRQN_Pong" / "DRQN_Pong_0.ckpt")


@pytest.mark.smoke
def test_eval_agent_plays_a_checkpoint_and_records_a_video(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    returns = eval_agent.main(
        eval_agent.DrqnEvalConfig(
            num_episodes=2,
            load_checkpoint_file=str(
                tmp_path / "checkpoints" / "DRQN_CartPole-v1" / "DRQN_CartPole-v1_0.ckpt"
            ),
            recording_video_dir=str(tmp_path / "recordings"),
        )
    )
    assert len(returns) == 2 and all(r >= 1 for r in returns)
    assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "recordings"))


@pytest.mark.smoke
def test_resume_continues_counters_where_the_run_stopped(tmp_path):
    first = train.main(tiny_classic_config(tmp_path, num_iterations=1))
    resumed = train.main(tiny_classic_config(tmp_path, num_iterations=2, resume=True))
    assert resumed.run_dir == first.run_dir and resumed.train_env_steps == 600


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"environment_name": "Pendulum-v1"}, "discrete"),
        ({"replay_capacity": 5}, "replay_capacity"),
        ({"burn_in": -1}, "burn_in"),
        ({"unroll_length": 0}, "unroll_length"),
        ({"n_step": 0}, "n_step"),
    ],
)
def test_bad_input_is_rejected_before_any_work(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        train.main(tiny_classic_config(tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")


@pytest.mark.learning
def test_drqn_learns_cartpole(tmp_path):
    """DRQN's default classic flags, cut to 5,000 env steps, reach a greedy mean of 120 (random play: about 22).

    Guards the whole recurrent loop (sequence replay, burn-in, n-step double targets, the LSTM state
    carried while acting) on a CI budget, with one evaluation of 2,000 env steps. Seeds 1-3 measured
    (deterministic per seed): 180, 167, 183, so 120 holds on each with a margin of 39% or more. Seed 3
    is kept from before; it is the slowest of seeds 1-5 to reach 475 (README), not a lucky one.
    """
    config = dataclasses.replace(
        train.DrqnConfig(),
        seed=3,
        num_iterations=1,
        num_train_steps=5000,
        num_eval_steps=2000,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
    )
    state = train.main(config)
    (row,) = read_csv(os.path.join(state.run_dir, "results.csv"))
    assert float(row["eval_mean_episode_return"]) >= 120, f"greedy evaluation mean {row}"


@pytest.mark.smoke
def test_obscure_probability_makes_training_and_evaluation_partially_observable(tmp_path):
    config = tiny_classic_config(tmp_path, obscure_probability=1.0)
    env = run_support.make_environment(config, 0, train=True, wrap_env=train.obscuring_wrapper(1.0))
    assert isinstance(env, ObscuredObservation)
    observation, _ = env.reset(seed=0)
    assert not observation.any()  # p = 1 blanks every observation
    assert train.obscuring_wrapper(0.0) is None
    with pytest.raises(ConfigError, match="obscure_probability"):
        dataclasses.replace(config, obscure_probability=1.5)
