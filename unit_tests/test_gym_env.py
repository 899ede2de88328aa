"""Tests for deep_rl_zoo.gym_env: name resolution, wrapper order and the life-loss contract."""

import os

import cv2
import gymnasium as gym
import numpy as np
import pytest

from deep_rl_zoo import errors, gym_env

# ---------------------------------------------------------------------------------------------------
# Name resolution (no environment is created).


@pytest.mark.parametrize(
    "name, expected",
    [
        ("Pong", "PongNoFrameskip-v4"),
        ("breakout", "BreakoutNoFrameskip-v4"),  # short names are case-insensitive
        ("SpaceInvaders", "SpaceInvadersNoFrameskip-v4"),
        ("ALE/Breakout-v5", "ALE/Breakout-v5"),  # full ids pass through
        ("PongNoFrameskip-v4", "PongNoFrameskip-v4"),
        ("CartPole-v1", "CartPole-v1"),
    ],
)
def test_resolve_environment_name_returns_registered_id(name, expected):
    assert gym_env.resolve_environment_name(name) == expected
    assert expected in gym.registry


def test_lunar_lander_v2_means_v3_with_one_line_note(capsys):
    assert gym_env.resolve_environment_name("LunarLander-v2") == "LunarLander-v3"
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "LunarLander-v2" in err and "LunarLander-v3" in err

    assert gym_env.resolve_environment_name("LunarLanderContinuous-v2") == "LunarLanderContinuous-v3"
    assert gym_env.resolve_environment_name("LunarLander-v3") == "LunarLander-v3"
    assert capsys.readouterr().err.count("\n") == 1  # only the v2 name printed a note


@pytest.mark.parametrize(
    "typo, suggestion",
    [("CartPol-v1", "CartPole-v1"), ("Pongg", "Pong"), ("lunarlander-v3", "LunarLander-v3")],
)
def test_unknown_name_raises_config_error_with_suggestion(typo, suggestion):
    with pytest.raises(errors.ConfigError) as excinfo:
        gym_env.resolve_environment_name(typo)
    message = str(excinfo.value)
    assert suggestion in message
    assert "\n" not in message  # shown to the user as one line


def test_is_atari():
    assert gym_env.is_atari("Pong")
    assert gym_env.is_atari("ALE/Breakout-v5")
    assert not gym_env.is_atari("CartPole-v1")
    assert not gym_env.is_atari("LunarLander-v2")


# ---------------------------------------------------------------------------------------------------
# Classic environments.


def test_classic_environment_shapes_and_dtypes():
    env = gym_env.create_classic_environment("CartPole-v1", seed=1)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (4,) and obs.dtype == np.float32
    assert env.action_space == gym.spaces.Discrete(2)
    obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
    assert obs.shape == (4,) and isinstance(reward, float)
    assert isinstance(terminated, bool) and isinstance(truncated, bool)


def test_classic_environment_same_seed_same_trajectory():
    def first_observations(seed):
        env = gym_env.create_classic_environment("CartPole-v1", seed=seed)
        obs, _ = env.reset(seed=seed)
        observations = [obs]
        for _ in range(5):
            observations.append(env.step(env.action_space.sample())[0])
        return np.stack(observations)

    np.testing.assert_array_equal(first_observations(3), first_observations(3))
    assert not np.array_equal(first_observations(3), first_observations(4))


def test_classic_time_limit_truncates_and_reports_episode():
    env = gym_env.create_classic_environment("CartPole-v1", seed=0, max_episode_steps=5)
    env.reset(seed=0)
    for t in range(1, 6):
        # Alternating pushes keep the pole up for 5 steps, so only the time limit can end the episode.
        _, _, terminated, truncated, info = env.step(t % 2)
        assert not terminated
        assert truncated == (t == 5)
        assert ("episode" in info) == (t == 5)
    assert info["episode"]["l"] == 5
    assert info["episode"]["r"] == 5.0  # CartPole: +1 per step


def test_classic_factory_rejects_atari_name():
    with pytest.raises(errors.ConfigError, match="Atari"):
        gym_env.create_classic_environment("Pong", seed=0)


def test_action_space_checks():
    pendulum = gym_env.create_classic_environment("Pendulum-v1", seed=0)
    with pytest.raises(errors.ConfigError, match=r"DQN needs a discrete action space; Pendulum-v1 has Box"):
        gym_env.check_discrete_action_space(pendulum, "DQN")
    gym_env.check_continuous_action_space(pendulum, "SAC")  # no error

    cartpole = gym_env.create_classic_environment("CartPole-v1", seed=0)
    gym_env.check_discrete_action_space(cartpole, "DQN")  # no error
    with pytest.raises(errors.ConfigError, match=r"SAC needs a continuous .* CartPole-v1 has Discrete"):
        gym_env.check_continuous_action_space(cartpole, "SAC")


# ---------------------------------------------------------------------------------------------------
# Atari environments.


def _wrapper_names(env: gym.Env) -> list[str]:
    """Wrapper class names, outermost first."""
    names = []
    while isinstance(env, gym.Wrapper):
        names.append(type(env).__name__)
        env = env.env
    return names


def test_atari_wrapper_order():
    env = gym_env.create_atari_environment(
        "Breakout", seed=0, max_episode_steps=100, terminal_on_life_loss=True, clip_reward=True
    )
    names = _wrapper_names(env)
    # Statistics inside life loss and clipping (raw whole-game returns), outside the time limit.
    expected = [
        "FrameStackObservation",
        "TransformReward",
        "EpisodicLifeEnv",
        "RecordEpisodeStatistics",
        "TimeLimit",
        "FireOnReset",
        "FinalScreenAtariPreprocessing",
    ]
    assert names[: len(expected)] == expected

    # Pong has FIRE as action 1 too; a plain Atari env has no optional wrapper.
    names = _wrapper_names(gym_env.create_atari_environment("Pong", seed=0))
    assert names[:4] == [
        "FrameStackObservation",
        "RecordEpisodeStatistics",
        "FireOnReset",
        "FinalScreenAtariPreprocessing",
    ]


@pytest.mark.parametrize("frames_into_last_step", [1, 2, 3])
def test_frame_cap_mid_skip_gives_the_final_screen(frames_into_last_step):
    # ALE's frame cap counts emulator frames; when it falls inside a 4-frame skip, gymnasium's
    # AtariPreprocessing returned the previous step's screen, and the truncation bootstrapped from it.
    env = gym_env.create_atari_environment("Pong", seed=0, noop_max=0)
    ale = env.unwrapped.ale
    ale.setInt("max_num_frames_per_episode", 10_000)  # taken up when reset(seed=...) reloads the ROM
    env.reset(seed=0)
    frames_at_reset = ale.getEpisodeFrameNumber()  # FireOnReset's two presses: 2 x 4 frames
    ale.setInt("max_num_frames_per_episode", frames_at_reset + 4 * 50 + frames_into_last_step)
    env.reset(seed=0)
    assert ale.getEpisodeFrameNumber() == frames_at_reset
    for step in range(51):
        observation, _, terminated, truncated, _ = env.step(2)
        if step < 50:
            assert not (terminated or truncated)
    assert truncated and not terminated
    assert ale.getEpisodeFrameNumber() == frames_at_reset + 200 + frames_into_last_step
    final_screen = cv2.resize(ale.getScreenGrayscale(), (84, 84), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(observation[-1], final_screen)
    assert not np.array_equal(observation[-1], observation[-2])  # not the previous step's screen


def test_frame_cap_at_the_end_of_a_skip_max_pools_the_last_two_frames():
    env = gym_env.create_atari_environment("Pong", seed=0, noop_max=0)
    ale = env.unwrapped.ale
    ale.setInt("max_num_frames_per_episode", 10_000)
    env.reset(seed=0)
    ale.setInt("max_num_frames_per_episode", ale.getEpisodeFrameNumber() + 4 * 51)
    env.reset(seed=0)
    for _ in range(50):
        env.step(2)
    # Play the 51st step's 4 frames by hand to read frames 3 and 4, then rewind and let the env play it.
    state = ale.cloneState()
    for _ in range(3):
        ale.act(env.unwrapped._action_set[2])
    frame_3 = ale.getScreenGrayscale()
    ale.act(env.unwrapped._action_set[2])
    frame_4 = ale.getScreenGrayscale()
    ale.restoreState(state)
    observation, _, terminated, truncated, _ = env.step(2)
    assert truncated and not terminated
    pooled = cv2.resize(np.maximum(frame_3, frame_4), (84, 84), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(observation[-1], pooled)


def test_atari_observation_is_stack_of_uint8_frames():
    env = gym_env.create_atari_environment("Pong", seed=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    assert env.observation_space.shape == (4, 84, 84)
    obs, *_ = env.step(0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8


def test_atari_custom_frame_size_is_height_then_width():
    env = gym_env.create_atari_environment("Pong", seed=0, frame_height=64, frame_width=48, frame_stack=2)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, 64, 48)


def test_atari_v5_id_gets_frameskip_1_and_user_sticky_probability():
    # ALE/...-v5 registers frameskip=4 and sticky actions 0.25; frame skipping must happen once only.
    env = gym_env.create_atari_environment("ALE/Pong-v5", seed=0, sticky_action_probability=0.0)
    assert env.unwrapped._frameskip == 1
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    env = gym_env.create_atari_environment("ALE/Pong-v5", seed=0, sticky_action_probability=0.25)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)


def test_atari_same_seed_same_observations():
    def observations(seed):
        env = gym_env.create_atari_environment("Breakout", seed=seed)
        obs, _ = env.reset(seed=seed)
        stacked = [obs]
        for _ in range(20):
            stacked.append(env.step(env.action_space.sample())[0])
        return np.stack(stacked)

    np.testing.assert_array_equal(observations(5), observations(5))


def test_atari_time_limit_truncates_not_terminates():
    env = gym_env.create_atari_environment("Pong", seed=0, max_episode_steps=50, clip_reward=True)
    env.reset(seed=0)
    for t in range(1, 51):
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        assert not terminated
        assert truncated == (t == 50)
        assert ("episode" in info) == (t == 50)
    assert info["episode"]["l"] == 50  # in agent steps, not emulator frames


def test_clipped_rewards_but_raw_episode_return():
    # Space Invaders scores 5 to 30 points per alien: clipping changes the sum.
    env = gym_env.create_atari_environment("SpaceInvaders", seed=0, clip_reward=True, max_episode_steps=300)
    env.reset(seed=0)
    clipped_sum = 0.0
    terminated = truncated = False
    while not (terminated or truncated):
        _, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert reward in (-1.0, 0.0, 1.0)
        clipped_sum += reward
        assert ("episode" in info) == (terminated or truncated)
    assert clipped_sum > 0
    assert info["episode"]["r"] >= 5 * clipped_sum  # every alien is worth at least 5 points


def test_episodic_life_continues_the_same_game_until_game_over():
    env = gym_env.create_atari_environment("Breakout", seed=0, terminal_on_life_loss=True)
    _, info = env.reset(seed=0)
    lives = [info["lives"]]  # Breakout starts with 5
    total_steps = 0
    while True:
        terminated = truncated = False
        while not (terminated or truncated):
            obs, _, terminated, truncated, info = env.step(env.action_space.sample())
            total_steps += 1
        assert terminated and not truncated
        if not info.get("life_loss", False):
            break  # the real game over
        assert "episode" not in info  # a lost life is not the end of the game
        last_frame = obs[-1]
        obs, info = env.reset()
        lives.append(info["lives"])
        # The next life starts where the last one ended: the same game, not a new one.
        np.testing.assert_array_equal(obs[0], last_frame)

    assert lives == [5, 4, 3, 2, 1]
    assert "life_loss" not in info
    assert info["episode"]["l"] == total_steps  # all lives together, in agent steps


def test_episodic_life_reset_mid_life_restarts_the_game():
    env = gym_env.create_atari_environment("Breakout", seed=0, terminal_on_life_loss=True)
    env.reset(seed=0)
    for _ in range(5):
        env.step(env.action_space.sample())
    _, info = env.reset()
    assert info["lives"] == 5


@pytest.mark.slow
def test_video_of_first_game_is_written(tmp_path):
    video_dir = tmp_path / "videos"  # RecordVideo creates it (and warns if it already exists)
    env = gym_env.create_atari_environment("Pong", seed=0, max_episode_steps=10, video_dir=str(video_dir))
    env.reset(seed=0)
    for _ in range(10):
        env.step(0)
    env.close()  # writes the video of the unfinished recording
    videos = [name for name in os.listdir(video_dir) if name.endswith(".mp4")]
    assert videos == ["PongNoFrameskip-v4-episode-0.mp4"]


def test_bad_atari_arguments_raise_config_error():
    with pytest.raises(errors.ConfigError, match="not an Atari game"):
        gym_env.create_atari_environment("CartPole-v1", seed=0)
    with pytest.raises(errors.ConfigError, match="frame_stack"):
        gym_env.create_atari_environment("Pong", seed=0, frame_stack=0)
    with pytest.raises(errors.ConfigError, match="rgb_array"):
        gym_env.create_atari_environment("Pong", seed=0, render_mode="human", video_dir="/tmp/unused")


def test_a_missing_mujoco_names_this_projects_extra(monkeypatch):
    def make_without_mujoco(*args, **kwargs):
        raise gym.error.DependencyNotInstalled(
            'MuJoCo is not installed, run `pip install "gymnasium[mujoco]"`'
        )

    monkeypatch.setattr(gym_env.gym, "make", make_without_mujoco)
    with pytest.raises(
        errors.ConfigError, match=r"cannot create HalfCheetah-v5: .*pip install -e '\.\[mujoco\]'"
    ):
        gym_env.create_classic_environment("HalfCheetah-v5", seed=1)


# ---------------------------------------------------------------------------------------------------
# Rooms visited (Montezuma's Revenge): read from the emulator's RAM.


class _RamScript(gym.Env):
    """An ALE stand-in: the RAM's (level, room) bytes follow a script, one entry per reset or step, and
    the step `game_over_at` reports a whole game as `RecordEpisodeStatistics` would."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(1)

    def __init__(self, script, game_over_at):
        self._script, self._game_over_at, self._t = list(script), game_over_at, 0
        room_address, level_address = gym_env.ROOM_RAM_ADDRESSES["montezuma_revenge"]
        ram = np.zeros(128, np.uint8)

        class Ale:
            @staticmethod
            def getRAM():
                ram[level_address], ram[room_address] = self._script.pop(0)
                return ram

        self.ale = Ale()

    def reset(self, *, seed=None, options=None):
        self._t = 0
        return 0, {}

    def step(self, action):
        self._t += 1
        over = self._t == self._game_over_at
        return 0, 0.0, over, False, ({"episode": {"r": 0.0, "l": self._t}} if over else {})


def test_rooms_visited_counts_the_distinct_level_and_room_pairs_of_a_whole_game():
    # Reset in room 1; then rooms 1, 0, 1 again, and room 0 of the next level: 3 rooms. A new game
    # counts afresh: its reset's room and one more.
    script = [(0, 1), (0, 1), (0, 0), (0, 1), (1, 0)] + [(1, 0), (1, 5)]
    env = gym_env.RoomsVisited(
        _RamScript(script, game_over_at=4), gym_env.ROOM_RAM_ADDRESSES["montezuma_revenge"]
    )
    env.reset()
    infos = [env.step(0)[4] for _ in range(4)]
    assert [info.get("episode", {}).get("rooms") for info in infos] == [None, None, None, 3]
    env.reset()
    env.unwrapped._game_over_at = 1
    assert env.step(0)[4]["episode"] == {"r": 0.0, "l": 1, "rooms": 2}


def test_montezuma_reports_the_rooms_of_each_game_and_pong_reports_none():
    env = gym_env.create_atari_environment(
        "MontezumaRevenge", seed=0, max_episode_steps=30, terminal_on_life_loss=True
    )
    names = _wrapper_names(env)  # directly around the statistics, inside the life loss: whole games
    assert names[names.index("RoomsVisited") - 1 : names.index("RoomsVisited") + 2] == [
        "EpisodicLifeEnv",
        "RoomsVisited",
        "RecordEpisodeStatistics",
    ]
    env.reset(seed=0)
    ale = env.unwrapped.ale
    room_address, _ = gym_env.ROOM_RAM_ADDRESSES["montezuma_revenge"]
    assert ale.getRAM()[room_address] == 1  # the game starts in room 1
    games = []
    for step in range(60):
        if step == 10:
            ale.setRAM(room_address, 0)  # the player is moved to room 0 (the screen follows)
        _, _, terminated, truncated, info = env.step(0)
        if "episode" in info:
            games.append(info["episode"]["rooms"])
        if terminated or truncated:
            env.reset()
    # The first game saw rooms 1 and 0; the second is a new game, back in room 1, and stays there.
    assert games == [2, 1]
    assert gym_env.counts_rooms("MontezumaRevenge") and not gym_env.counts_rooms("Pong")
    assert not gym_env.counts_rooms("CartPole-v1")
    pong = gym_env.create_atari_environment("Pong", seed=0, max_episode_steps=5)
    pong.reset(seed=0)
    info = [pong.step(0)[4] for _ in range(5)][-1]
    assert "rooms" not in info["episode"]
