"""Several environments stepped in lockstep, each seen by the agent exactly as a single env would be.

`--num_envs=N` (N > 1) trains on one of these: every round steps all N envs with one action each
(chosen by one batched forward) and returns one `TimeStep` per env. Each env's sequence of timesteps
has the zoo's single-env meaning (`main_loop.run_env_loop`): an episode starts with a `first`
timestep, ends with a `last` one whose action is ignored, and the env's next timestep is the `first`
of its next episode:

    round          k            k + 1          k + 2
    env 0          s_5          s_6 (last)     s_0' (first)    <- the action chosen at s_6 is ignored
    env 1          s_12         s_13           s_14

Two implementations:

- `AtariVectorEnvironment`: ale-py's C++ `AtariVectorEnv` (one ALE per env, stepped by C++ threads)
  does the emulator work of the Nature-DQN preprocessing: no-op starts, frame skip with max-pooling
  of the last two frames, grayscale, resize (cv2 INTER_AREA, like gymnasium). Python keeps what the
  zoo defines differently or must see: frame stacking (restarted at a lost life, like the single-env
  path), life loss as a terminal state for learning only, reward clipping for learning only, the
  agent-step time limit, the 108,000-frame cap with its true final screen (below), and episode
  statistics of whole games with raw scores (`info["episode"]`, as `RecordEpisodeStatistics` gives).
- `SerialVectorEnvironment`: N gymnasium environments of the single-env factories stepped one after
  the other (classic control, or any env the C++ vector env cannot make); same timestep contract.

Evaluation and videos keep using the single gymnasium env (`gym_env.create_atari_environment`).

Where the vector Atari path differs from `gym_env.create_atari_environment` (same ROM, seed, actions;
`unit_tests/test_vector_env.py` shows the observations are otherwise identical):

1. No-op starts: the C++ env draws 0 .. noop_max - 1 no-op frames from its own std::mt19937 seeded by
   the env's seed; gymnasium draws 1 .. noop_max from the env's numpy generator. Same distribution
   shape, other numbers: the two paths start the same seed at different frames (with noop_max=0 they
   start at the same frame). Sticky actions (`sticky_action_probability` > 0) likewise draw from each
   emulator's own generator, seeded differently on the two paths.
2. FIRE at reset (games whose action 1 is FIRE, Pong and Breakout included): the C++ env presses FIRE
   for one emulator frame in place of the last no-op (Pong with noop_max=30 starts 1 .. 29 frames in,
   measured over 160 resets); `gym_env.FireOnReset` presses FIRE then action 2, each for a whole frame
   skip, after the no-ops.
3. A lost life (with `terminal_on_life_loss`): the single env's next life starts from the very
   observation at the loss (no emulator step); here the env must step with the others, so the new
   life starts one NOOP step later (the OpenAI-baselines convention). That step's raw reward still
   counts in the game's score; it is not an agent decision, so it is not an env step. Should the game
   end within that NOOP step, the env is reset in the same round and the game's `info["episode"]`
   comes with the next game's `first` timestep: the one case where a game is reported on a first
   timestep, which the statistics count as a game but not as an env step (`trackers.PhaseStats.step`).
4. The frame cap (`max_num_frames_per_episode`, 108,000 by default): the C++ env's own cap has the
   fault `gym_env.FinalScreenAtariPreprocessing` fixes (when the cap falls inside a frame skip, the
   last observation's newest frame is the previous step's: measured with ale-py 0.12.1). So the C++
   cap is switched off and this class truncates after the first agent step that reaches the cap:
   that step plays all its frames, so its observation is the true, max-pooled final screen, and the
   truncation bootstraps from it. The game may last up to frame_skip - 1 emulator frames longer than
   on the single env (which stops mid-skip).
5. A time-limit truncation (`max_episode_steps`): the env is stepped once more with NOOP (unseen,
   the round needs every env), then reset by itself.
"""

import dataclasses
import time
from collections.abc import Sequence
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from ale_py.vector_env import AtariVectorEnv
from gymnasium.vector import AutoresetMode

from deep_rl_zoo import errors, gym_env
from deep_rl_zoo.types_ import TimeStep

ALE_FRAME_CAP = 108_000  # emulator frames per game (30 minutes at 60 Hz): ALE's own default limit
_NOOP = 0  # action 0 is NOOP in every minimal action set
_NO_C_LIMIT = 2**31 - 1  # the C++ env's frame cap, off (it misplaces the last screen, see item 4)


class VectorEnvironment(Protocol):
    """N envs in lockstep; see the module docstring for the timestep contract."""

    num_envs: int
    single_observation_space: gym.Space
    single_action_space: gym.Space

    def reset(self, seed: int) -> list[TimeStep]:
        """Starts a game in every env (env i seeded `seed + i`); returns their `first` timesteps."""

    def step(self, actions: np.ndarray) -> list[TimeStep]:
        """Applies `actions` [N] (ignored for envs whose previous timestep was last); one timestep each."""

    def close(self) -> None: ...


@dataclasses.dataclass
class _Episode:
    """Raw statistics of the game an env is playing (what `RecordEpisodeStatistics` reports)."""

    raw_return: float = 0.0
    length: int = 0  # agent decisions
    start: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {"r": self.raw_return, "l": self.length, "t": round(time.perf_counter() - self.start, 6)}


class AtariVectorEnvironment:
    """N Atari games on ale-py's C++ vector env, with the zoo's Nature preprocessing (module docstring).

    Args mirror `gym_env.create_atari_environment`; `fire_reset=None` presses FIRE at reset exactly
    for the games `gym_env.FireOnReset` is used for (action 1 is FIRE). `num_threads` is the C++ env's
    worker threads (0: one per env, capped by the cores).
    """

    def __init__(
        self,
        environment_name: str,
        num_envs: int,
        *,
        frame_height: int = 84,
        frame_width: int = 84,
        frame_skip: int = 4,
        frame_stack: int = 4,
        max_episode_steps: int = 0,
        noop_max: int = 30,
        terminal_on_life_loss: bool = False,
        clip_reward: bool = False,
        sticky_action_probability: float = 0.0,
        max_num_frames_per_episode: int = ALE_FRAME_CAP,
        fire_reset: bool | None = None,
        num_threads: int = 0,
    ):
        errors.require(num_envs >= 1, f"--num_envs must be >= 1, got {num_envs}")
        environment_id = gym_env.resolve_environment_name_quietly(environment_name)
        if not gym_env.is_atari(environment_id):
            raise errors.ConfigError(f"{environment_id} is not an Atari game")
        for flag, value in [
            ("frame_height", frame_height),
            ("frame_width", frame_width),
            ("frame_skip", frame_skip),
            ("frame_stack", frame_stack),
        ]:
            errors.require(value >= 1, f"{flag} must be >= 1, got {value}")
        errors.require(noop_max >= 0, f"noop_max must be >= 0, got {noop_max}")
        game = gym_env.atari_game(environment_id)
        if fire_reset is None:
            fire_reset = gym_env.game_needs_fire(environment_id)
        self._env = AtariVectorEnv(
            game,
            num_envs,
            num_threads=num_threads,
            max_num_frames_per_episode=_NO_C_LIMIT,
            repeat_action_probability=sticky_action_probability,
            full_action_space=False,
            autoreset_mode=AutoresetMode.NEXT_STEP,
            img_height=frame_height,
            img_width=frame_width,
            grayscale=True,
            stack_num=1,  # stacked here, so that a lost life restarts the stack as on the single env
            frameskip=frame_skip,
            maxpool=True,
            noop_max=noop_max,
            episodic_life=False,  # the game goes on; the life loss is marked here
            life_loss_info=False,
            reward_clipping=False,  # statistics need raw scores; clipped here for learning
            use_fire_reset=fire_reset,
        )
        self.num_envs = num_envs
        self.environment_id = environment_id
        self.single_observation_space = gym.spaces.Box(
            0, 255, (frame_stack, frame_height, frame_width), dtype=np.uint8
        )
        self.single_action_space = self._env.single_action_space
        self.spec = gym.spec(environment_id)
        self.render_mode = None
        self._frame_stack = frame_stack
        self._max_episode_steps = max_episode_steps
        self._frame_cap = max_num_frames_per_episode
        self._terminal_on_life_loss = terminal_on_life_loss
        self._clip_reward = clip_reward
        self._stacks = np.zeros((num_envs, *self.single_observation_space.shape), np.uint8)
        self._lives = np.zeros(num_envs, np.int64)
        self._episodes = [_Episode() for _ in range(num_envs)]
        # What the env does on the next round, after its previous timestep was last:
        self._autoreset = np.zeros(num_envs, bool)  # the C++ env resets it (game over)
        self._reset_here = np.zeros(num_envs, bool)  # reset by this class after the round (truncation)
        self._new_life = np.zeros(num_envs, bool)  # step NOOP, then a new life starts (lost life)

    def reset(self, seed: int) -> list[TimeStep]:
        frames, info = self._env.reset(seed=int(seed))
        self._autoreset[:] = self._reset_here[:] = self._new_life[:] = False
        self._stacks = np.empty_like(self._stacks)  # earlier timesteps keep their views of the old one
        everyone = np.ones(self.num_envs, bool)
        self._start(everyone, frames, info)
        return [self._first_timestep(i) for i in range(self.num_envs)]

    def _start(self, envs: np.ndarray, frames: np.ndarray, info: dict, new_game: bool = True) -> None:
        """Restarts the stacks of `envs` from their newest frame (reset padding) and, for a new game,
        their statistics."""
        self._stacks[envs] = frames[envs]  # [n, 1, H, W] broadcast over the stack axis
        self._lives[envs] = info["lives"][envs]
        if new_game:
            now = time.perf_counter()
            for i in np.flatnonzero(envs):
                self._episodes[i] = _Episode(start=now)

    def _first_timestep(self, i: int) -> TimeStep:
        return TimeStep(self._stacks[i], 0.0, False, False, True, {"lives": int(self._lives[i])})

    def step(self, actions: np.ndarray) -> list[TimeStep]:
        actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)
        actions = np.where(self._new_life | self._reset_here, _NOOP, actions)
        frames, rewards, terminated, _, info = self._env.step(actions)  # C++ truncation is off
        starting = self._autoreset.copy()  # the C++ env reset these instead of stepping them
        new_life = self._new_life.copy()
        for i in np.flatnonzero(new_life):  # the unseen NOOP step still scores
            self._episodes[i].raw_return += float(rewards[i])
        # A game that ended within the NOOP step is reported on its env's next timestep, the first of
        # the next game, reset now (item 3 of the module docstring).
        ended_on_noop = new_life & terminated
        finished = {i: self._episodes[i].summary() for i in np.flatnonzero(ended_on_noop)}
        new_life &= ~ended_on_noop
        reset_now = self._reset_here | ended_on_noop
        if reset_now.any():
            frames, info = self._reset_some(reset_now, frames, info)
            starting |= reset_now
        self._autoreset[:] = self._reset_here[:] = self._new_life[:] = False
        # A new array every round: the timesteps hand out views of it, which must never change later.
        self._stacks = np.concatenate([self._stacks[:, 1:], frames], axis=1)
        if starting.any():
            self._start(starting, frames, info)
        if new_life.any():
            self._start(new_life, frames, info, new_game=False)
        timesteps = []
        for i in range(self.num_envs):
            if starting[i] or new_life[i]:
                timestep = self._first_timestep(i)
                if i in finished:
                    timestep.info["episode"] = finished[i]
            else:
                timestep = self._stepped_timestep(i, float(rewards[i]), bool(terminated[i]), info)
            timesteps.append(timestep)
        return timesteps

    def _reset_some(self, envs: np.ndarray, frames: np.ndarray, info: dict) -> tuple[np.ndarray, dict]:
        """Resets `envs` alone (partial reset); the other envs' frames and info stay this round's."""
        reset_frames, reset_info = self._env.reset(options={"reset_mask": envs})
        frames = np.where(envs[:, None, None, None], reset_frames, frames)
        info = {k: np.where(envs, reset_info[k], v) if k in reset_info else v for k, v in info.items()}
        return frames, info

    def _stepped_timestep(self, i: int, raw_reward: float, game_over: bool, info: dict) -> TimeStep:
        episode = self._episodes[i]
        episode.raw_return += raw_reward
        episode.length += 1
        lives = int(info["lives"][i])
        life_lost = lives < self._lives[i]
        self._lives[i] = lives
        truncated = not game_over and (
            (self._max_episode_steps > 0 and episode.length >= self._max_episode_steps)
            or int(info["episode_frame_number"][i]) >= self._frame_cap
        )
        step_info: dict[str, Any] = {"lives": lives}
        # As `gym_env.EpisodicLifeEnv`: a lost life is terminal, also when a time limit cuts the game there.
        life_loss = life_lost and self._terminal_on_life_loss and not game_over
        terminated = game_over or life_loss
        if life_loss:
            step_info["life_loss"] = True
        if game_over or truncated:
            step_info["episode"] = episode.summary()
            if game_over:
                self._autoreset[i] = True
            else:
                self._reset_here[i] = True
        elif life_loss:
            self._new_life[i] = True
        reward = float(np.sign(raw_reward)) if self._clip_reward else raw_reward
        return TimeStep(self._stacks[i], reward, terminated, truncated, False, step_info)

    @property
    def observation_space(self) -> gym.Space:
        """One env's observation space (what agents are built for), as on a single env."""
        return self.single_observation_space

    @property
    def action_space(self) -> gym.Space:
        return self.single_action_space

    def close(self) -> None:
        self._env.close()


class SerialVectorEnvironment:
    """N gymnasium environments (from the single-env factories) stepped one after the other, with the
    `VectorEnvironment` contract: after an env's last timestep, the next round resets that env."""

    def __init__(self, envs: Sequence[gym.Env]):
        errors.require(len(envs) >= 1, f"--num_envs must be >= 1, got {len(envs)}")
        self._envs = list(envs)
        self.num_envs = len(self._envs)
        self.single_observation_space = self._envs[0].observation_space
        self.single_action_space = self._envs[0].action_space
        self.spec = self._envs[0].spec
        self.render_mode = None
        self._ended = [False] * self.num_envs

    def reset(self, seed: int) -> list[TimeStep]:
        timesteps = []
        for i, env in enumerate(self._envs):
            observation, info = env.reset(seed=seed + i)
            timesteps.append(TimeStep(observation, 0.0, False, False, True, info))
        self._ended = [False] * self.num_envs
        return timesteps

    def step(self, actions: np.ndarray) -> list[TimeStep]:
        timesteps = []
        for i, env in enumerate(self._envs):
            if self._ended[i]:
                observation, info = env.reset()
                timestep = TimeStep(observation, 0.0, False, False, True, info)
            else:
                observation, reward, terminated, truncated, info = env.step(_one_action(actions, i))
                timestep = TimeStep(
                    observation, float(reward), bool(terminated), bool(truncated), False, info
                )
            self._ended[i] = timestep.last
            timesteps.append(timestep)
        return timesteps

    @property
    def observation_space(self) -> gym.Space:
        """One env's observation space (what agents are built for), as on a single env."""
        return self.single_observation_space

    @property
    def action_space(self) -> gym.Space:
        return self.single_action_space

    def close(self) -> None:
        for env in self._envs:
            env.close()


def _one_action(actions: Any, i: int) -> Any:
    action = actions[i]
    return (
        int(action)
        if np.ndim(action) == 0 and np.issubdtype(np.asarray(action).dtype, np.integer)
        else action
    )
