"""R2D2: Ape-X actor epsilons, the sequence replay (steps stored once, overlapping sequences, stacks,
stored states, dropped sequences), the actor's blocks, the learner's wiring (which network selects and
which evaluates, burn-in from the stored state, masks, priorities, target period), smoke runs of every
script (Atari included), resume, bad input, and a learning test on CartPole."""

import functools
import os
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch

from deep_rl_zoo import distributed, exploration, optimization, plot, value_learning
from deep_rl_zoo.drqn.obscured import obscuring_wrapper
from deep_rl_zoo.errors import ConfigError, NonFiniteLossError
from deep_rl_zoo.networks.value import RecurrentQInput
from deep_rl_zoo.r2d2 import agent, eval_agent, run_atari, train
from deep_rl_zoo.sequence_replay import PrioritizedSequenceReplay, SequenceBlock
from unit_tests.distributed_helpers import (
    SEQUENCE_LEARNER,
    TINY_SEQUENCE_RUN,
    RecordingLink,
    evaluate_latest,
    evaluations,
    recurrent_replay_atari_smoke,
    rounded,
    timestep,
    tiny_config,
    train_then_resume,
    train_until,
)

# ----------------------------------------------------------------------------------------------------
# Actor epsilons


def test_apex_epsilons_spread_from_0_4_to_0_4_to_the_8():
    eps = [exploration.apex_actor_epsilon(i, 8) for i in range(8)]
    assert eps[0] == pytest.approx(0.4)  # 0.4^(1 + 0)
    assert eps[7] == pytest.approx(0.4**8)  # 0.4^(1 + 7) = 0.00065536
    assert eps[1] == pytest.approx(0.4**2)  # 0.4^(1 + 7 * 1 / 7)
    assert exploration.apex_actor_epsilon(0, 1) == pytest.approx(0.4)  # a lone actor gets 0.4
    with pytest.raises(ValueError):
        exploration.apex_actor_epsilon(8, 8)


# ----------------------------------------------------------------------------------------------------
# The sequence replay


def _block(actor, values, first=None, state=0.0, terminated=None, truncated=None, frames=False):
    values = np.asarray(values, np.float32)
    length = len(values)
    observation = values[:, None, None] * np.ones((2, 2), np.float32) if frames else values[:, None]
    return SequenceBlock(
        actor_index=actor,
        observation=observation.astype(np.uint8) if frames else observation,
        action=(values.astype(np.int64) % 2),
        reward=values,
        terminated=np.asarray(terminated if terminated is not None else [False] * length),
        truncated=np.asarray(truncated if truncated is not None else [False] * length),
        first=np.asarray(first if first is not None else [False] * length),
        core_state=(np.full(3, state, np.float32), np.full(3, -state, np.float32)),
        extras={"previous_action": (values.astype(np.int64) - 1) % 2},  # a_{k-1}, as actions are k % 2
    )


def _all_sequences(replay):
    """Every sequence in the replay once: with equal priorities, a stratified draw of as many sequences
    as there are slots picks each slot once (deduped by slot all the same)."""
    batch = replay.sample(replay.priorities().size, 0.6)
    _, keep = np.unique(batch.indices, return_index=True)
    return {int(batch.indices[k]): k for k in keep}, batch


def test_two_blocks_of_one_actor_make_one_sequence_even_when_actors_interleave():
    # T = 2P (the classic layout): an actor's blocks j - 1 and j make a sequence.
    replay = PrioritizedSequenceReplay(100, 4, 0.9, np.random.default_rng(0), period=2)
    replay.add_block(_block(0, [0, 1], first=[True, False], state=1.0))
    replay.add_block(_block(1, [10, 11], first=[True, False], state=5.0))
    assert replay.num_sequences == 0  # a first block is only the first half of a sequence
    replay.add_block(_block(0, [2, 3], state=2.0))
    replay.add_block(_block(1, [12, 13], state=6.0))
    replay.add_block(_block(0, [4, 5], state=3.0))
    assert replay.num_sequences == 3
    assert replay.num_steps == 10  # each step stored once, though steps 2, 3 are in two sequences
    slots, batch = _all_sequences(replay)
    by_first_value = {float(batch.observation[0, k, 0]): k for k in slots.values()}
    assert sorted(by_first_value) == [0.0, 2.0, 10.0]
    k = by_first_value[0.0]
    np.testing.assert_array_equal(batch.observation[:, k, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(batch.core_state[0][k], [2, 2, 2])  # sent with block [2, 3]
    k = by_first_value[2.0]  # overlaps the previous one by half
    np.testing.assert_array_equal(batch.observation[:, k, 0], [2, 3, 4, 5])
    np.testing.assert_array_equal(batch.core_state[0][k], [3, 3, 3])
    np.testing.assert_array_equal(batch.core_state[1][k], [-3, -3, -3])
    k = by_first_value[10.0]
    np.testing.assert_array_equal(batch.observation[:, k, 0], [10, 11, 12, 13])
    np.testing.assert_array_equal(batch.reward[:, k], [10, 11, 12, 13])
    np.testing.assert_array_equal(batch.first[:, k], [True, False, False, False])


def test_each_block_completes_the_sequence_of_the_actors_last_t_steps():
    # The paper's layout in small: T = 1 + 4 + 1 = 6 steps, a block of P = 2 every 2 steps, so a
    # sequence spans three blocks and adjacent ones overlap by 4 steps. Two actors interleave.
    replay = PrioritizedSequenceReplay(100, 6, 0.9, np.random.default_rng(0), period=2)
    for j in range(4):
        replay.add_block(_block(0, [2 * j, 2 * j + 1], first=[j == 0, False], state=float(j)))
        replay.add_block(_block(1, [20 + 2 * j, 21 + 2 * j], first=[j == 0, False], state=10.0 + j))
    # Actor 0 sent 8 steps: blocks 3 and 4 (6 and 8 steps sent) each complete a sequence; so for actor 1.
    assert replay.num_sequences == 4 and replay.num_steps == 16
    slots, batch = _all_sequences(replay)
    sequences = {
        tuple(batch.observation[:, k, 0].astype(int).tolist()): float(batch.core_state[0][k][0])
        for k in slots.values()
    }
    # Each with the state the completing block carried (the actor's state before the sequence's o_0).
    assert sequences == {
        (0, 1, 2, 3, 4, 5): 2.0,
        (2, 3, 4, 5, 6, 7): 3.0,
        (20, 21, 22, 23, 24, 25): 12.0,
        (22, 23, 24, 25, 26, 27): 13.0,
    }


@pytest.mark.parametrize(
    "burn_in, trace_length, period, expected",
    [
        # The classic layout (T = 2P): each learned once at a fixed offset; every second never.
        (2, 1, 2, {2: 1, 3: 0, 4: 1, 5: 0, 6: 1, 7: 0, 8: 1, 9: 0, 10: 1, 11: 0}),
        # The paper's (period = trace_length / 2), in small: from the first full overlap on, twice.
        (2, 4, 2, {2: 0, 3: 1, 4: 1, 5: 2, 6: 2, 7: 2, 8: 2, 9: 2, 10: 2, 11: 1, 12: 1}),
    ],
)
def test_which_transitions_of_an_actors_stream_carry_loss(
    monkeypatch, burn_in, trace_length, period, expected
):
    """One actor's 14 steps, action a_k = k, through the replay and the learner: the transitions
    o_k -> o_{k+1} that get a TD error (all sequences in one batch), counted by the actions the learner
    hands to the loss."""
    sequence_length = burn_in + trace_length + 1
    replay = PrioritizedSequenceReplay(100, sequence_length, 0.9, np.random.default_rng(0), period=period)
    for j in range(14 // period):
        block = _block(0, np.arange(j * period, (j + 1) * period), first=[j == 0] + [False] * (period - 1))
        replay.add_block(
            block._replace(
                action=np.arange(j * period, (j + 1) * period),
                observation=np.repeat(block.observation, 2, axis=1),
            )
        )
    learned = []

    def recording_td_errors(q_online, q_target, a_tm1, *args, **kwargs):
        learned.extend(a_tm1.flatten().tolist())
        return r2d2_td_errors(q_online, q_target, a_tm1 % 2, *args, **kwargs)

    r2d2_td_errors = agent.r2d2_td_errors
    monkeypatch.setattr(agent, "r2d2_td_errors", recording_td_errors)
    learner = _learner(replay, burn_in=burn_in, batch_size=replay.num_sequences)
    learner.gradient_step()
    counts = {k: learned.count(k) for k in expected}
    assert counts == expected


def test_new_sequences_get_the_largest_priority_and_updates_store_priority_to_the_alpha():
    replay = PrioritizedSequenceReplay(100, 4, 0.9, np.random.default_rng(0), period=2)
    for values in ([0, 1], [2, 3], [4, 5]):
        replay.add_block(_block(0, values))
    np.testing.assert_allclose(replay.priorities(), [1.0, 1.0])  # 1 before any update
    replay.update_priorities(np.array([0]), np.array([2.0]))
    np.testing.assert_allclose(replay.priorities(), [2.0**0.9, 1.0])
    replay.add_block(_block(0, [6, 7]))
    np.testing.assert_allclose(replay.priorities()[-1], 2.0**0.9)  # the max seen so far


def test_a_sequence_is_dropped_when_the_ring_overwrites_its_oldest_step():
    # Capacity 6 steps, blocks of 2: the sequence [0 1 2 3] loses step 0 when steps 6, 7 arrive.
    replay = PrioritizedSequenceReplay(6, 4, 1.0, np.random.default_rng(0), period=2)
    for values in ([0, 1], [2, 3], [4, 5]):
        replay.add_block(_block(0, values))
    assert replay.num_sequences == 2
    replay.add_block(_block(0, [6, 7]))
    assert replay.num_sequences == 2  # [2 3 4 5] and [4 5 6 7]; [0 1 2 3] is gone
    np.testing.assert_allclose(replay.priorities()[0], 0.0)
    batch = replay.sample(3, 0.6)
    assert set(batch.observation[0, :, 0].tolist()) == {2.0, 4.0}


def test_atari_stacks_are_rebuilt_from_single_frames_with_reset_padding():
    # Stack of 3, blocks of 2. Episode starts at steps 0 and 3: the env showed
    # step 1: [0 0 1], step 2: [0 1 2], step 3: [3 3 3], step 4: [3 3 4], step 5: [3 4 5].
    replay = PrioritizedSequenceReplay(100, 4, 1.0, np.random.default_rng(0), stack_size=3, period=2)
    replay.add_block(_block(0, [0, 1], first=[True, False], frames=True))
    replay.add_block(_block(0, [2, 3], first=[False, True], frames=True))
    replay.add_block(_block(0, [4, 5], frames=True))
    slots, batch = _all_sequences(replay)
    assert batch.observation.shape[2:] == (3, 2, 2)
    stacks = {}
    for k in slots.values():
        for t in range(4):
            stacks[int(batch.steps[t, k])] = batch.observation[t, k, :, 0, 0].tolist()
    assert stacks == {
        0: [0, 0, 0],
        1: [0, 0, 1],
        2: [0, 1, 2],
        3: [3, 3, 3],
        4: [3, 3, 4],
        5: [3, 4, 5],
    }


def test_atari_replay_keeps_about_one_frame_per_step():
    """Bytes per stored env step with R2D2's Atari shapes: 84x84 frames, LSTM 512, sequences of
    40 + 80 + 1 steps, a new one every 40."""
    capacity, period = 4000, 40
    replay = PrioritizedSequenceReplay(
        capacity, 121, 0.9, np.random.default_rng(0), stack_size=4, period=period
    )
    frames = np.zeros((period, 84, 84), np.uint8)
    state = (np.zeros(512, np.float32), np.zeros(512, np.float32))
    for j in range(capacity // period + 5):
        replay.add_block(
            SequenceBlock(
                j % 4,
                frames,
                np.zeros(period, np.int64),
                np.zeros(period, np.float32),
                *(np.zeros(period, bool),) * 3,
                state,
            )
        )
    per_step = replay.nbytes / capacity
    # 7,056 frame bytes + 15 of action, reward and flags + per sequence of 40 new steps: 124 step numbers
    # (8 bytes), an LSTM state (4,096 bytes) and its tree and bookkeeping: about 7,200 bytes.
    assert 7056 < per_step < 7056 * 1.05, per_step


# ----------------------------------------------------------------------------------------------------
# The loss and the learner's wiring


def test_online_network_selects_and_target_network_evaluates():
    # One transition o_0 -> o_1, reward 1, discount 0.5, n = 1. At o_1 the online network prefers
    # action 1 (2 > 1); the target network's value of action 1 is h(3) (its max, h(10), is ignored):
    # y = h(1 + 0.5 * 3) = h(2.5); td = h(2.5) - q_online(o_0, a_0 = 0) = h(2.5) - 0.5.
    h = value_learning.signed_hyperbolic
    q_online = torch.tensor([[[0.5, 9.0]], [[1.0, 2.0]]])  # [L + 1 = 2, B = 1, A = 2]
    q_target = torch.stack([torch.tensor([[7.0, 7.0]]), h(torch.tensor([[10.0, 3.0]]))])
    extra = agent.r2d2_td_errors(
        q_online,
        q_target,
        torch.tensor([[0]]),
        torch.tensor([[1.0]]),
        torch.tensor([[0.5]]),
        torch.tensor([[True]]),
        n_step=1,
    )
    expected = h(torch.tensor(2.5))
    assert extra.target.item() == pytest.approx(expected.item(), abs=1e-6)
    assert extra.td_error.item() == pytest.approx(expected.item() - 0.5, abs=1e-6)


def test_termination_and_a_new_episode_are_masked_and_stop_the_return():
    # Transitions o_0 -> o_1 (reward 1, o_1 terminal, discount 0) and o_1 -> o_2 (o_2 first: masked).
    # Every Q is 0 except huge bootstrap values, which a termination must ignore: y_0 = h(1).
    q = torch.zeros(3, 1, 2)
    q_target = torch.full((3, 1, 2), 100.0)
    extra = agent.r2d2_td_errors(
        q,
        q_target,
        torch.zeros(2, 1, dtype=torch.int64),
        torch.tensor([[1.0], [5.0]]),
        torch.tensor([[0.0], [0.9]]),
        torch.tensor([[True], [False]]),
        n_step=5,
    )
    assert extra.target[0, 0].item() == pytest.approx(
        value_learning.signed_hyperbolic(torch.tensor(1.0)).item()
    )
    assert extra.mask.tolist() == [[1.0], [0.0]]
    assert extra.td_error[1, 0].item() == 0.0


def test_truncation_bootstraps_from_the_last_observation():
    # o_0 -> o_1 (reward 1, o_1 cut by a time limit: discount 0.5, still valid), o_1 -> o_2 (o_2 first).
    # With n = 5 the return stops at o_1 and bootstraps there: y_0 = h(1 + 0.5 * 4) = h(3).
    h = value_learning.signed_hyperbolic
    q_online = torch.tensor([[[0.0, 0.0]], [[0.0, 1.0]], [[0.0, 0.0]]])
    q_target = torch.stack([torch.zeros(1, 2), h(torch.tensor([[50.0, 4.0]])), torch.full((1, 2), 99.0)])
    extra = agent.r2d2_td_errors(
        q_online,
        q_target,
        torch.zeros(2, 1, dtype=torch.int64),
        torch.tensor([[1.0], [7.0]]),
        torch.tensor([[0.5], [0.5]]),
        torch.tensor([[True], [False]]),
        n_step=5,
    )
    assert extra.target[0, 0].item() == pytest.approx(h(torch.tensor(3.0)).item(), abs=1e-6)


def test_bad_shapes_raise():
    q = torch.zeros(3, 1, 2)
    with pytest.raises(ValueError):
        agent.r2d2_td_errors(
            q,
            q,
            torch.zeros(3, 1, dtype=torch.int64),
            *(torch.zeros(2, 1),) * 2,
            torch.ones(2, 1, dtype=torch.bool),
            1,
        )
    with pytest.raises(ValueError):
        agent.r2d2_td_errors(
            q,
            q[:2],
            torch.zeros(2, 1, dtype=torch.int64),
            *(torch.zeros(2, 1),) * 2,
            torch.ones(2, 1, dtype=torch.bool),
            1,
        )


def _network(seed=0):
    torch.manual_seed(seed)
    return train.build_network({"hidden_sizes": (4,), "lstm_size": 3, "head_hidden_sizes": ()}, (2,), 2)


def _inputs(observation, previous_action=None, reward=None):
    """The network's input for observations [T, B, 2]; previous actions and rewards 0 unless given."""
    steps, batch = observation.shape[:2]
    return RecurrentQInput(
        observation,
        torch.zeros(steps, batch, dtype=torch.int64) if previous_action is None else previous_action,
        torch.zeros(steps, batch) if reward is None else reward,
    )


def test_burn_in_starts_from_the_stored_state_and_gets_no_gradient():
    network, target = _network(0), _network(1)
    observation = _inputs(torch.arange(12, dtype=torch.float32).reshape(6, 1, 2) / 10)  # [T = 6, B = 1, 2]
    first = torch.zeros(6, 1, dtype=torch.bool)
    stored = (torch.full((1, 1, 3), 0.5), torch.full((1, 1, 3), -0.5))
    q_online, q_target = agent.sequence_q_values(network, target, observation, first, stored, burn_in=2)
    # By hand: both networks run from the stored state over all 6 steps; only steps 2..5 are returned.
    expected_online = network(observation, stored).q_values[2:]
    expected_target = target(observation, stored).q_values[2:]
    torch.testing.assert_close(q_online, expected_online)
    torch.testing.assert_close(q_target, expected_target)
    assert not q_target.requires_grad
    zero_state = network.initial_state(1)
    from_zero, _ = agent.sequence_q_values(network, target, observation, first, zero_state, burn_in=2)
    assert not torch.allclose(from_zero, q_online)  # the stored state matters
    # No gradient through the burn-in: d q_online / d (burn-in observations) is zero.
    x = observation.observation.clone().requires_grad_(True)
    q, _ = agent.sequence_q_values(network, target, _inputs(x), first, stored, burn_in=2)
    q.sum().backward()
    assert x.grad[:2].abs().sum().item() == 0.0 and x.grad[2:].abs().sum().item() > 0.0


def _learner(replay, **overrides):
    values = dict(
        network=_network(0),
        optimizer=None,
        replay=replay,
        burn_in=1,
        min_replay_size=0,
        discount=0.9,
        n_step=2,
        target_network_update_period=2,
        **SEQUENCE_LEARNER,
    )
    values.update(overrides)
    if values["optimizer"] is None:
        values["optimizer"] = torch.optim.SGD(values["network"].parameters(), lr=0.1)
    return agent.R2d2(**values)


def _fill(replay, learner=None, num_blocks=4):
    blocks = [
        _block(a, [j * 2 + 1, j * 2 + 2], first=[j == 0, False]) for j in range(num_blocks) for a in (0, 1)
    ]
    for block in blocks:
        block = block._replace(observation=np.repeat(block.observation, 2, axis=1) / 10)
        if learner is None:
            replay.add_block(block)
        else:
            learner.learn([block])


def test_learner_takes_its_share_of_gradient_steps_and_copies_the_target_every_period():
    replay = PrioritizedSequenceReplay(100, 4, 0.9, np.random.default_rng(0), period=2)
    learner = _learner(replay)
    _fill(replay, learner, num_blocks=3)
    # 6 blocks of 2 steps at 0.5 gradient steps per env step, counted once 2 sequences exist (after the
    # 4th block): blocks 4, 5, 6 give 3 x 2 x 0.5 = 3 gradient steps.
    assert learner.learner_steps == 3
    online, target = learner.network.state_dict(), learner.target_network.state_dict()
    # Period 2: copied after step 2, so after step 3 the online network has moved on from the target.
    assert any(not torch.equal(online[k], target[k]) for k in online)
    learner.gradient_step()  # step 4: copied again
    online, target = learner.network.state_dict(), learner.target_network.state_dict()
    assert all(torch.equal(online[k], target[k]) for k in online)


def test_priorities_are_the_mix_of_max_and_mean_td_of_each_replayed_sequence():
    replay = PrioritizedSequenceReplay(100, 4, 0.9, np.random.default_rng(0), period=2)
    _fill(replay)
    learner = _learner(replay, optimizer=torch.optim.SGD(_network(5).parameters(), lr=0.0))
    # Recompute what the learner will see: same replay rng state, same networks (lr 0: none move).
    state = replay.rng.bit_generator.state
    batch = replay.sample(2, 0.6)
    replay.rng.bit_generator.state = state
    o = _inputs(
        torch.as_tensor(batch.observation),
        torch.as_tensor(batch.extras["previous_action"]),
        torch.as_tensor(batch.reward),
    )
    f = torch.as_tensor(batch.first)
    stored = tuple(torch.as_tensor(x)[None] for x in batch.core_state)
    q_online, q_target = agent.sequence_q_values(learner.network, learner.target_network, o, f, stored, 1)
    extra = agent.r2d2_td_errors(
        q_online.detach(),
        q_target,
        torch.as_tensor(batch.action[1:-1]),
        torch.as_tensor(batch.reward[2:]),
        0.9 * (1.0 - torch.as_tensor(batch.terminated[2:], dtype=torch.float32)),
        ~f[2:],
        2,
    )
    td = extra.td_error.abs().numpy()  # [2 transitions, 2 sequences]
    learner.gradient_step()
    expected = 0.9 * td.max(axis=0) + 0.1 * td.mean(axis=0)  # no masked step here: every mask is 1
    assert extra.mask.min().item() == 1.0
    stored_priorities = replay.priorities()[batch.indices]
    np.testing.assert_allclose(stored_priorities, expected**0.9, rtol=1e-5)


def test_a_non_finite_loss_stops_before_the_parameters_change():
    replay = PrioritizedSequenceReplay(100, 4, 0.9, np.random.default_rng(0), period=2)
    for j in range(3):  # two sequences of one actor, every reward NaN: so is the loss
        block = _block(0, [2 * j + 1, 2 * j + 2], first=[j == 0, False])
        nan_rewards = np.full(2, np.nan, np.float32)
        replay.add_block(
            block._replace(observation=np.repeat(block.observation, 2, axis=1), reward=nan_rewards)
        )
    learner = _learner(replay, optimizer=optimization.adam(_network(0).parameters(), 1e-3))
    before = {k: v.clone() for k, v in learner.network.state_dict().items()}
    with pytest.raises(NonFiniteLossError, match="learner step 1;"):
        learner.gradient_step()
    assert all(torch.equal(before[k], v) for k, v in learner.network.state_dict().items())
    assert learner.learner_steps == 0


def test_the_learner_steps_with_fused_adam(tmp_path):
    env = gym.make("CartPole-v1")
    learner = train.build_learner(_config(tmp_path), env, torch.device("cpu")).learner
    assert isinstance(learner._optimizer, torch.optim.Adam) and learner._optimizer.defaults["fused"]


def test_actor_sends_blocks_with_the_state_before_their_sequences_first_step():
    network, link = _network(0), RecordingLink(actor_index=1)
    actor = agent.R2d2Actor(
        network=network,
        link=link,
        num_actions=2,
        epsilon=0.0,
        period=2,
        sequence_length=3,
        image_observations=False,
        rng=np.random.default_rng(0),
        device=torch.device("cpu"),
        agent_name="R2D2",
    )
    o = [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]]
    actor.step(timestep(o[0], first=True))
    actor.step(timestep(o[1], reward=1.0))
    actor.step(timestep(o[2], reward=1.0, truncated=True))  # episode cut: its action is never used
    actor.step(timestep(o[3], first=True))
    assert len(link.sent) == 2 and link.pulls == 2
    first_block, second_block = link.sent
    np.testing.assert_array_equal(first_block.core_state[0], np.zeros(3))  # before o_0: zero
    with torch.no_grad():
        # The second block completes the sequence o_1 o_2 o_3 (T = 3): the state before o_1, after o_0.
        state = network(_inputs(torch.tensor(o[:1])[:, None]), network.initial_state(1)).hidden_state
        # o_1 read with the previous action a_0 and the reward 1 received on arriving in it
        a_0 = network(_inputs(torch.tensor(o[:1])[:, None]), network.initial_state(1)).q_values[0, 0].argmax()
        inputs = _inputs(
            torch.tensor(o[:2])[:, None], torch.tensor([[0], [a_0]]), torch.tensor([[0.0], [1.0]])
        )
        greedy = network(inputs, network.initial_state(1)).q_values[:, 0].argmax(-1)
    np.testing.assert_allclose(second_block.core_state[0], state[0][0, 0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(second_block.core_state[1], state[1][0, 0].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(first_block.action, greedy.numpy())
    assert second_block.action[0] == 0  # after a truncation: no action
    assert second_block.truncated.tolist() == [True, False] and second_block.first.tolist() == [False, True]
    assert first_block.actor_index == 1
    assert link.statistics == [{"epsilon": 0.0}] * 2  # sent with each block, logged as actor_1/epsilon
    np.testing.assert_allclose(second_block.reward, [1.0, 0.0])
    # a_{k-1} with each step: 0 at an episode's start; o_2 follows a_1; o_3 starts an episode.
    assert first_block.extras["previous_action"].tolist() == [0, first_block.action[0]]
    assert second_block.extras["previous_action"].tolist() == [first_block.action[1], 0]


def test_the_network_reads_the_previous_action_and_reward():
    # R2D2's LSTM input: 4 torso features + one-hot a_{t-1} (2 actions) + r_t = 7.
    network = _network(0)
    assert network.lstm.input_size == 4 + 2 + 1
    o = torch.tensor([[[0.1, 0.2]]])  # [T = 1, B = 1, 2]
    state = network.initial_state(1)
    base = network(_inputs(o), state).q_values
    other_action = network(_inputs(o, previous_action=torch.tensor([[1]])), state).q_values
    other_reward = network(_inputs(o, reward=torch.tensor([[1.0]])), state).q_values
    assert not torch.allclose(base, other_action) and not torch.allclose(base, other_reward)


def test_evaluation_actor_feeds_the_network_what_the_actors_do():
    """The greedy evaluation reads a_{t-1} and r_t too: after o_0 o_1 o_2 its LSTM state is the network's
    over them with the actions it took and the rewards it got (not with zeros in their place)."""
    network = _network(3)
    actor = train.evaluation_actor(network, 2, 0.0, np.random.default_rng(0), torch.device("cpu"))
    o = torch.tensor([[0.1, 0.2], [0.9, -0.4], [-0.5, 0.3]])
    a_0 = actor.step(timestep(o[0].tolist(), first=True))
    a_1 = actor.step(timestep(o[1].tolist(), reward=2.0))
    actor.step(timestep(o[2].tolist(), reward=-3.0))
    with torch.no_grad():
        inputs = _inputs(o[:, None], torch.tensor([[0], [a_0], [a_1]]), torch.tensor([[0.0], [2.0], [-3.0]]))
        h, _ = network(inputs, network.initial_state(1)).hidden_state
        h_without, _ = network(_inputs(o[:, None]), network.initial_state(1)).hidden_state
    torch.testing.assert_close(actor._state[0], h)
    assert not torch.allclose(h, h_without, atol=1e-4)


def test_atari_sequences_replay_exactly_the_stacks_the_actor_saw():
    """Pong with episodes cut at 30 steps (so sequences cross episode starts): every replayed
    observation equals the env's own frame stack at that step."""
    from deep_rl_zoo import gym_env
    from deep_rl_zoo.main_loop import run_env_loop

    env = gym_env.create_atari_environment("Pong", seed=3, max_episode_steps=30)
    network = train.build_network({"lstm_size": 8, "head_hidden_sizes": ()}, env.observation_space.shape, 6)
    link = RecordingLink(actor_index=1)
    actor = agent.R2d2Actor(
        network=network,
        link=link,
        num_actions=6,
        epsilon=1.0,
        period=4,
        sequence_length=8,
        image_observations=True,
        rng=np.random.default_rng(0),
        device=torch.device("cpu"),
        agent_name="R2D2",
    )
    seen = []
    for step, _ in run_env_loop(env, actor, seed=3):
        seen.append(np.asarray(step.observation))
        if len(seen) == 72:
            break
    env.close()
    replay = PrioritizedSequenceReplay(1000, 8, 1.0, np.random.default_rng(0), stack_size=4, period=4)
    for block in link.sent:
        replay.add_block(block)
    slots, batch = _all_sequences(replay)
    assert len(slots) == 72 // 4 - 1
    for k in slots.values():
        for t in range(8):
            np.testing.assert_array_equal(batch.observation[t, k], seen[int(batch.steps[t, k])])


# ----------------------------------------------------------------------------------------------------
# Configuration


def _config(tmp_path, **overrides) -> train.R2d2Config:
    return tiny_config(
        train.R2d2Config, tmp_path, TINY_SEQUENCE_RUN, dict(environment_name="CartPole-v1"), overrides
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(replay_period=9), "replay_period"),  # sequences of 2 + 5 + 1 = 8 steps
        (dict(burn_in=-1), "burn_in"),
        (dict(trace_length=0), "trace_length"),
        (dict(priority_eta=1.5), "priority_eta"),
        (dict(replay_capacity=10), "replay_capacity"),
    ],
)
def test_bad_flags_are_config_errors(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, **overrides)


def test_continuous_env_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="discrete"):
        train.main(_config(tmp_path, environment_name="Pendulum-v1"))
    assert not os.path.exists(tmp_path / "runs")


# ----------------------------------------------------------------------------------------------------
# Smoke runs of every script


@pytest.mark.smoke
def test_run_classic_resume_then_eval_agent(tmp_path):
    first, later = train_then_resume(train, functools.partial(_config, tmp_path), "R2D2")
    assert first["learner_steps"] > 0
    assert later["env_steps"] > first["env_steps"]  # counted on, not restarted
    returns = evaluate_latest(
        eval_agent, tmp_path, eval_agent.R2d2EvalConfig, environment_name="CartPole-v1", num_episodes=2
    )
    assert len(returns) == 2


@pytest.mark.smoke
def test_tensorboard_has_each_actors_epsilon_and_episode_returns(tmp_path):
    train.main(_config(tmp_path, num_iterations=1, num_train_steps=200, use_tensorboard=True))
    metrics = plot.read_tensorboard(str(tmp_path / "runs" / "R2D2_CartPole-v1"))
    # Two actors, Ape-X: 0.4^(1 + 7 * 0 / 1) = 0.4 and 0.4^(1 + 7 * 1 / 1) = 0.4^8.
    np.testing.assert_allclose(metrics["actor_0/epsilon"].values, 0.4, rtol=1e-6)
    np.testing.assert_allclose(metrics["actor_1/epsilon"].values, 0.4**8, rtol=1e-6)
    for actor in (0, 1):  # 200 env steps of CartPole: each actor finishes episodes (at most 500 steps)
        assert len(metrics[f"actor_{actor}/episode_return"].values) > 0


def test_obscured_observations_reach_the_actor_processes_env_and_the_evaluation(tmp_path):
    wrap_env = pickle.loads(pickle.dumps(obscuring_wrapper(1.0)))  # actor processes get it pickled
    built = {}

    def build_actor(config, env, device, link, seed):
        built["env"] = env
        return None, None

    config = _config(tmp_path, obscure_probability=1.0)
    distributed._build_actor_process_side(
        config, build_actor, 0, 5, torch.device("cpu"), None, wrap_env=wrap_env
    )
    observation, _ = built["env"].reset(seed=5)
    assert not observation.any()  # p = 1 blanks every observation
    assert not built["env"].step(0)[0].any()
    with pytest.raises(ConfigError, match="obscure_probability"):
        _config(tmp_path, obscure_probability=1.5)


def test_eval_agent_refuses_an_obscure_probability_outside_0_1_before_any_work():
    from deep_rl_zoo.r2d2.eval_agent import R2d2EvalConfig

    for p in (-0.1, 1.5):
        with pytest.raises(ConfigError, match=r"--obscure_probability must be in \[0, 1\]"):
            R2d2EvalConfig(environment_name="CartPole-v1", obscure_probability=p)


@pytest.mark.smoke
def test_flickering_cartpole_runs_with_actor_processes(tmp_path):
    """The obscuring wrapper travels to the actors through the fork server (a lambda would not pickle)."""
    state = train.main(_config(tmp_path, num_iterations=1, obscure_probability=0.5))
    assert state.train_env_steps > 0
    returns = evaluate_latest(
        eval_agent,
        tmp_path,
        eval_agent.R2d2EvalConfig,
        video=False,
        environment_name="CartPole-v1",
        num_episodes=1,
        obscure_probability=0.5,
    )
    assert len(returns) == 1


@pytest.mark.smoke
def test_run_atari_smoke_with_one_actor(tmp_path):
    recurrent_replay_atari_smoke(
        tmp_path, "R2D2", train, train.R2d2Config, run_atari.DEFAULTS, eval_agent, eval_agent.R2d2EvalConfig
    )


# ----------------------------------------------------------------------------------------------------
# Learning


@pytest.mark.learning
def test_r2d2_learns_cartpole(tmp_path):
    """Guards the whole learning path (actors' blocks, replay, burn-in from stored states, transformed
    double-Q targets, priorities, target copies): a broken piece leaves the greedy return near a random
    policy's 22. The default classic flags (4 actors) reached greedy means of 169 and 187 after 5k env
    steps on seeds 1 and 2 (the runs of README's results table), and seed 1 423.5 after the learner
    moved to one-pass LSTM resets and fused Adam; a full-suite run beside the other tests' processes once
    gave 91.5: the actors' timing makes asynchronous runs differ from one run to the next. Milestone: the
    latest greedy evaluation (1,000 env steps) >= 60, about three times random play, trained 5k env steps
    at a time until it (`train_until`; a resumed iteration refills its replay first), at most 15k. The
    seed is the config's default (1), not chosen.
    About 1,000 gradient steps of 50-150 ms each per 5k on one thread (benchmarks/r2d2_learner_speed.py)."""
    rows = train_until(
        train.main,
        lambda **iterations: tiny_config(
            train.R2d2Config, tmp_path, dict(num_train_steps=5_000, num_eval_steps=1_000), iterations
        ),
        tmp_path / "runs" / "R2D2_CartPole-v1" / "results.csv",
        lambda rows: evaluations(rows)[-1] >= 60,
        max_iterations=3,
    )
    assert evaluations(rows)[-1] >= 60, (
        f"R2D2 on CartPole-v1 in {len(rows) * 5}k steps: greedy evaluations {rounded(evaluations(rows))} "
        "(random play: about 22)"
    )


def test_a_stop_request_ends_the_gradient_steps_owed_and_the_checkpoint_keeps_the_rest():
    replay = PrioritizedSequenceReplay(100, 4, 0.9, np.random.default_rng(0), period=2)
    learner = _learner(replay)
    _fill(replay, learner, num_blocks=3)  # 3 gradient steps taken (see the test above)
    learner._update_credit = 1000.0  # e.g. a high --updates_per_env_step on a slow learner
    learner.should_stop = lambda: learner.learner_steps >= 5  # Ctrl-C arrives during the 5th step
    learner.learn([_block(0, [1, 2], first=[False, False])])  # + 2 steps x 0.5 = 1 more owed
    assert learner.learner_steps == 5  # returned after the step in progress, not 1004 steps later
    assert learner.state_dict()["update_credit"] == 1001.0 - 2  # what --resume still owes
