"""The environment loop: first/last handling, step counting, and the iteration loop's bookkeeping."""

import csv

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


class FakeClock:
    """`main_loop.time` for a test: `perf_counter()` is the seconds the env's steps have taken."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class TimedEnv(CountingEnv):
    """Every env step takes `seconds_per_step` of the fake clock."""

    def __init__(self, clock: FakeClock, seconds_per_step: float, length: int = 3):
        super().__init__(length)
        self.clock, self.seconds_per_step = clock, seconds_per_step

    def step(self, action):
        self.clock.now += self.seconds_per_step
        return super().step(action)


def test_results_rows_carry_the_runs_wall_clock_and_evaluation_seconds_across_a_resume(tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(main_loop, "time", clock)
    monkeypatch.setattr(trackers, "time", clock)
    path = tmp_path / "results.csv"
    # A resumed run: its earlier part took 100 s, 30 of them evaluating.
    loop_state = main_loop.LoopState(next_iteration=1, wall_seconds=100.0, eval_seconds=30.0)
    main_loop.run_single_thread_training_iterations(
        num_iterations=3,
        num_train_steps=6,  # 6 training steps of 1 s and 4 evaluation steps of 2 s per iteration
        num_eval_steps=4,
        train_agent=RecordingAgent(),
        train_env=TimedEnv(clock, 1.0),
        eval_agent=RecordingAgent(),
        eval_env=TimedEnv(clock, 2.0),
        seed=0,
        logger=trackers.RunLogger(str(tmp_path), False, str(path)),
        save_checkpoint=lambda iteration, state, interrupted=False: "ckpt",
        loop_state=loop_state,
        show_progress=False,
    )
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    # iteration 1: 100 + 6 * 1 + 4 * 2 = 114 s, 30 + 8 = 38 evaluating; iteration 2: 128 s, 46 evaluating
    assert [(r["iteration"], float(r["wall_seconds"]), float(r["eval_seconds"])) for r in rows] == [
        ("1", 114.0, 38.0),
        ("2", 128.0, 46.0),
    ]
    assert (loop_state.wall_seconds, loop_state.eval_seconds) == (128.0, 46.0)  # what the checkpoint keeps
    # The training speed is the training phase's: 6 steps in 6 s, not over the 8 s of evaluation too.
    assert [float(r["train_steps_per_second"]) for r in rows] == [1.0, 1.0]


def test_a_checkpoint_from_before_the_wall_clock_columns_resumes_at_zero_seconds():
    old = main_loop.LoopState(next_iteration=2).state_dict()
    del old["wall_seconds"], old["eval_seconds"]
    restored = main_loop.LoopState.from_state_dict(old)
    assert (restored.next_iteration, restored.wall_seconds, restored.eval_seconds) == (2, 0.0, 0.0)
