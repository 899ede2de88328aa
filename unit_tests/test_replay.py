"""Tests of deep_rl_zoo/replay.py: n-step transitions, uniform replay, frame stack store."""

from collections import deque

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FrameStackObservation

from deep_rl_zoo import replay
from deep_rl_zoo.types_ import TimeStep


def _timestep(reward=0.0, terminated=False, truncated=False, first=False):
    return TimeStep(
        observation=np.zeros(1),
        reward=reward,
        terminated=terminated,
        truncated=truncated,
        first=first,
        info={},
    )


def _run_episode(accumulator, rewards, end, observations=None, actions=None):
    """Feeds one episode of len(rewards) steps: states 0..T, rewards r_1..r_T; returns transitions.

    `end` is "terminated", "truncated" or "both" (how the last step ends); the state stored for
    step t is observations[t] (default t) and the action actions[t] (default 10 + t).
    """
    num_steps = len(rewards)
    observations = list(range(num_steps + 1)) if observations is None else observations
    actions = [10 + t for t in range(num_steps + 1)] if actions is None else actions
    out = accumulator.step(_timestep(first=True), observations[0], actions[0])
    for t in range(1, num_steps + 1):
        last = t == num_steps
        timestep = _timestep(
            reward=rewards[t - 1],
            terminated=last and end in ("terminated", "both"),
            truncated=last and end in ("truncated", "both"),
        )
        out += accumulator.step(timestep, observations[t], None if last else actions[t])
    return out


def _naive_transitions(rewards, end, n, gamma, observations, actions):
    """Reference: one explicit sum per start state, in the order the accumulator emits them."""
    num_steps = len(rewards)
    out = []
    for start in range(num_steps):
        stop = min(start + n, num_steps)
        r = sum(gamma**k * rewards[start + k] for k in range(stop - start))
        terminal = stop == num_steps and end in ("terminated", "both")
        discount = 0.0 if terminal else gamma ** (stop - start)
        out.append((observations[start], actions[start], r, discount, observations[stop]))
    return out


class TestTransitionAccumulator:
    def test_one_step_worked_example(self):
        accumulator = replay.TransitionAccumulator(n=1, discount=0.9)
        transitions = _run_episode(accumulator, rewards=[1.0, 2.0], end="terminated")
        assert [(t.s_tm1, t.a_tm1, t.s_t) for t in transitions] == [(0, 10, 1), (1, 11, 2)]
        assert transitions[0].r_t == 1.0 and transitions[0].discount_t == np.float32(0.9)
        # The last step is terminal: no bootstrap.
        assert transitions[1].r_t == 2.0 and transitions[1].discount_t == 0.0

    def test_three_step_worked_example(self):
        accumulator = replay.TransitionAccumulator(n=3, discount=0.5)
        # Rewards r1..r4 = 1, 2, 4, 8; states 0..4, state 4 is a time-limit truncation.
        transitions = _run_episode(accumulator, rewards=[1.0, 2.0, 4.0, 8.0], end="truncated")
        got = [(t.s_tm1, float(t.r_t), float(t.discount_t), t.s_t) for t in transitions]
        assert got == [
            (0, 3.0, 0.125, 3),  # 1 + 0.5 * 2 + 0.25 * 4 = 3,  0.5**3 = 0.125
            (1, 6.0, 0.125, 4),  # 2 + 0.5 * 4 + 0.25 * 8 = 6, full window, emitted at the last step
            (2, 8.0, 0.25, 4),  # 4 + 0.5 * 8 = 8, flushed window of 2 steps keeps 0.5**2
            (3, 8.0, 0.5, 4),  # 8, window of 1 step keeps 0.5
        ]

    def test_termination_zeroes_discount_truncation_keeps_gamma_power(self):
        gamma = 0.5
        terminated = _run_episode(replay.TransitionAccumulator(3, gamma), [1.0, 1.0], end="terminated")
        truncated = _run_episode(replay.TransitionAccumulator(3, gamma), [1.0, 1.0], end="truncated")
        # Same rewards: 1 + 0.5 * 1 = 1.5 and 1.
        assert [float(t.r_t) for t in terminated] == [float(t.r_t) for t in truncated] == [1.5, 1.0]
        assert [float(t.discount_t) for t in terminated] == [0.0, 0.0]
        assert [float(t.discount_t) for t in truncated] == [0.25, 0.5]  # 0.5**2, 0.5**1
        # Terminated and truncated together (gymnasium allows it): the state is terminal.
        both = _run_episode(replay.TransitionAccumulator(3, gamma), [1.0, 1.0], end="both")
        assert [float(t.discount_t) for t in both] == [0.0, 0.0]

    @pytest.mark.parametrize("n", [1, 3])
    def test_matches_naive_loop_on_random_episodes(self, n):
        rng = np.random.default_rng(0)
        gamma = 0.9
        accumulator = replay.TransitionAccumulator(n, gamma)
        got, expected = [], []
        # One accumulator for all episodes, with no reset() in between: `first` must start afresh.
        for episode, length in enumerate([1, 2, 3, 4, 7, 1, 5, 12, 2]):
            rewards = list(rng.integers(-3, 4, size=length).astype(float))
            end = ["terminated", "truncated"][episode % 2]
            observations = [(episode, t) for t in range(length + 1)]
            actions = [int(a) for a in rng.integers(0, 4, size=length + 1)]
            got += _run_episode(accumulator, rewards, end, observations, actions)
            expected += _naive_transitions(rewards, end, n, gamma, observations, actions)
        assert len(got) == len(expected) == 1 + 2 + 3 + 4 + 7 + 1 + 5 + 12 + 2  # one per step
        for transition, (s_tm1, a_tm1, r_t, discount_t, s_t) in zip(got, expected, strict=True):
            assert (transition.s_tm1, transition.a_tm1, transition.s_t) == (s_tm1, a_tm1, s_t)
            np.testing.assert_allclose(transition.r_t, r_t, rtol=1e-6)
            np.testing.assert_allclose(transition.discount_t, discount_t, rtol=1e-6)
            # No transition crosses an episode boundary; s_t is at most n steps later.
            assert s_tm1[0] == s_t[0] and 1 <= s_t[1] - s_tm1[1] <= n

    def test_one_step_is_previous_state_reward_and_discount(self):
        accumulator = replay.TransitionAccumulator(1, 0.9)
        assert accumulator.step(_timestep(first=True), "s0", 0) == []
        (transition,) = accumulator.step(_timestep(reward=2.0), "s1", 1)
        assert transition == ("s0", 0, np.float32(2.0), np.float32(0.9), "s1")  # 0.9 * (1 - 0)

    def test_no_state_carried_across_episodes(self):
        accumulator = replay.TransitionAccumulator(3, 0.9)
        # An episode abandoned after 2 steps, without a last timestep: its windows are still open.
        accumulator.step(_timestep(first=True), "old0", 0)
        accumulator.step(_timestep(reward=100.0), "old1", 1)
        transitions = _run_episode(accumulator, [1.0, 1.0, 1.0, 1.0], end="truncated")
        assert [t.s_tm1 for t in transitions] == [0, 1, 2, 3]
        assert all(t.r_t < 100.0 for t in transitions)

    def test_reset_drops_open_windows(self):
        accumulator = replay.TransitionAccumulator(2, 0.9)
        accumulator.step(_timestep(first=True), 0, 0)
        accumulator.reset()
        with pytest.raises(ValueError, match="first"):
            accumulator.step(_timestep(reward=1.0), 1, 1)

    def test_rewards_and_discounts_are_float32(self):
        transitions = _run_episode(replay.TransitionAccumulator(2, 0.9), [1.0, 2.0], end="truncated")
        assert all(
            isinstance(t.r_t, np.float32) and isinstance(t.discount_t, np.float32) for t in transitions
        )


def _transition(i, obs_shape=(2,)):
    return replay.Transition(
        s_tm1=np.full(obs_shape, i, np.float32),
        a_tm1=i,
        r_t=np.float32(i),
        discount_t=np.float32(0.9),
        s_t=np.full(obs_shape, i + 1, np.float32),
    )


class TestUniformReplay:
    def test_circular_overwrite_keeps_newest_capacity_items(self):
        buffer = replay.UniformReplay(capacity=3, rng=np.random.default_rng(0))
        for i in range(5):  # 0 1 2 3 4 -> slots hold 3 4 2
            buffer.add(_transition(i))
        assert buffer.size == 3 and buffer.capacity == 3 and buffer.num_added == 5
        seen = set()
        for _ in range(50):
            seen |= set(buffer.sample(3).a_tm1.tolist())
        assert seen == {2, 3, 4}  # 0 and 1 were overwritten

    def test_sample_shapes_and_dtypes(self):
        buffer = replay.UniformReplay(capacity=10, rng=np.random.default_rng(0))
        for i in range(6):
            buffer.add(_transition(i, obs_shape=(3, 2)))
        batch = buffer.sample(5)
        assert isinstance(batch, replay.Transition)
        assert batch.s_tm1.shape == batch.s_t.shape == (5, 3, 2) and batch.s_tm1.dtype == np.float32
        assert batch.a_tm1.shape == (5,) and batch.a_tm1.dtype == np.int64
        assert batch.r_t.dtype == batch.discount_t.dtype == np.float32
        # Fields stay together: s_tm1 holds i, s_t holds i + 1, r_t holds i.
        np.testing.assert_array_equal(batch.s_t[:, 0, 0] - batch.s_tm1[:, 0, 0], np.ones(5))
        np.testing.assert_array_equal(batch.r_t, batch.a_tm1.astype(np.float32))

    def test_nbytes_is_allocated_on_first_add(self):
        buffer = replay.UniformReplay(capacity=10, rng=np.random.default_rng(0))
        assert buffer.nbytes == 0
        buffer.add(_transition(0))
        # Per item: s_tm1 2 * 4 + a_tm1 8 + r_t 4 + discount_t 4 + s_t 2 * 4 = 32 bytes; * 10 = 320.
        assert buffer.nbytes == 320

    def test_seeded_sampling_is_reproducible(self):
        batches = []
        for _ in range(2):
            buffer = replay.UniformReplay(capacity=100, rng=np.random.default_rng(42))
            for i in range(100):
                buffer.add(_transition(i))
            batches.append([buffer.sample(8).a_tm1 for _ in range(3)])
        for first, second in zip(*batches, strict=True):
            np.testing.assert_array_equal(first, second)

    def test_errors(self):
        buffer = replay.UniformReplay(capacity=10, rng=np.random.default_rng(0))
        with pytest.raises(ValueError, match="empty"):
            buffer.sample(1)
        buffer.add(_transition(0))
        buffer.add(_transition(1))
        with pytest.raises(ValueError, match="batch_size"):
            buffer.sample(3)  # 3 > size 2
        with pytest.raises(ValueError, match="shape"):
            buffer.add(_transition(2, obs_shape=(5,)))
        with pytest.raises(TypeError):
            buffer.add((1, 2, 3, 4, 5))


class NumberedFramesEnv(gym.Env):
    """Emits 2x3 uint8 frames holding a global frame counter; episode lengths follow a script."""

    def __init__(self, episode_lengths):
        self.observation_space = gym.spaces.Box(0, 255, shape=(2, 3), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self._episode_lengths = list(episode_lengths)
        self._episode = -1
        self._counter = -1
        self._t = 0

    def _frame(self):
        self._counter += 1
        frame = np.zeros((2, 3), np.uint8)
        frame[0, 0], frame[0, 1] = self._counter % 256, self._counter // 256
        frame[1, :] = self._episode  # makes a frame from the wrong episode easy to spot
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._episode += 1
        self._t = 0
        return self._frame(), {}

    def step(self, action):
        self._t += 1
        done = self._t == self._episode_lengths[self._episode]
        # Alternate how episodes end; FrameStackObservation pads the same way after either.
        terminated, truncated = (done, False) if self._episode % 2 == 0 else (False, done)
        return self._frame(), 1.0, terminated, truncated, {}


def _record_stacks(episode_lengths, store, stack_size):
    """Plays the env under FrameStackObservation; returns handles and the wrapper's stacks."""
    env = FrameStackObservation(NumberedFramesEnv(episode_lengths), stack_size, padding_type="reset")
    handles, expected = [], []
    for _ in episode_lengths:
        observation, _ = env.reset()
        handles.append(store.add(observation[-1], first=True))
        expected.append(observation)
        done = False
        while not done:
            observation, _, terminated, truncated, _ = env.step(0)
            handles.append(store.add(observation[-1], first=False))
            expected.append(observation)
            done = terminated or truncated
    return np.array(handles), np.stack(expected)


class TestFrameStackStore:
    def test_worked_example_pads_with_episode_first_frame(self):
        store = replay.FrameStackStore(capacity=8, frame_shape=(1, 1), stack_size=4)
        frames = [np.full((1, 1), v, np.uint8) for v in (10, 11, 20, 21, 22, 23)]  # a0 a1 | b0..b3
        handles = [store.add(f, first=i in (0, 2)) for i, f in enumerate(frames)]
        assert handles == [0, 1, 2, 3, 4, 5]
        stacks = store.stacks(np.array([3, 5, 1]))[:, :, 0, 0]
        np.testing.assert_array_equal(
            stacks, [[20, 20, 20, 21], [20, 21, 22, 23], [10, 10, 10, 11]]
        )  # b0 b0 b0 b1 | b0 b1 b2 b3 | a0 a0 a0 a1

    @pytest.mark.parametrize("stack_size", [1, 4])
    def test_matches_gymnasium_frame_stack_observation(self, stack_size):
        # Episodes of 1, 2, 3, 6 and 9 steps: shorter and longer than the stack.
        episode_lengths = [1, 2, 3, 6, 9, 2, 1]
        store = replay.FrameStackStore(capacity=64, frame_shape=(2, 3), stack_size=stack_size)
        handles, expected = _record_stacks(episode_lengths, store, stack_size)
        assert len(handles) == sum(episode_lengths) + len(episode_lengths)  # one frame per timestep
        permutation = np.random.default_rng(0).permutation(len(handles))  # any order, one call
        stacks = store.stacks(handles[permutation])
        assert stacks.shape == (len(handles), stack_size, 2, 3) and stacks.dtype == np.uint8
        np.testing.assert_array_equal(stacks, expected[permutation])

    def test_ring_wraparound_matches_gymnasium(self):
        # 40 frames through a ring of 10 slots: the newest handles still rebuild exactly.
        episode_lengths = [3, 7, 5, 2, 9, 4, 5]  # 35 steps + 7 first frames = 42 frames
        store = replay.FrameStackStore(capacity=10, frame_shape=(2, 3), stack_size=4)
        handles, expected = _record_stacks(episode_lengths, store, 4)
        newest = handles[-1]
        # Valid for sure from newest - capacity + stack_size = 41 - 10 + 4 = 35 on.
        recent = handles >= newest - 10 + 4
        np.testing.assert_array_equal(store.stacks(handles[recent]), expected[recent])
        assert store.valid(handles[recent]).all()

    def test_stale_and_unissued_handles_raise(self):
        store = replay.FrameStackStore(capacity=6, frame_shape=(1, 1), stack_size=4)
        for i in range(10):  # handles 0..9, one episode; the ring keeps 4..9
            store.add(np.full((1, 1), i, np.uint8), first=i == 0)
        # Handle 7 needs frames 4..7: all kept. Handle 6 needs 3..6, and 3 is overwritten.
        np.testing.assert_array_equal(store.stacks(np.array([7]))[0, :, 0, 0], [4, 5, 6, 7])
        np.testing.assert_array_equal(
            store.valid(np.array([2, 6, 7, 9, 10])), [False, False, True, True, False]
        )
        with pytest.raises(replay.StaleFrameHandleError, match="not stored"):
            store.stacks(np.array([7, 6]))
        with pytest.raises(replay.StaleFrameHandleError):
            store.stacks(np.array([10]))  # never issued
        with pytest.raises(ValueError, match="1-D integer"):
            store.stacks(np.array([[7]]))

    def test_add_checks_frames(self):
        store = replay.FrameStackStore(capacity=6, frame_shape=(2, 2), stack_size=4)
        with pytest.raises(ValueError, match="first=True"):
            store.add(np.zeros((2, 2), np.uint8), first=False)
        with pytest.raises(ValueError, match="uint8"):
            store.add(np.zeros((2, 2), np.float32), first=True)

    def test_memory_figure(self):
        store = replay.FrameStackStore(capacity=1000, frame_shape=(84, 84), stack_size=4)
        assert store.nbytes == 1000 * 84 * 84 + 3 * 1000  # frames once, + 3 bytes of bookkeeping per slot


def _simulate_agent(replay_capacity, store_capacity, n, episode_lengths, stack_size=4):
    """Runs frames -> accumulator -> replay as an Atari agent does; after every step checks that each
    transition still in the replay has its whole s_tm1 stack in the store. Returns the first env step
    at which one did not, or None."""
    store = replay.FrameStackStore(store_capacity, (1, 1), stack_size)
    accumulator = replay.TransitionAccumulator(n, 0.9)
    in_replay = deque(maxlen=replay_capacity)  # exactly what UniformReplay(replay_capacity) holds
    frame = np.zeros((1, 1), np.uint8)
    for length in episode_lengths:
        for t in range(length + 1):
            timestep = _timestep(reward=1.0, truncated=t == length, first=t == 0)
            handle = store.add(frame, timestep.first)
            in_replay.extend(accumulator.step(timestep, handle, 0))
            oldest_s_tm1 = min(transition.s_tm1 for transition in in_replay) if in_replay else handle
            # Conservative: every frame oldest_s_tm1 - stack + 1 .. oldest_s_tm1 must still be kept.
            if oldest_s_tm1 - stack_size + 1 < store.num_added - store_capacity:
                return store.num_added
    return None


class TestFrameStoreCapacity:
    def test_formula(self):
        # C=100, n=3, S=4, L=8: 100 + ceil((100 + 3 + 8) / 8) + 2 * 3 + 4 = 100 + 14 + 6 + 4 = 124.
        assert replay.frame_store_capacity(100, 3, stack_size=4, min_episode_steps=8) == 124
        # 1M replay, defaults: 1M + ceil(1_000_035 / 32) + 2 * 3 + 4 = 1M + 31_252 + 10.
        assert replay.frame_store_capacity(1_000_000, 3) == 1_031_262

    @pytest.mark.parametrize("n", [1, 3, 5])
    @pytest.mark.parametrize("min_episode_steps", [1, 2, 4, 9])
    def test_margin_holds_for_episodes_of_at_least_min_length(self, n, min_episode_steps):
        rng = np.random.default_rng(n * 100 + min_episode_steps)
        capacity = 50
        store_capacity = replay.frame_store_capacity(capacity, n, 4, min_episode_steps)
        # Worst case: every episode exactly min_episode_steps long (most first frames); then mixed.
        lengths = [min_episode_steps] * 60 + list(rng.integers(min_episode_steps, 4 * min_episode_steps, 30))
        assert _simulate_agent(capacity, store_capacity, n, lengths) is None

    def test_margin_is_needed(self):
        # Without it (store as big as the replay + one stack), short episodes leave stale handles.
        assert _simulate_agent(50, 50 + 4, n=3, episode_lengths=[4] * 60) is not None
        # And with one-step episodes, more episode starts than a margin for L=32 allows.
        store_capacity = replay.frame_store_capacity(50, 1, 4, min_episode_steps=32)
        assert _simulate_agent(50, store_capacity, n=1, episode_lengths=[1] * 100) is not None


class _MirroredReplay(replay.UniformReplay):
    """A UniformReplay that also keeps, in a deque of the same capacity, the items it holds."""

    def __init__(self, capacity):
        super().__init__(capacity, np.random.default_rng(0))
        self.live = deque(maxlen=capacity)

    def add(self, item):
        super().add(item)
        self.live.append(item)


class TestTransitionWriterFrames:
    def test_stacks_stay_exact_with_episodes_shorter_than_the_store_margin(self):
        # One- and two-step episodes: 1.5 first frames per 1.5 transitions, far more than the margin
        # for 32-step episodes that frame_store_capacity(50, 1) = 50 + 3 + 2 + 4 = 59 slots holds.
        # Before the store grew on demand, this raised StaleFrameHandleError ~40 steps in.
        episode_lengths = [1, 2] * 60
        env = FrameStackObservation(NumberedFramesEnv(episode_lengths), 4, padding_type="reset")
        buffer = _MirroredReplay(50)
        store = replay.frame_store_for((4, 2, 3), replay_capacity=50, n_step=1)
        assert store.capacity == 59
        writer = replay.TransitionWriter(buffer, replay.TransitionAccumulator(1, 0.9), store)
        expected = {}  # handle -> the stack the env returned
        for _ in episode_lengths:
            observation, _ = env.reset()
            timestep = TimeStep(observation, 0.0, False, False, True, {})
            done = False
            while True:
                expected[store.num_added] = observation
                writer.add(timestep, 0)
                # Every transition the replay holds rebuilds exactly the stacks the agent saw.
                s_tm1 = np.array([t.s_tm1 for t in buffer.live])
                s_t = np.array([t.s_t for t in buffer.live])
                if len(s_tm1):
                    batch = writer.to_tensors(
                        replay.Transition(s_tm1, s_tm1 * 0, s_tm1 * 0.0, s_tm1 * 0.0, s_t), "cpu"
                    )
                    np.testing.assert_array_equal(batch.s_tm1.numpy(), np.stack([expected[h] for h in s_tm1]))
                    np.testing.assert_array_equal(batch.s_t.numpy(), np.stack([expected[h] for h in s_t]))
                if done:
                    break
                observation, _, terminated, truncated, _ = env.step(0)
                timestep = TimeStep(observation, 1.0, terminated, truncated, False, {})
                done = terminated or truncated
        # 120 episodes, 180 steps: 300 frames for 180 transitions. The oldest of the 50 kept
        # transitions starts ~84 frames before the newest, so the ring grew beyond 59 slots.
        assert store.num_added == 300
        assert store.capacity > 59

    def test_store_does_not_grow_when_episodes_are_long(self):
        buffer = _MirroredReplay(50)
        store = replay.frame_store_for((4, 2, 3), replay_capacity=50, n_step=3)
        capacity = store.capacity
        writer = replay.TransitionWriter(buffer, replay.TransitionAccumulator(3, 0.9), store)
        frame = np.zeros((4, 2, 3), np.uint8)
        for _ in range(10):  # 10 episodes of 40 steps: longer than the margin's 32
            writer.add(TimeStep(frame, 0.0, False, False, True, {}), 0)
            for t in range(1, 41):
                writer.add(TimeStep(frame, 1.0, t == 40, False, False, {}), 0)
        assert store.num_added == 410 and store.capacity == capacity

    def test_grow_keeps_every_stack(self):
        store = replay.FrameStackStore(capacity=6, frame_shape=(1, 1), stack_size=4)
        for i in range(10):  # handles 0..9; a new episode at 7; the ring of 6 keeps 4..9
            store.add(np.full((1, 1), i, np.uint8), first=i in (0, 7))
        before = store.stacks(np.array([7, 8, 9]))
        store.grow(9)
        assert store.capacity == 9
        np.testing.assert_array_equal(store.stacks(np.array([7, 8, 9])), before)
        np.testing.assert_array_equal(before[:, :, 0, 0], [[7, 7, 7, 7], [7, 7, 7, 8], [7, 7, 8, 9]])
        for i in range(10, 13):  # 3 more frames fit without overwriting handle 4
            store.add(np.full((1, 1), i, np.uint8), first=False)
        # Handle 7 needs only itself (first frame); handle 6 needs 3..6, and 3 was never kept.
        np.testing.assert_array_equal(
            store.stacks(np.array([7, 12]))[:, :, 0, 0], [[7, 7, 7, 7], [9, 10, 11, 12]]
        )
        assert not store.valid(np.array([6]))[0]
        with pytest.raises(ValueError, match="only grow"):
            store.grow(9)
