"""The environment loop: first/last handling, step counting, and the iteration loop's bookkeeping."""

import gymnasium as gym
import numpy as np

from deep_rl_zoo import main_loop, trackers


class CountingEnv(gym.Env):
    """Observation = step index; terminates after `length` steps with reward 1 per step."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length=3, truncate=False):
        self.length, self.truncate, self.t = length, truncate, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t >= self.length
        info = {"episode": {"r": float(self.t), "l": self.t}} if end else {}
        return np.array([self.t], np.float32), 1.0, end and not self.truncate, end and self.truncate, info


class RecordingAgent:
    agent_name = "test"

    def __init__(self):
        self.seen, self.resets = [], 0

    def step(self, timestep):
        self.seen.append((float(timestep.observation[0]), timestep.first, timestep.last))
        return 0

    def reset(self):
        self.resets += 1

    statistics = {}


def test_agent_sees_first_and_last_timesteps_and_is_reset_per_episode():
    agent = RecordingAgent()
    loop = main_loop.run_env_loop(CountingEnv(length=2), agent, seed=0)
    for _ in range(6):
        next(loop)
    # two episodes of 2 steps: s0 (first), s1, s2 (last), then again
    assert agent.seen == [(0, True, False), (1, False, False), (2, False, True)] * 2
    assert agent.resets == 2


def test_run_env_steps_counts_env_steps_not_resets_and_records_whole_episodes():
    stats = trackers.PhaseStats()
    loop = main_loop.run_env_loop(CountingEnv(length=3), RecordingAgent(), seed=0)
    main_loop.run_env_steps(7, loop, stats)
    # 7 env steps = two whole episodes of 3 + one step of the third
    assert stats.num_steps == 7
    assert stats.episode_returns == [3.0, 3.0] and stats.episode_lengths == [3, 3]
    # the loop continues where it stopped: 2 more steps finish the third episode
    main_loop.run_env_steps(2, loop, stats)
    assert stats.episode_returns == [3.0, 3.0, 3.0]


def test_phase_summary_gives_the_spread_of_whole_episode_returns():
    stats = trackers.PhaseStats()
    stats.episode_returns, stats.episode_lengths = [-21.0, -19.0, -17.0], [800, 900, 1000]
    summary = stats.summary()
    assert summary["mean_episode_return"] == -19.0
    assert (summary["min_episode_return"], summary["max_episode_return"]) == (-21.0, -17.0)
    # population std: deviations -2, 0, 2 -> sqrt((4 + 0 + 4) / 3)
    assert summary["std_episode_return"] == (8 / 3) ** 0.5
    empty = trackers.PhaseStats().summary()
    assert all(np.isnan(empty[f"{edge}_episode_return"]) for edge in ("min", "max", "std"))


def test_truncation_reaches_the_agent_as_truncated_not_terminated():
    seen = []

    class Agent(RecordingAgent):
        def step(self, timestep):
            seen.append((timestep.terminated, timestep.truncated))
            return 0

    loop = main_loop.run_env_loop(CountingEnv(length=1, truncate=True), Agent(), seed=0)
    next(loop), next(loop)
    assert seen == [(False, False), (False, True)]


def test_evaluate_episodes_plays_whole_episodes():
    returns = main_loop.evaluate_episodes(CountingEnv(length=4), RecordingAgent(), num_episodes=3, seed=0)
    assert returns == [4.0, 4.0, 4.0]
