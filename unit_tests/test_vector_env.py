"""Tests for deep_rl_zoo.vector_env: the C++ vector Atari path against the single gymnasium env, the
true final screen at the frame cap, life loss, whole-game statistics, and the serial vector env."""

import csv

import gymnasium as gym
import numpy as np
import pytest
from ale_py.vector_env import AtariVectorEnv
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import FrameStackObservation

from deep_rl_zoo import errors, gym_env, main_loop, trackers, vector_env
from deep_rl_zoo.runtime import interface
from deep_rl_zoo.types_ import TimeStep


def _single_pong(noop_max: int = 0, frame_cap: int = vector_env.ALE_FRAME_CAP) -> gym.Env:
    """The single-env path's emulator wrappers (`gym_env.create_atari_environment`'s, without
    `FireOnReset`, whose two presses the C++ env does differently: vector_env's docstring, item 2)."""
    env = gym.make(
        "PongNoFrameskip-v4",
        frameskip=1,
        repeat_action_probability=0.0,
        full_action_space=False,
        max_num_frames_per_episode=frame_cap,
    )
    env = gym_env.FinalScreenAtariPreprocessing(
        env, noop_max=noop_max, frame_skip=4, screen_size=(84, 84), grayscale_obs=True, scale_obs=False
    )
    return FrameStackObservation(env, stack_size=4, padding_type="reset")


def test_vector_pong_observations_equal_the_single_env_for_the_same_actions():
    # No-op starts off on both sides (their counts come from different generators: docstring, item 1).
    vec = vector_env.AtariVectorEnvironment("Pong", 2, noop_max=0, fire_reset=False, num_threads=1)
    single = _single_pong()
    rng = np.random.default_rng(0)
    timesteps = vec.reset(seed=3)
    observation, _ = single.reset(seed=3)
    assert timesteps[0].first and timesteps[0].observation.shape == (4, 84, 84)
    np.testing.assert_array_equal(timesteps[0].observation, observation)
    differing_from_previous = 0
    for _ in range(120):
        actions = rng.integers(6, size=2)
        previous = timesteps[0].observation
        timesteps = vec.step(actions)
        observation, reward, terminated, truncated, _ = single.step(int(actions[0]))
        np.testing.assert_array_equal(timesteps[0].observation, observation)
        assert (timesteps[0].reward, timesteps[0].terminated, timesteps[0].truncated) == (
            reward,
            terminated,
            truncated,
        )
        differing_from_previous += not np.array_equal(previous[-1], observation[-1])
    assert differing_from_previous > 100  # the screens really move: equality is not trivial
    vec.close()
    single.close()


def test_vector_freeway_matches_create_atari_environment_whole_path():
    # Freeway needs no FIRE, so the zoo's own factory (statistics, stacking, ...) compares directly.
    vec = vector_env.AtariVectorEnvironment("Freeway", 1, noop_max=0, max_episode_steps=40)
    single = gym_env.create_atari_environment("Freeway", seed=5, noop_max=0, max_episode_steps=40)
    timestep = vec.reset(seed=5)[0]
    observation, _ = single.reset(seed=5)
    np.testing.assert_array_equal(timestep.observation, observation)
    rng = np.random.default_rng(1)
    for step in range(40):
        action = int(rng.integers(3))
        timestep = vec.step(np.array([action]))[0]
        observation, reward, terminated, truncated, info = single.step(action)
        np.testing.assert_array_equal(timestep.observation, observation)
        assert timestep.reward == reward and timestep.truncated == truncated == (step == 39)
    assert timestep.info["episode"]["l"] == info["episode"]["l"] == 40
    assert timestep.info["episode"]["r"] == info["episode"]["r"]
    vec.close()
    single.close()


def test_ale_cpp_frame_cap_still_misplaces_the_final_screen():
    """Why `AtariVectorEnvironment` switches the C++ cap off (docstring, item 4): with ale-py 0.12.1, a
    cap one frame into Pong's 76th step (4 * 75 + 1 = 301) returns the 75th step's frame again. Should
    an ale-py release fix it, this test fails and the workaround can go."""
    env = AtariVectorEnv(
        "pong",
        1,
        stack_num=1,
        noop_max=0,
        use_fire_reset=False,
        max_num_frames_per_episode=301,
        autoreset_mode=AutoresetMode.NEXT_STEP,
        num_threads=1,
    )
    env.reset(seed=1)
    frames = []
    for _ in range(76):
        frame, _, _, truncated, _ = env.step(np.zeros(1, np.int64))
        frames.append(frame[0, 0])
    assert truncated[0]
    np.testing.assert_array_equal(frames[-1], frames[-2])
    env.close()


def test_frame_cap_truncates_after_a_whole_step_with_the_true_final_screen():
    # Cap at 301 frames: the 76th step (frames 301-304) reaches it. Here it is played whole, so its
    # observation is the screen after 304 frames: the single env with a cap of 304 (= 76 * 4, a step
    # boundary) ends on the same screen, and it is not the 75th step's.
    vec = vector_env.AtariVectorEnvironment(
        "Pong", 1, noop_max=0, fire_reset=False, max_num_frames_per_episode=301, num_threads=1
    )
    single = _single_pong(frame_cap=304)
    vec.reset(seed=1)
    single.reset(seed=1)
    for step in range(76):
        previous = vec._stacks[0, -1].copy()
        timestep = vec.step(np.zeros(1, np.int64))[0]
        observation, _, _, truncated, _ = single.step(0)
        assert timestep.truncated == truncated == (step == 75)
    assert not timestep.terminated and timestep.info["episode"]["l"] == 76
    np.testing.assert_array_equal(timestep.observation, observation)  # the true final screen
    assert not np.array_equal(timestep.observation[-1], previous)
    following = vec.step(np.array([3]))[0]  # the action of a last timestep is ignored: a new game
    assert following.first and following.reward == 0.0
    assert (following.observation == following.observation[-1]).all()  # reset padding
    vec.close()
    single.close()


def test_time_limit_reports_whole_game_with_raw_score_then_restarts():
    vec = vector_env.AtariVectorEnvironment("Pong", 2, max_episode_steps=30, clip_reward=True, num_threads=1)
    timesteps = vec.reset(seed=2)
    rng = np.random.default_rng(0)
    lengths = [0, 0]
    for _round in range(45):
        timesteps = vec.step(rng.integers(6, size=2))
        for i, timestep in enumerate(timesteps):
            if timestep.first:
                lengths[i] = 0
                continue
            lengths[i] += 1
            assert timestep.reward in (-1.0, 0.0, 1.0)
            if lengths[i] == 30:
                assert timestep.truncated and not timestep.terminated
                assert timestep.info["episode"]["l"] == 30
            else:
                assert not timestep.last and "episode" not in timestep.info
    assert lengths == [14, 14]  # 45 rounds = 30 steps + the reset round + 14 steps of the next game
    vec.close()


def test_lost_life_is_terminal_for_learning_but_the_game_goes_on():
    vec = vector_env.AtariVectorEnvironment(
        "Breakout", 1, terminal_on_life_loss=True, clip_reward=False, num_threads=1
    )
    timestep = vec.reset(seed=1)[0]
    lives = timestep.info["lives"]
    assert lives == 5
    rng = np.random.default_rng(0)
    for _ in range(2000):
        timestep = vec.step(rng.integers(4, size=1))[0]
        if timestep.last:
            break
    assert timestep.terminated and timestep.info["life_loss"] and "episode" not in timestep.info
    assert timestep.info["lives"] == lives - 1
    new_life = vec.step(np.array([1]))[0]
    assert new_life.first and new_life.info["lives"] == lives - 1
    assert (new_life.observation == new_life.observation[-1]).all()  # the stack restarts
    vec.close()


def test_serial_vector_env_resets_an_env_the_round_after_its_last_timestep():
    envs = [gym_env.create_classic_environment("CartPole-v1", seed=s, max_episode_steps=5) for s in (7, 8)]
    vec = vector_env.SerialVectorEnvironment(envs)
    timesteps = vec.reset(seed=7)
    single = gym_env.create_classic_environment("CartPole-v1", seed=8, max_episode_steps=5)
    observation, _ = single.reset(seed=8)
    np.testing.assert_array_equal(timesteps[1].observation, observation)  # env i is seeded seed + i
    kinds = []
    for _ in range(7):
        timesteps = vec.step(np.array([0, 1]))
        kinds.append((timesteps[0].first, timesteps[0].truncated))
    assert kinds == [(False, False)] * 4 + [(False, True), (True, False), (False, False)]
    vec.close()


def test_bad_num_envs_and_non_atari_names_are_config_errors():
    with pytest.raises(errors.ConfigError, match="num_envs"):
        vector_env.AtariVectorEnvironment("Pong", 0)
    with pytest.raises(errors.ConfigError, match="not an Atari game"):
        vector_env.AtariVectorEnvironment("CartPole-v1", 2)


class _ScriptedAle:
    """A stand-in for ale-py's `AtariVectorEnv` (NEXT_STEP autoreset, partial resets clear a pending
    autoreset, as measured on ale-py 0.12.1) whose games are scripted, so that rare endings happen on
    the step a test chooses. Env i's every game plays `scripts[i]`: one (raw reward, lives after the
    step, game over) per step, 4 frames each. Its frame is filled with the number of steps its game has
    played, so an observation says which step it shows (0: a reset)."""

    def __init__(self, scripts: list[list[tuple[float, int, bool]]], lives: int = 3):
        self._scripts, self._start_lives = scripts, lives
        self.single_action_space = gym.spaces.Discrete(6)
        n = len(scripts)
        self._played = np.zeros(n, np.int64)  # steps of the current game
        self._lives = np.full(n, lives, np.int64)
        self._pending = np.zeros(n, bool)  # game over on the last step: the next step resets instead
        self.actions: list[list[int]] = []  # what every step call received
        self.resets: list[list[int]] = []  # which envs every reset call restarted

    def _frames_and_info(self) -> tuple[np.ndarray, dict]:
        frames = np.zeros((len(self._scripts), 1, 84, 84), np.uint8)
        frames[:] = self._played[:, None, None, None]
        info = {"lives": self._lives.copy(), "episode_frame_number": 4 * self._played}
        return frames, info

    def _restart(self, i: int) -> None:
        self._played[i], self._lives[i], self._pending[i] = 0, self._start_lives, False

    def reset(self, seed=None, options=None):
        mask = np.ones(len(self._scripts), bool) if options is None else options["reset_mask"]
        self.resets.append(np.flatnonzero(mask).tolist())
        for i in np.flatnonzero(mask):
            self._restart(i)
        return self._frames_and_info()

    def step(self, actions: np.ndarray):
        self.actions.append(np.asarray(actions).tolist())
        n = len(self._scripts)
        rewards, terminated = np.zeros(n, np.float32), np.zeros(n, bool)
        for i in range(n):
            if self._pending[i]:
                self._restart(i)
                continue
            rewards[i], self._lives[i], terminated[i] = self._scripts[i][self._played[i]]
            self._played[i] += 1
            self._pending[i] = terminated[i]
        return (
            *self._frames_and_info()[:1],
            rewards,
            terminated,
            np.zeros(n, bool),
            self._frames_and_info()[1],
        )

    def close(self) -> None:
        pass


def _scripted(monkeypatch, scripts, **kwargs) -> vector_env.AtariVectorEnvironment:
    """`AtariVectorEnvironment`'s Python side over scripted games (`_ScriptedAle`)."""
    monkeypatch.setattr(vector_env, "AtariVectorEnv", lambda *args, **kwargs: _ScriptedAle(scripts))
    return vector_env.AtariVectorEnvironment("Pong", len(scripts), fire_reset=False, **kwargs)


class _FixedActions:
    """An agent of `main_loop.run_vector_env_loop` that always presses action 3."""

    def step_batch(self, timesteps):
        return np.full(len(timesteps), 3)


# Env 0's game: +1, then a life lost (0), then the game ends during the unseen NOOP step (+5).
# Env 1 plays along without ending (one +2 per step).
_GAME_OVER_ON_THE_NOOP = [[(1.0, 3, False), (0.0, 2, False), (5.0, 2, True)], [(2.0, 3, False)] * 50]


def test_game_over_on_the_noop_after_a_lost_life_is_one_whole_game_with_its_raw_score(monkeypatch):
    vec = _scripted(monkeypatch, _GAME_OVER_ON_THE_NOOP, terminal_on_life_loss=True, clip_reward=True)
    timesteps = vec.reset(seed=0)
    rounds = [vec.step(np.array([3, 3])) for _ in range(4)]
    env0 = [round_[0] for round_ in rounds]
    assert env0[0].reward == 1.0 and not env0[0].last
    assert env0[1].terminated and env0[1].info["life_loss"] and "episode" not in env0[1].info
    # Round 3: the NOOP (action 0) ends the game; env 0 is reset in the same round and its first
    # timestep reports the game: raw score 1 + 0 + 5 = 6 over 2 agent decisions (the NOOP is none).
    assert vec._env.actions[2] == [0, 3] and vec._env.resets == [[0, 1], [0]]
    assert env0[2].first and not env0[2].last and env0[2].info["lives"] == 3
    assert (env0[2].observation == 0).all()  # a reset screen
    assert env0[2].info["episode"]["r"] == 6.0 and env0[2].info["episode"]["l"] == 2
    assert env0[3].reward == 1.0 and not env0[3].first and (env0[3].observation[-1] == 1).all()
    assert "episode" not in env0[3].info  # reported once
    assert all(not round_[1].first for round_ in rounds) and timesteps[1].first
    vec.close()


def test_game_over_on_the_noop_is_counted_by_the_training_statistics(monkeypatch):
    # Env steps: env 0 takes 2 then 1, env 1 takes 3 = 6 (the reset of env 0 is no env step).
    vec = _scripted(monkeypatch, _GAME_OVER_ON_THE_NOOP, terminal_on_life_loss=True, clip_reward=True)
    stats = trackers.PhaseStats()
    games = []
    loop = main_loop.run_vector_env_loop(vec, _FixedActions(), seed=0)
    main_loop.run_env_steps(6, loop, stats, on_step=lambda timestep, game: games.append(game))
    assert stats.num_steps == 6 and stats.episode_returns == [6.0] and stats.episode_lengths == [2]
    assert [game for game in games if game] == [{"episode_return": 6.0, "episode_length": 2}]
    vec.close()


class _RecordingLink(interface.ActorLinkBase):
    """An actor's link that keeps the messages it sends (no learner behind it)."""

    def __init__(self):
        super().__init__(actor_index=0)
        self.sent: list[interface.ActorMessage] = []

    def should_stop(self) -> bool:
        return False

    def _transmit(self, message: interface.ActorMessage) -> None:
        self.sent.append(message)

    def _published_version(self) -> int:
        return 0

    def _copy_parameters(self, module) -> int:
        return 0

    def _wait_for_version_above(self, version: int) -> None:
        pass


def test_game_over_on_the_noop_reaches_the_learner_in_the_actors_message(monkeypatch):
    vec = _scripted(monkeypatch, _GAME_OVER_ON_THE_NOOP, terminal_on_life_loss=True)
    link = _RecordingLink()
    counted = interface._StepCounter(_FixedActions(), link)
    loop = main_loop.run_vector_env_loop(vec, counted, seed=0)
    for _ in range(4 * 2):  # the reset round and 3 rounds of 2 envs
        next(loop)
    link.send(None)
    message = link.sent[-1]
    assert message.num_env_steps == 2 + 3  # env 0: 2 steps then its reset (no step); env 1: 3 steps
    assert message.episodes == [{"episode_return": 6.0, "episode_length": 2}]
    vec.close()


def _play(vec: vector_env.AtariVectorEnvironment, num_rounds: int) -> list[TimeStep]:
    """Env 0's timesteps over `num_rounds` rounds after the reset (action 3 everywhere)."""
    vec.reset(seed=0)
    return [vec.step(np.full(vec.num_envs, 3))[0] for _ in range(num_rounds)]


def _games(timesteps: list[TimeStep]) -> list[tuple[float, int]]:
    return [(t.info["episode"]["r"], t.info["episode"]["l"]) for t in timesteps if "episode" in t.info]


def test_the_noop_after_a_lost_life_scores_in_the_game_but_is_no_agent_step(monkeypatch):
    # +1, life lost (+2), the NOOP (+5, the game goes on), +1, game over (+4, last life lost with it).
    script = [(1.0, 3, False), (2.0, 2, False), (5.0, 2, False), (1.0, 2, False), (4.0, 1, True)]
    vec = _scripted(monkeypatch, [script], terminal_on_life_loss=True, clip_reward=True)
    timesteps = _play(vec, 5)
    assert [(t.first, t.reward, t.terminated) for t in timesteps] == [
        (False, 1.0, False),
        (False, 1.0, True),  # the life loss, clipped 2 -> 1
        (True, 0.0, False),  # the new life, one NOOP later (its +5 is not seen by the agent)
        (False, 1.0, False),
        (False, 1.0, True),  # game over: not a life loss, reported once
    ]
    assert "life_loss" not in timesteps[-1].info
    assert _games(timesteps) == [(1 + 2 + 5 + 1 + 4, 4)]  # raw score 13 over 4 agent decisions
    assert [actions[0] for actions in vec._env.actions] == [3, 3, 0, 3, 3]
    vec.close()


def test_a_life_lost_on_the_time_limits_step_ends_the_game_once(monkeypatch):
    # The 2nd step loses a life and reaches max_episode_steps=2: terminal for learning and truncated,
    # the game reported once; the next round plays NOOP and resets it (a new game, not a new life),
    # even though that NOOP ends the game in the emulator: no second report.
    script = [(1.0, 3, False), (2.0, 2, False), (9.0, 2, True)]
    vec = _scripted(monkeypatch, [script], terminal_on_life_loss=True, max_episode_steps=2)
    timesteps = _play(vec, 4)
    assert timesteps[1].terminated and timesteps[1].truncated and timesteps[1].info["life_loss"]
    assert timesteps[2].first and timesteps[2].info["lives"] == 3 and vec._env.resets == [[0], [0]]
    assert vec._env.actions[2] == [0]
    assert _games(timesteps) == [(3.0, 2)]
    vec.close()


def test_a_game_that_ends_on_the_noop_after_a_truncation_restarts_once(monkeypatch):
    # The time limit cuts the game at step 2; the NOOP the next round steps it with ends the game in
    # the emulator. The game was already reported; the reset this class makes replaces the C++ env's
    # own (a partial reset clears a pending autoreset), so the new game starts once and plays on.
    script = [(1.0, 3, False), (1.0, 3, False), (7.0, 3, True)]
    vec = _scripted(monkeypatch, [script], max_episode_steps=2)
    timesteps = _play(vec, 4)
    assert [t.first for t in timesteps] == [False, False, True, False]
    assert _games(timesteps) == [(2.0, 2)]  # the NOOP's +7 is after the cut: not in the game
    assert (timesteps[3].observation[-1] == 1).all()  # the new game's 1st step, not another reset
    vec.close()


def test_a_frame_cap_reached_on_the_noop_truncates_the_next_agent_step(monkeypatch):
    # 4 frames a step; the cap of 12 frames falls on the NOOP (frames 9-12) after the lost life: the
    # NOOP is no agent step, so the new life's first step (frames 13-16) is cut and bootstraps.
    script = [(1.0, 3, False), (0.0, 2, False), (1.0, 2, False), (1.0, 2, False), (1.0, 2, False)]
    vec = _scripted(monkeypatch, [script], terminal_on_life_loss=True, max_num_frames_per_episode=12)
    timesteps = _play(vec, 4)
    assert [(t.first, t.terminated, t.truncated) for t in timesteps] == [
        (False, False, False),
        (False, True, False),
        (True, False, False),
        (False, False, True),
    ]
    assert _games(timesteps) == [(1 + 0 + 1 + 1, 3)]
    vec.close()


class _FixedActionsAgent(_FixedActions):
    """`_FixedActions` with what the training loop reads of an agent."""

    statistics: dict = {}

    def state_dict(self) -> dict:
        return {}


def test_game_over_on_the_noop_is_a_training_game_but_no_training_env_step(monkeypatch, tmp_path):
    # The training loop as `--num_envs` runs it: 3 rounds of 2 envs are 6 env steps (env 0's reset is
    # none), and the game ended on the NOOP is the iteration's one whole game, logged at env step 4
    # (rounds 1-2 are 4 env steps; in round 3, env 0's report comes before env 1's step).
    vec = _scripted(monkeypatch, _GAME_OVER_ON_THE_NOOP, terminal_on_life_loss=True)
    logger = trackers.RunLogger(str(tmp_path / "run"), False, str(tmp_path / "results.csv"))
    logged = []
    monkeypatch.setattr(logger, "scalars", lambda prefix, values, step: logged.append((prefix, step)))
    state = main_loop.run_single_thread_training_iterations(
        num_iterations=1,
        num_train_steps=6,
        num_eval_steps=0,
        train_agent=_FixedActionsAgent(),
        train_env=vec,
        eval_agent=_FixedActionsAgent(),
        eval_env=None,
        seed=0,
        logger=logger,
        save_checkpoint=lambda iteration, state: "",
        loop_state=main_loop.LoopState(),
        show_progress=False,
    )
    assert state.train_env_steps == 6
    assert [entry for entry in logged if entry[0] == "train"] == [("train", 4), ("train", 6)]  # + summary
    with open(tmp_path / "results.csv") as f:
        row = list(csv.DictReader(f))[0]
    assert (row["train_num_episodes"], row["train_mean_episode_return"]) == ("1", "6.0")
