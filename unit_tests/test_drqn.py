"""DRQN: sequence replay, the LSTM network and its resets, the recurrent actor, the obscuring
wrapper, smoke runs of every script, resume, bad input and learning."""

import csv
import dataclasses
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from deep_rl_zoo import config as config_lib
from deep_rl_zoo import environments
from deep_rl_zoo.drqn import train
from deep_rl_zoo.drqn.agent import RecurrentEpsilonGreedyActor, unroll
from deep_rl_zoo.drqn.obscured import ObscuredObservation
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.multistep import n_step_transitions
from deep_rl_zoo.networks.value import DrqnNetwork
from deep_rl_zoo.replay import FrameStackStore
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
    def saved(**values):
        config = config_lib.trained_config(
            train.DrqnConfig, {"config": values}, train.OLD_CHECKPOINT_DEFAULTS
        )
        return train.build_network(config, (3,), 2)

    network = saved(hidden_sizes=(8,), lstm_size=5)
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
    deeper = saved(hidden_sizes=(8,), lstm_size=5, head_hidden_sizes=(6,))
    assert deeper.head.in_features == 6 and deeper.post_lstm[0].in_features == 5


def test_unroll_of_a_network_without_first_equals_the_one_pass_path():
    """`unroll` calls a network that cannot take `first` (NGU's, say) once per stretch between episode
    starts; that equals DrqnNetwork's own one-pass resets."""

    class NoFirst(nn.Module):
        def __init__(self, network):
            super().__init__()
            self.network = network

        def forward(self, x, hidden_state):
            return self.network(x, hidden_state)

    torch.manual_seed(0)
    network = DrqnNetwork((3,), num_actions=2, hidden_sizes=(8,), lstm_size=5)
    x = torch.randn(7, 3, 3)
    first = torch.zeros(7, 3, dtype=torch.bool)
    first[0, 1] = first[2, 0] = first[5, 0] = first[5, 2] = True  # resets at t = 0, 2, 5
    state = (torch.randn(1, 3, 5), torch.randn(1, 3, 5))  # nonzero, so a missed reset would show
    with torch.no_grad():
        expected = unroll(network, x, state, first)
        got = unroll(NoFirst(network), x, state, first)
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


class _CountingFramesEnv(gym.Env):
    """2x2 frames filled with 1, 2, 3, ... (never 0, so a blank frame is easy to tell); episodes of 5."""

    observation_space = gym.spaces.Box(0, 255, shape=(2, 2), dtype=np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self._counter, self._t = 0, 0

    def _frame(self):
        self._counter += 1
        return np.full((2, 2), self._counter % 250 + 1, np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._frame(), {}

    def step(self, action):
        self._t += 1
        return self._frame(), 0.0, self._t == 5, False, {}


def test_obscured_frame_stacks_are_what_the_replay_rebuilds_from_newest_frames():
    # DRQN stores only each observation's newest frame; the learner's stacks must be the actor's.
    # Blanking the whole stack (as before) broke this: a shown frame became blank in later stacks.
    stack_size = 4
    env = ObscuredObservation(
        gym.wrappers.FrameStackObservation(_CountingFramesEnv(), stack_size, padding_type="reset"), 0.5
    )
    store = FrameStackStore(capacity=1000, frame_shape=(2, 2), stack_size=stack_size)
    mixed = 0
    observation, _ = env.reset(seed=3)
    first = True
    for _ in range(200):
        handle = store.add(observation[-1], first)
        np.testing.assert_array_equal(store.stacks(np.array([handle]))[0], observation)
        blank_frames = (observation.reshape(stack_size, -1) == 0).all(axis=1)
        mixed += bool(blank_frames.any() and not blank_frames.all())
        observation, _, terminated, truncated, _ = env.step(0)
        first = False
        if terminated or truncated:
            handle = store.add(observation[-1], False)
            np.testing.assert_array_equal(store.stacks(np.array([handle]))[0], observation)
            observation, _ = env.reset()
            first = True
    assert mixed > 50  # stacks of shown and blank frames: obscuring is per frame


def test_obscuring_one_frame_stack_blanks_the_whole_observation():
    env = ObscuredObservation(
        gym.wrappers.FrameStackObservation(_CountingFramesEnv(), 1, padding_type="reset"), 1.0
    )
    observation, _ = env.reset(seed=0)
    assert observation.shape == (1, 2, 2) and not observation.any()


# ----------------------------------------------------------------------------------------------------
# End to end


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
    env = environments.make_environment(config, 0, train=True, wrap_env=train.obscuring_wrapper(1.0))
    assert isinstance(env, ObscuredObservation)
    observation, _ = env.reset(seed=0)
    assert not observation.any()  # p = 1 blanks every observation
    assert train.obscuring_wrapper(0.0) is None
    with pytest.raises(ConfigError, match="obscure_probability"):
        dataclasses.replace(config, obscure_probability=1.5)
