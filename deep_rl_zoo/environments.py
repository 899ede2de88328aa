"""A run's environments from its flags: the training env (or `--num_envs` of them in lockstep), the
evaluation env, the checks that agent and environment fit, and when a run counts as solved."""

import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from deep_rl_zoo import gym_env, main_loop, vector_env
from deep_rl_zoo.config import EvalConfig, RunConfig, parse_env_kwargs
from deep_rl_zoo.errors import require


def is_atari_config(config: Any) -> bool:
    return gym_env.is_atari(config.environment_name)


def make_environment(
    config: RunConfig | EvalConfig,
    seed: int,
    *,
    train: bool,
    render_mode: str | None = None,
    video_dir: str | None = None,
    video_name: str | None = None,
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
) -> gym.Env:
    """The training env (life loss terminal and reward clipping on Atari, if set) or an evaluation env.

    `wrap_env` adds an agent's own outermost wrapper (e.g. DRQN's obscured observations).
    """
    env = _make_base_environment(
        config, seed, train=train, render_mode=render_mode, video_dir=video_dir, video_name=video_name
    )
    return wrap_env(env) if wrap_env is not None else env


def make_train_environment(
    config: RunConfig,
    seed: int,
    *,
    agent_name: str,
    render_mode: str | None = None,
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
) -> Any:
    """The training env: `make_environment(train=True)`, or with `--num_envs` > 1 that many envs in
    lockstep (`vector_env`: ale-py's C++ vector env on Atari, gymnasium envs one after the other
    elsewhere and on the games whose rooms are counted). Their episode statistics and timesteps mean what
    a single env's do."""
    num_envs = getattr(config, "num_envs", 1)
    if num_envs == 1:
        return make_environment(config, seed, train=True, render_mode=render_mode, wrap_env=wrap_env)
    require(
        wrap_env is None,
        f"--num_envs={num_envs}: {agent_name} wraps its environment (e.g. obscured screens) and runs one env",
    )
    # ale-py's vector env cannot show its RAM: a game whose rooms are counted (`gym_env.RoomsVisited`)
    # steps gymnasium envs one after the other instead: 0.7x the C++ env's steps/s (4 Montezuma envs,
    # random actions, AVX-512 EPYC), about 0.2 ms more per env step against PPO-RND's ~3.3 ms on Pong.
    if gym_env.is_atari(config.environment_name) and not gym_env.counts_rooms(config.environment_name):
        require(
            not parse_env_kwargs(config.env_kwargs),
            f"--env_kwargs with --num_envs={num_envs}: ale-py's vector env takes no constructor arguments; "
            "run --num_envs=1",
        )
        return vector_env.AtariVectorEnvironment(
            config.environment_name,
            num_envs,
            frame_height=config.environment_height,
            frame_width=config.environment_width,
            frame_skip=config.environment_frame_skip,
            frame_stack=config.environment_frame_stack,
            max_episode_steps=config.max_episode_steps,
            noop_max=config.noop_max,
            terminal_on_life_loss=config.terminal_on_life_loss,
            clip_reward=config.clip_reward,
            sticky_action_probability=config.sticky_action_probability,
            num_threads=min(num_envs, os.cpu_count() or 1),
        )
    return vector_env.SerialVectorEnvironment(
        [make_environment(config, seed + i, train=True) for i in range(num_envs)]
    )


def check_num_envs(config: RunConfig, agent_name: str, agent: Any) -> None:
    """--num_envs > 1 needs an agent that acts for a batch of envs (`step_batch`); else a one-line error."""
    num_envs = getattr(config, "num_envs", 1)
    require(
        num_envs == 1 or hasattr(agent, "step_batch"),
        f"--num_envs={num_envs}: {agent_name} acts in one env at a time; run it with --num_envs=1",
    )


def _make_base_environment(
    config: RunConfig | EvalConfig,
    seed: int,
    *,
    train: bool,
    render_mode: str | None,
    video_dir: str | None,
    video_name: str | None,
) -> gym.Env:
    env_kwargs = parse_env_kwargs(config.env_kwargs)
    if gym_env.is_atari(config.environment_name):
        return gym_env.create_atari_environment(
            config.environment_name,
            seed=seed,
            env_kwargs=env_kwargs,
            frame_height=config.environment_height,
            frame_width=config.environment_width,
            frame_skip=config.environment_frame_skip,
            frame_stack=config.environment_frame_stack,
            max_episode_steps=config.max_episode_steps,
            noop_max=config.noop_max,
            terminal_on_life_loss=train and config.terminal_on_life_loss,
            clip_reward=train and config.clip_reward,
            sticky_action_probability=config.sticky_action_probability,
            render_mode=render_mode,
            video_dir=video_dir,
            video_name=video_name,
        )
    return gym_env.create_classic_environment(
        config.environment_name,
        seed=seed,
        max_episode_steps=config.max_episode_steps,
        render_mode=render_mode,
        video_dir=video_dir,
        video_name=video_name,
        env_kwargs=env_kwargs,
        # Image observations only (a user's camera-based env): the Atari-style preprocessing.
        frame_height=config.environment_height,
        frame_width=config.environment_width,
        frame_stack=config.environment_frame_stack,
        clip_reward=train and getattr(config, "clip_reward", False),  # evaluation configs have none
    )


def check_action_space(env: gym.Env, agent_name: str, action_space: str) -> None:
    if action_space == "discrete":
        gym_env.check_discrete_action_space(env, agent_name)
    elif action_space == "continuous":
        gym_env.check_continuous_action_space(env, agent_name)


def solved_return_of(config: RunConfig, env: gym.Env) -> float | None:
    """--target_return when set; else the env's reward threshold when --stop_when_solved (CartPole-v1:
    475; Atari games have none), else None."""
    if config.target_return is not None:
        return config.target_return
    if config.stop_when_solved and env.spec is not None:
        return env.spec.reward_threshold
    return None


def solved_min_episodes_of(config: RunConfig, env: gym.Env) -> int:
    """Whole evaluation episodes a "solved" verdict needs: 10, or as many as --num_eval_steps can hold.

    CartPole-v1 (500-step episodes) with the default 5,000 evaluation steps: 10; with 1,000: 2. Without
    a time limit the budget's capacity is unknown, so 10.
    """
    time_limit = config.max_episode_steps or (env.spec.max_episode_steps if env.spec is not None else None)
    if not time_limit:
        return main_loop.SOLVED_MIN_EPISODES
    return max(1, min(main_loop.SOLVED_MIN_EPISODES, config.num_eval_steps // time_limit))
