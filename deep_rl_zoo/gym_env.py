"""Environment factories: name resolution, classic-control/Box2D envs and Nature-DQN Atari preprocessing.

Every environment returned here carries `gymnasium.wrappers.RecordEpisodeStatistics`, placed so that
`info["episode"] = {"r": raw game return, "l": env steps, "t": seconds}` appears exactly on the step
where a *whole game* ends (a real game over or a time-limit truncation), never on a lost life.
Trackers read episode statistics only from there.

Atari wrapper order, innermost (emulator) first:

    gym.make(id, frameskip=1, repeat_action_probability=sticky, full_action_space=False)
      |  raw ALE emulator: 210x160 RGB, one emulator frame per step
      |-- RecordVideo            (optional) full-resolution frames of the first game
    FinalScreenAtariPreprocessing  gymnasium's AtariPreprocessing (no-op starts, frame skip, max-pool
      |                          of the last two frames, grayscale, resize to HxW), with the true
      |                          last screen of a game; from here on one step = one agent decision
    FireOnReset                  (games whose action 1 is FIRE) press FIRE then action 2 after reset
    TimeLimit                    (optional) truncation after max_episode_steps agent steps
    RecordEpisodeStatistics      sees raw rewards and whole games  -> info["episode"]
    RoomsVisited                 (games with rooms in RAM) adds the game's rooms to info["episode"]
    EpisodicLifeEnv              (optional) a lost life -> terminated=True, for learning only
    TransformReward(sign)        (optional) rewards clipped to {-1, 0, +1}, for learning only
    FrameStackObservation        uint8 [frame_stack, H, W]

Why this order:
  * RecordEpisodeStatistics sits *inside* EpisodicLifeEnv and reward clipping, so the return it
    reports is the unclipped score of the whole game: the number papers report.
  * TimeLimit sits inside RecordEpisodeStatistics so a truncated game is still reported, and
    inside EpisodicLifeEnv so truncation always ends the real game (the next reset restarts it).
  * FireOnReset presses inside reset(), below the time limit and the statistics: the presses are
    not agent decisions, so they count neither as env steps nor towards the return.
  * Frame stacking is outermost so a stack never mixes frames from before and after a reset. After a
    life loss, the stack restarts from the observation at the life loss, as for a new episode.

Seeding: the factories seed `env.action_space`; the caller must pass the same seed to the *first*
`env.reset(seed=seed)` (which seeds the emulator, sticky actions and the no-op count), and call
`env.reset()` without a seed afterwards.
"""

import difflib
import importlib
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any, SupportsFloat

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.wrappers import (
    AtariPreprocessing,
    FrameStackObservation,
    GrayscaleObservation,
    RecordEpisodeStatistics,
    RecordVideo,
    ReshapeObservation,
    ResizeObservation,
    TimeLimit,
    TransformReward,
)

from deep_rl_zoo import errors

gym.register_envs(ale_py)
# The emulator prints its banner ("A.L.E: Arcade Learning Environment ...") on every ALE it creates: once
# per actor, into the progress bar. Warnings and errors still show.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)

_ATARI_ENTRY_POINT = "ale_py.env:AtariEnv"
_SHORT_ATARI_SUFFIX = "NoFrameskip-v4"

# Ids that gymnasium dropped, mapped to the bug-fixed version that replaced them.
_RENAMED_ENVIRONMENTS = {
    "LunarLander-v2": "LunarLander-v3",
    "LunarLanderContinuous-v2": "LunarLanderContinuous-v3",
    "BipedalWalker-v2": "BipedalWalker-v3",
    "BipedalWalkerHardcore-v2": "BipedalWalkerHardcore-v3",
    "CarRacing-v2": "CarRacing-v3",
}


def _short_atari_names() -> dict[str, str]:
    """Maps lower-cased short Atari names (`pong`) to their canonical id (`PongNoFrameskip-v4`)."""
    names = {}
    for env_id, spec in gym.registry.items():
        if spec.entry_point == _ATARI_ENTRY_POINT and env_id.endswith(_SHORT_ATARI_SUFFIX):
            short = env_id[: -len(_SHORT_ATARI_SUFFIX)]
            if "-ram" not in short:
                names[short.lower()] = env_id
    return names


def _resolve(name: str, note_renames: bool) -> str:
    """`resolve_environment_name`, with the rename note optional (helpers resolve silently)."""
    if name in gym.registry:
        return name
    module, _, environment_id = name.rpartition(":")
    if module:
        return _resolve_from_module(name, module, environment_id)
    if name in _RENAMED_ENVIRONMENTS and _RENAMED_ENVIRONMENTS[name] in gym.registry:
        new_name = _RENAMED_ENVIRONMENTS[name]
        if note_renames:
            print(
                f"note: gymnasium no longer has {name}; using {new_name}, its bug-fixed replacement",
                file=sys.stderr,
            )
        return new_name
    short_names = _short_atari_names()
    if name.lower() in short_names:
        return short_names[name.lower()]

    # Unknown: suggest close names, comparing case-insensitively ("cartpole-v1" ~ "CartPole-v1").
    # Namespaced ids other than ALE/ (phys2d/, tabular/: jax functional envs) would only add noise.
    candidates = {
        env_id.lower(): env_id for env_id, spec in gym.registry.items() if spec.namespace in (None, "ALE")
    }
    candidates.update({short: env_id[: -len(_SHORT_ATARI_SUFFIX)] for short, env_id in short_names.items()})
    close = difflib.get_close_matches(name.lower(), list(candidates), n=3, cutoff=0.6)
    suggestion = f"; did you mean {', '.join(candidates[c] for c in close)}?" if close else ""
    raise errors.ConfigError(
        f"unknown environment {name!r}{suggestion} "
        "(Atari games can be given by short name, e.g. 'Pong', or full id, e.g. 'ALE/Pong-v5')"
    )


def _resolve_from_module(name: str, module: str, environment_id: str) -> str:
    """`module:id` (gymnasium's own form): imports `module`, whose import registers `id`, and returns
    `id`. Every process that resolves the name imports the module, so actor processes find the env too."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise errors.ConfigError(
            f"unknown environment {name!r}: cannot import its module {module!r} ({e}); is it installed, "
            "or on PYTHONPATH?"
        ) from None
    if environment_id in gym.registry:
        return environment_id
    registered = [env_id for env_id, spec in gym.registry.items() if _entry_point_module(spec) == module]
    close = difflib.get_close_matches(environment_id, registered, n=3, cutoff=0.6) or registered[:3]
    suggestion = f"; did you mean {', '.join(f'{module}:{c}' for c in close)}?" if close else ""
    raise errors.ConfigError(
        f"unknown environment {name!r}: importing {module} registered no environment {environment_id!r}"
        f"{suggestion} (it must call gymnasium.register(id={environment_id!r}, ...) when imported)"
    )


def _entry_point_module(spec: gym.envs.registration.EnvSpec) -> str:
    """The module an env's constructor lives in: `pkg.envs` for "pkg.envs:Maze" or a class of it."""
    entry_point = spec.entry_point
    if isinstance(entry_point, str):
        return entry_point.partition(":")[0]
    return getattr(entry_point, "__module__", "")


def resolve_environment_name(name: str) -> str:
    """Returns the canonical gymnasium id for a user-given environment name.

    Resolution uses only gymnasium's registry (no environment is created), so it is fast.

    * Registered ids are returned unchanged: `CartPole-v1`, `ALE/Breakout-v5`, `PongNoFrameskip-v4`.
    * `module:id` (a user's own env) imports `module`, which registers `id`, and returns `id`:
      `mypkg.envs:Maze-v0` -> `Maze-v0`.
    * Short Atari names (case-insensitive) become the no-frameskip v4 id: `Pong` -> `PongNoFrameskip-v4`.
    * Ids gymnasium dropped for a bug-fixed version are mapped with a one-line note on stderr:
      `LunarLander-v2` -> `LunarLander-v3` (likewise LunarLanderContinuous, BipedalWalker[Hardcore],
      CarRacing). Only this function notes it: the factories and `is_atari` resolve silently, so a run
      script (which calls it once) prints the note once.

    Args:
      name: an environment name as typed by the user.

    Returns:
      A key of `gymnasium.registry`.

    Raises:
      errors.ConfigError: the name is unknown, or its module cannot be imported or does not register
        it; the one-line message lists the closest valid names.
    """
    return _resolve(name, note_renames=True)


def resolve_environment_name_quietly(name: str) -> str:
    """`resolve_environment_name` without the rename note (for factories: the run script noted it)."""
    return _resolve(name, note_renames=False)


def is_atari(name: str) -> bool:
    """Whether `name` (anything `resolve_environment_name` accepts) is an ALE Atari game.

    Raises:
      errors.ConfigError: the name is unknown.
    """
    return gym.spec(_resolve(name, note_renames=False)).entry_point == _ATARI_ENTRY_POINT


# Games whose RAM says which room the player is in: (room address, level address) in the 128 bytes
# `ale.getRAM()` returns, keyed by ale-py's ROM name. Montezuma's Revenge: the room byte 3 (0-23) and
# the level byte 57, as annotated by AtariARI (Anand et al. 2019, "Unsupervised State Representation
# Learning in Atari"); rooms repeat from level to level, so a room is the pair.
ROOM_RAM_ADDRESSES = {"montezuma_revenge": (3, 57)}


def atari_game(name: str) -> str:
    """ale-py's ROM name (`pong`, `montezuma_revenge`) of an Atari game (any name `resolve_environment_name`
    accepts).

    Raises:
      errors.ConfigError: the name is unknown or no Atari game.
    """
    environment_id = _resolve(name, note_renames=False)
    game = gym.spec(environment_id).kwargs.get("game")
    if not is_atari(environment_id) or game is None:
        raise errors.ConfigError(f"{environment_id} names no ALE ROM")
    return str(game)


def counts_rooms(name: str) -> bool:
    """Whether the training statistics of this game count the rooms each game visited (`RoomsVisited`)."""
    return is_atari(name) and atari_game(name) in ROOM_RAM_ADDRESSES


def _make(environment_id: str, env_kwargs: Mapping[str, Any] | None = None, **kwargs: Any) -> gym.Env:
    """gym.make with the user's constructor arguments (`--env_kwargs`) beside ours (`kwargs`); a missing
    optional dependency (mujoco, box2d, ...) or an argument the constructor does not take is a ConfigError."""
    env_kwargs = dict(env_kwargs or {})
    clash = sorted(set(env_kwargs) & set(kwargs))
    errors.require(
        not clash, f"--env_kwargs cannot set {', '.join(clash)}: the run sets it from its own flags"
    )
    try:
        return gym.make(environment_id, **kwargs, **env_kwargs)
    except gym.error.DependencyNotInstalled as e:
        message = " ".join(str(e).split())  # one line
        if "mujoco" in message.lower():  # an optional extra of this project, not of gymnasium
            message = "MuJoCo is an optional extra: pip install -e '.[mujoco]' (or pip install mujoco)"
        raise errors.ConfigError(f"cannot create {environment_id}: {message}") from e
    except TypeError as e:
        if not env_kwargs:
            raise
        reason = str(e).split(" was raised from the environment creator")[0]  # gymnasium's addition
        raise errors.ConfigError(
            f"cannot create {environment_id} with --env_kwargs={json.dumps(env_kwargs)}: {reason}"
        ) from e


def create_classic_environment(
    environment_name: str,
    seed: int,
    max_episode_steps: int = 0,
    render_mode: str | None = None,
    video_dir: str | None = None,
    video_name: str | None = None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    frame_height: int = 84,
    frame_width: int = 84,
    frame_stack: int = 4,
    clip_reward: bool = False,
) -> gym.Env:
    """Creates a non-Atari gymnasium environment (classic control, Box2D, a user's own) with episode
    statistics. An env whose observations are images (`is_image_space`) gets the Atari-style
    preprocessing (`preprocess_images`); the frame arguments and `clip_reward` apply to it only.

    Args:
      environment_name: anything `resolve_environment_name` accepts, e.g. `CartPole-v1` or
        `mypkg.envs:Maze-v0`.
      seed: seeds `env.action_space` here. The caller must also call `env.reset(seed=seed)` for the
        first reset (and `env.reset()` afterwards): that is what seeds the environment's dynamics.
      max_episode_steps: if > 0, replaces the registered time limit (env steps); 0 keeps it.
      render_mode: gymnasium render mode, e.g. `"rgb_array"` or `"human"`; None renders nothing.
      video_dir: if set, the first episode is recorded to an mp4 in this directory.
      video_name: the mp4's name without extension (default: the environment id); see `unique_video_name`.
      env_kwargs: keyword arguments of the env's constructor (`--env_kwargs`).
      frame_height: image observations: frame height after resizing.
      frame_width: image observations: frame width after resizing.
      frame_stack: image observations: frames stacked into one observation.
      clip_reward: image observations: rewards are replaced by their sign (statistics stay raw).

    Returns:
      The environment; `RecordEpisodeStatistics` sees its raw rewards.

    Raises:
      errors.ConfigError: unknown name, an Atari name (use `create_atari_environment`), a missing
        dependency, or `env_kwargs` the constructor does not take.
    """
    environment_id = _resolve(environment_name, note_renames=False)  # the run script noted any rename
    if is_atari(environment_id):
        raise errors.ConfigError(
            f"{environment_id} is an Atari game; use a run_atari script (create_atari_environment) for it"
        )
    render_mode = _render_mode_for_video(render_mode, video_dir)
    if render_mode == "rgb_array":
        _render_without_a_display()
    kwargs: dict[str, Any] = {"render_mode": render_mode}
    if max_episode_steps > 0:
        kwargs["max_episode_steps"] = max_episode_steps
    env = _make(environment_id, env_kwargs, **kwargs)
    env = _record_first_episode(env, video_dir, video_name or environment_id)
    env = RecordEpisodeStatistics(env)
    if is_image_space(env.observation_space):
        env = preprocess_images(env, frame_height, frame_width, frame_stack, clip_reward)
    env.action_space.seed(seed)
    return env


def is_image_space(space: gym.Space) -> bool:
    """Whether observations are camera-like frames: uint8 [H, W], [H, W, 1] or [H, W, 3] (RGB)."""
    if not isinstance(space, gym.spaces.Box) or space.dtype != np.uint8:
        return False
    shape = space.shape
    return len(shape) == 2 or (len(shape) == 3 and shape[-1] in (1, 3))


def preprocess_images(
    env: gym.Env, frame_height: int, frame_width: int, frame_stack: int, clip_reward: bool
) -> gym.Env:
    """The Atari-style preprocessing of a non-ALE env with image observations, outside its episode
    statistics: reward clipping (if set), grayscale, resize to frame_height x frame_width, and a stack
    of the last frame_stack frames: uint8 [frame_stack, frame_height, frame_width], the shape Atari
    observations have, so the same Nature-CNN networks and frame-sharing replay take it.

    What is ALE's own does not apply: frame skip with max-pooling, no-op starts, sticky actions, FIRE
    on reset and a lost life as a terminal state.
    """
    for flag, value in [
        ("frame_height", frame_height),
        ("frame_width", frame_width),
        ("frame_stack", frame_stack),
    ]:
        errors.require(value >= 1, f"{flag} must be >= 1, got {value}")
    if clip_reward:
        env = TransformReward(env, _sign)
    shape = env.observation_space.shape
    if len(shape) == 3 and shape[-1] == 3:
        env = GrayscaleObservation(env, keep_dim=False)
    elif len(shape) == 3:
        env = ReshapeObservation(env, shape[:2])
    env = ResizeObservation(env, (frame_height, frame_width))
    return FrameStackObservation(env, stack_size=frame_stack, padding_type="reset")


def _render_mode_for_video(render_mode: str | None, video_dir: str | None) -> str | None:
    """Recording needs rgb_array frames; any other explicit render mode is a ConfigError."""
    if video_dir is None:
        return render_mode
    errors.require(
        render_mode in (None, "rgb_array"),
        f"recording a video needs render_mode 'rgb_array', got {render_mode!r}",
    )
    return "rgb_array"


def _render_without_a_display() -> None:
    """Lets pygame (classic control, Box2D) draw rgb_array frames without a window or a sound card.

    Their `render()` calls `pygame.init()`, which opens SDL's video and audio drivers although an
    rgb_array frame needs neither, and on a machine without a desktop session SDL prints
    `error: XDG_RUNTIME_DIR is invalid or not set` (and ALSA a page of errors) though nothing failed.
    SDL's dummy drivers draw the same frames. A user's own SDL_VIDEODRIVER / SDL_AUDIODRIVER wins.
    """
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


_VIDEO_SUFFIX = "-episode-0.mp4"  # what RecordVideo appends to its name prefix for the first episode


def unique_video_name(video_dir: str, name: str) -> str:
    """`name`, or `name-2`, `name-3`... so that the first episode's mp4 replaces no existing video."""
    name = name.replace("/", "-")
    candidate, index = name, 2
    while os.path.exists(os.path.join(video_dir, candidate + _VIDEO_SUFFIX)):
        candidate, index = f"{name}-{index}", index + 1
    return candidate


def video_path(video_dir: str, video_name: str) -> str:
    """Where the first episode's mp4 is written for `video_name`."""
    return os.path.join(video_dir, video_name.replace("/", "-") + _VIDEO_SUFFIX)


def _record_first_episode(env: gym.Env, video_dir: str | None, video_name: str) -> gym.Env:
    """Wraps `env` in gymnasium's RecordVideo for its first episode, if `video_dir` is set."""
    if video_dir is None:
        return env
    with warnings.catch_warnings():
        # RecordVideo warns about "overwriting" whenever the folder exists; the caller picks a name that
        # overwrites nothing (`unique_video_name`).
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return RecordVideo(
            env,
            video_folder=video_dir,
            episode_trigger=lambda episode_id: episode_id == 0,
            name_prefix=video_name.replace("/", "-"),
        )


def _fire_action_needed(env: gym.Env) -> bool:
    """Whether the game needs FIRE to start: its action 1 means FIRE (Breakout, SpaceInvaders, ...)."""
    meanings = env.unwrapped.get_action_meanings()
    return len(meanings) >= 3 and meanings[1] == "FIRE"


def game_needs_fire(environment_name: str) -> bool:
    """Whether the Atari game waits for FIRE to start (`FireOnReset` is used for it), from its minimal
    action set; creates the emulator once to read it."""
    env = gym.make(_resolve(environment_name, note_renames=False), frameskip=1, full_action_space=False)
    try:
        return _fire_action_needed(env)
    finally:
        env.close()


class FireOnReset(gym.Wrapper):
    """Presses FIRE, then action 2, after every reset, for games that wait for FIRE to start.

    Hand-written because gymnasium has no equivalent (the idea is OpenAI baselines' `FireResetEnv`).
    Without it, an untrained agent in e.g. Breakout can spend its whole time limit never launching
    the ball. The second press (action 2, e.g. RIGHT) handles games that start on a different button.
    If one of the presses happens to end the game, the environment is reset and the presses repeat.
    The presses' rewards are dropped: they happen before the agent's first decision.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        if not _fire_action_needed(env):
            raise ValueError(f"FireOnReset needs action 1 to be FIRE and at least 3 actions; got {meanings}")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        return obs, info


class RoomsVisited(gym.Wrapper):
    """Counts the distinct rooms a whole game visits, as `info["episode"]["rooms"]` on the step that
    reports the game (`RecordEpisodeStatistics`, which it must wrap directly), for the games of
    `ROOM_RAM_ADDRESSES`: how far an exploring agent gets on Montezuma's Revenge, where the score says
    little until the first key. The room is read from the emulator's RAM at the reset and after every
    step (frame-skipped: a room crossed within one agent step's frames is missed). Hand-written: gymnasium
    has no wrapper reading the ALE's RAM.

    Inside `EpisodicLifeEnv`, whose resets after a lost life do not reach here, so the count spans the
    whole game as the return does.
    """

    def __init__(self, env: gym.Env, ram_addresses: tuple[int, int]):
        """`ram_addresses`: the game's (room, level) bytes, `ROOM_RAM_ADDRESSES[game]`."""
        super().__init__(env)
        self._room_address, self._level_address = ram_addresses
        self._rooms: set[tuple[int, int]] = set()

    def _visit(self) -> None:
        ram = self.env.unwrapped.ale.getRAM()
        self._rooms.add((int(ram[self._level_address]), int(ram[self._room_address])))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._rooms = set()
        self._visit()
        return observation, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._visit()
        if "episode" in info:
            info = {**info, "episode": {**info["episode"], "rooms": len(self._rooms)}}
        return observation, reward, terminated, truncated, info


class EpisodicLifeEnv(gym.Wrapper):
    """Makes a lost life a terminal state for learning, without ending the game.

    Hand-written because gymnasium's `AtariPreprocessing(terminal_on_life_loss=True)` truly ends the
    episode (the next reset restarts the game), which would also cut the episode statistics.

    A step that loses a life (but is not a game over) returns `terminated=True` and
    `info["life_loss"] = True`. The following `reset()` does not restart the game: it returns the
    observation the agent just received, now as the first state of the next life, and the same game
    continues with one life fewer. Any other `reset()` (after a game over, a truncation, mid-life, or
    with a seed) restarts the game; `info["episode"]` appears only when a game really ends.

        step():   a_1 ... a_k -> life lost: terminated, life_loss | ... game over: terminated
        reset():  s_k again (no emulator step, same game)         | real reset (new game)

    Unlike OpenAI baselines' `EpisodicLifeEnv`, the reset takes no no-op step: such a step could itself
    end the game (a time limit hitting on it), and its `info["episode"]` would then be lost inside
    `reset()`. So episode lengths count agent decisions only.

    Must wrap `RecordEpisodeStatistics` (not the reverse) so that `info["episode"]` describes whole games.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._lives = 0
        self._life_lost = False  # the last step lost a life and did not end the game
        self._last_observation: Any = None

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self._ale_lives()
        self._life_lost = lives < self._lives and not (terminated or truncated)
        if lives < self._lives and not terminated:
            terminated = True
            info = dict(info, life_loss=True)
        self._lives = lives
        self._last_observation = obs
        return obs, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if self._life_lost and seed is None:
            self._life_lost = False
            return self._last_observation, {"lives": self._lives}
        obs, info = self.env.reset(seed=seed, options=options)
        self._life_lost = False
        self._lives = self._ale_lives()
        return obs, info


class FinalScreenAtariPreprocessing(AtariPreprocessing):
    """gymnasium's `AtariPreprocessing`, whose last observation of a game is the emulator's last screen.

    gymnasium's step stops repeating the action as soon as the game ends, and returns before reading
    the screen: the last observation is then the previous step's. After a game over that is harmless
    (nothing bootstraps from a terminal state), but ALE's frame cap (108,000 emulator frames) is a
    truncation, and a truncation bootstraps from V(last observation). The cap counts emulator frames
    from the reset, no-op starts included, so it usually falls in the middle of a frame skip.

    This step re-reads the screen whenever the game ended. Max-pooling needs the frame before it,
    read only when the step got to its second-to-last frame; if the game ended earlier the final
    screen is pooled with itself:

        frames played this step    4 (all)             1, 2 or 3 (cut short)
        last observation           max(f3, f4)         the final frame alone

    ale_py's C++ `AtariVectorEnv` (0.12.1) has the same fault: with `max_num_frames_per_episode` 301,
    302 or 303 (1, 2 or 3 frames into Pong's 76th step), its last observation's newest frame equals
    the previous step's. `vector_env.AtariVectorEnvironment` therefore switches that cap off and
    truncates itself after the first whole agent step that reaches it (its docstring, item 4).
    """

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        frame_before = self.ale.getEpisodeFrameNumber()
        observation, reward, terminated, truncated, info = super().step(action)
        if terminated or truncated:
            frames_played = self.ale.getEpisodeFrameNumber() - frame_before
            if self.grayscale_obs:
                self.ale.getScreenGrayscale(self.obs_buffer[0])
            else:
                self.ale.getScreenRGB(self.obs_buffer[0])
            if len(self.obs_buffer) > 1 and frames_played < self.frame_skip:
                self.obs_buffer[1][...] = self.obs_buffer[0]
            observation = self._get_obs()
        return observation, reward, terminated, truncated, info


def _sign(reward: SupportsFloat) -> float:
    """Reward clipping of Mnih et al. (2015): keeps only the sign. A named function so envs pickle."""
    return float(np.sign(float(reward)))


def create_atari_environment(
    environment_name: str,
    seed: int,
    frame_height: int = 84,
    frame_width: int = 84,
    frame_skip: int = 4,
    frame_stack: int = 4,
    max_episode_steps: int = 0,
    noop_max: int = 30,
    terminal_on_life_loss: bool = False,
    clip_reward: bool = False,
    sticky_action_probability: float = 0.0,
    render_mode: str | None = None,
    video_dir: str | None = None,
    video_name: str | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> gym.Env:
    """Creates an Atari game with the Nature-DQN preprocessing (see the module docstring for the order).

    Whatever the id (`PongNoFrameskip-v4`, `ALE/Pong-v5`, `Pong-v4`), the emulator is created with
    `frameskip=1` (frame skipping is done by `AtariPreprocessing`, with max-pooling) and the minimal
    action set; `sticky_action_probability` always replaces the id's default (0.25 for v5 ids).
    ALE's own game limit (108,000 emulator frames, i.e. 30 minutes) still applies, as a truncation.

    Args:
      environment_name: anything `resolve_environment_name` accepts, e.g. `Pong` or `ALE/Pong-v5`.
      seed: seeds `env.action_space` here. The caller must also call `env.reset(seed=seed)` for the
        first reset (and `env.reset()` afterwards): that seeds the emulator, sticky actions and the
        number of no-op starts.
      frame_height: observation height in pixels.
      frame_width: observation width in pixels.
      frame_skip: emulator frames per env step; the action is repeated and rewards summed.
      frame_stack: number of most recent frames in each observation.
      max_episode_steps: if > 0, a game is truncated after this many env steps (agent decisions).
      noop_max: a reset takes a random number in [1, noop_max] of no-op frames; 0 disables.
      terminal_on_life_loss: a lost life is terminal for learning (see `EpisodicLifeEnv`).
      clip_reward: rewards are replaced by their sign; `info["episode"]` still has the raw return.
      sticky_action_probability: probability that the emulator repeats the previous action
        (Machado et al., 2018 recommend 0.25); 0 is the Nature-DQN setting.
      render_mode: gymnasium render mode of the emulator, e.g. `"human"` or `"rgb_array"`.
      video_dir: if set, the first game is recorded at full resolution to an mp4 in this directory
        (written when the second game starts or the env is closed); needs `render_mode` None or
        `"rgb_array"`.
      video_name: the mp4's name without extension (default: the environment id).
      env_kwargs: more arguments of ale-py's `AtariEnv` (`--env_kwargs`), e.g. `{"mode": 1}`.

    Returns:
      The wrapped environment: observations `uint8 [frame_stack, frame_height, frame_width]`.

    Raises:
      errors.ConfigError: unknown or non-Atari name, bad sizes, or an incompatible render mode.
    """
    environment_id = _resolve(environment_name, note_renames=False)  # the run script noted any rename
    if not is_atari(environment_id):
        raise errors.ConfigError(
            f"{environment_id} is not an Atari game; use a run_classic script (create_classic_environment)"
        )
    for flag, value in [
        ("frame_height", frame_height),
        ("frame_width", frame_width),
        ("frame_skip", frame_skip),
        ("frame_stack", frame_stack),
    ]:
        errors.require(value >= 1, f"{flag} must be >= 1, got {value}")
    errors.require(noop_max >= 0, f"noop_max must be >= 0, got {noop_max}")
    errors.require(
        0.0 <= sticky_action_probability <= 1.0,
        f"sticky_action_probability must be in [0, 1], got {sticky_action_probability}",
    )
    render_mode = _render_mode_for_video(render_mode, video_dir)
    env = _make(
        environment_id,
        env_kwargs,
        frameskip=1,
        repeat_action_probability=sticky_action_probability,
        full_action_space=False,
        render_mode=render_mode,
    )
    env = _record_first_episode(env, video_dir, video_name or environment_id)
    env = FinalScreenAtariPreprocessing(
        env,
        noop_max=noop_max,
        frame_skip=frame_skip,
        screen_size=(frame_width, frame_height),  # gymnasium takes (width, height), like cv2
        terminal_on_life_loss=False,  # see EpisodicLifeEnv
        grayscale_obs=True,
        scale_obs=False,
    )
    fire_needed = _fire_action_needed(env)
    if fire_needed:
        env = FireOnReset(env)
    if max_episode_steps > 0:
        env = TimeLimit(env, max_episode_steps=max_episode_steps)
    env = RecordEpisodeStatistics(env)
    room_ram_addresses = ROOM_RAM_ADDRESSES.get(atari_game(environment_id))
    if room_ram_addresses is not None:
        env = RoomsVisited(env, room_ram_addresses)
    if terminal_on_life_loss:
        env = EpisodicLifeEnv(env)
    if clip_reward:
        env = TransformReward(env, _sign)
    env = FrameStackObservation(env, stack_size=frame_stack, padding_type="reset")
    env.action_space.seed(seed)
    return env


class TerminalFrames(gym.Wrapper):
    """Puts the screen of every `interval`-th whole game's last step into `info["terminal_frame"]` (and the
    game's number into `info["terminal_frame_episode"]`), for debug screenshots taken far from the
    process that saves them (distributed actors). The screen is `env.render()` when the env renders
    rgb_array frames, else the observation. Games end where `info["episode"]` appears (see
    `RecordEpisodeStatistics` above), so a lost life is not one.
    """

    def __init__(self, env: gym.Env, interval: int):
        super().__init__(env)
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self._interval = interval
        self._games = 0

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        if "episode" in info:
            self._games += 1
            if self._games % self._interval == 0:
                frame = self.env.render() if self.env.render_mode == "rgb_array" else observation
                info = {**info, "terminal_frame": np.asarray(frame), "terminal_frame_episode": self._games}
        return observation, reward, terminated, truncated, info


def check_discrete_action_space(env: gym.Env, agent_name: str) -> None:
    """Raises a ConfigError unless `env` has a `Discrete` action space (DQN-family agents).

    Args:
      env: the environment the agent will act in.
      agent_name: shown in the message, e.g. `"DQN"`.
    """
    if not isinstance(env.action_space, gym.spaces.Discrete):
        raise errors.ConfigError(
            f"{agent_name} needs a discrete action space; {_env_id(env)} has {env.action_space} (for "
            "continuous actions: python -m deep_rl_zoo.ppo.run_continuous)"
        )


def check_continuous_action_space(env: gym.Env, agent_name: str) -> None:
    """Raises a ConfigError unless `env` has a `Box` action space (SAC, TD3, continuous PPO, ...).

    Args:
      env: the environment the agent will act in.
      agent_name: shown in the message, e.g. `"SAC"`.
    """
    if not isinstance(env.action_space, gym.spaces.Box):
        raise errors.ConfigError(
            f"{agent_name} needs a continuous (Box) action space; {_env_id(env)} has {env.action_space}"
        )


def _env_id(env: gym.Env) -> str:
    return env.spec.id if env.spec is not None else type(env.unwrapped).__name__


def check_script_fits_environment(
    script: str, environment_name: str, env_kwargs: Mapping[str, Any] | None = None
) -> None:
    """Raises a one-line ConfigError naming the right script when `script` is not for this environment.

    An Atari game given to a classic-control script points at the package's `run_atari`, another game
    given to `run_atari` at `run_classic`, unless its observations are images (a user's camera-based
    env, which `run_atari` preprocesses like Atari frames, with a one-line note of what does not apply);
    an env with image observations given to `run_classic` points at `run_atari`. A continuous-action
    task given to `run_classic` of a package that has a `run_continuous` (PPO) points there, and a
    discrete one given to `run_continuous` back.

    Args:
      script: the running module, e.g. `deep_rl_zoo.ppo.run_classic`; other modules (eval_agent, tests)
        are not checked.
      environment_name: as the user typed it.
      env_kwargs: the env constructor's arguments (`--env_kwargs`), for the probe that reads its spaces.
    """
    package, _, kind = script.rpartition(".")
    if not package.startswith("deep_rl_zoo.") or not kind.startswith("run_"):
        return
    atari = is_atari(environment_name)  # an unknown name raises its own one-line error

    def refuse(reason: str, target_kind: str) -> None:
        target = f"{package}.{target_kind}"
        if importlib.util.find_spec(target) is None:
            raise errors.ConfigError(
                f"{environment_name} {reason}, and {package} has no {target_kind} script"
            )
        raise errors.ConfigError(
            f"{environment_name} {reason}: use python -m {target} --environment_name={environment_name}"
        )

    if atari and "atari" not in kind:
        refuse("is an Atari game", kind.replace("classic", "atari") if "classic" in kind else "run_atari")
    if atari:
        return
    probe = _make(_resolve(environment_name, note_renames=False), env_kwargs)  # its own spaces, unwrapped
    images = is_image_space(probe.observation_space)
    continuous = isinstance(probe.action_space, gym.spaces.Box)
    probe.close()
    if "atari" in kind and not images:
        refuse(
            "is neither an Atari game nor an env with image observations", kind.replace("atari", "classic")
        )
    if "classic" in kind and images:
        refuse("has image observations", kind.replace("classic", "atari"))
    if "atari" in kind:
        print(
            f"note: {environment_name} is not an ALE game: its frames are grayscaled, resized and stacked "
            "like Atari's and --clip_reward applies, but --environment_frame_skip, --noop_max, "
            "--sticky_action_probability and --terminal_on_life_loss do not",
            file=sys.stderr,
        )
    if kind in ("run_classic", "run_continuous") and importlib.util.find_spec(f"{package}.run_continuous"):
        if continuous and kind == "run_classic":
            refuse("has continuous actions", "run_continuous")
        if not continuous and kind == "run_continuous":
            refuse("has discrete actions", "run_classic")
