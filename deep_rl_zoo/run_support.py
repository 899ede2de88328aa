"""What every run script does around its agent: environments, device, seeding, logging, checkpoints,
resume, the iteration loop, and greedy evaluation with video.

An algorithm's `train.py` supplies only a function that builds its agents from the environment.
"""

import dataclasses
import os
import random
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import checkpoint, gym_env, main_loop, trackers
from deep_rl_zoo.config import EvalConfig, RunConfig
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.types_ import Agent


class Agents(NamedTuple):
    train_agent: Agent  # learns
    eval_agent: Agent  # acts greedily with the train agent's (shared) network


def resolve_device(name: str) -> torch.device:
    """`auto` -> CUDA when available else CPU; an unavailable CUDA device is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device={name} but no CUDA device is visible")
    return device


def seed_everything(seed: int, num_threads: int) -> None:
    """Seeds the global generators that libraries may touch and fixes torch's thread count.

    Our own code draws from explicit `np.random.Generator`s; this covers torch's default generator
    (network initialisation) and anything third-party.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - third-party code may still use the global RNG
    torch.manual_seed(seed)
    torch.set_num_threads(num_threads)


def is_atari_config(config: Any) -> bool:
    return gym_env.is_atari(config.environment_name)


def make_environment(
    config: RunConfig | EvalConfig,
    seed: int,
    *,
    train: bool,
    render_mode: str | None = None,
    video_dir: str | None = None,
) -> gym.Env:
    """The training env (life loss terminal and reward clipping on Atari, if set) or an evaluation env."""
    if gym_env.is_atari(config.environment_name):
        return gym_env.create_atari_environment(
            config.environment_name,
            seed=seed,
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
        )
    return gym_env.create_classic_environment(
        config.environment_name,
        seed=seed,
        max_episode_steps=config.max_episode_steps,
        render_mode=render_mode,
        video_dir=video_dir,
    )


def check_action_space(env: gym.Env, agent_name: str, action_space: str) -> None:
    if action_space == "discrete":
        gym_env.check_discrete_action_space(env, agent_name)
    elif action_space == "continuous":
        gym_env.check_continuous_action_space(env, agent_name)


def eval_exploration_epsilon(config: EvalConfig) -> float:
    """The flag's value, or for -1 the customary one: 0.01 on Atari (breaks no-op loops), 0 elsewhere."""
    if config.eval_exploration_epsilon >= 0:
        return config.eval_exploration_epsilon
    return 0.01 if gym_env.is_atari(config.environment_name) else 0.0


def train(
    config: RunConfig,
    agent_name: str,
    build_agents: Callable[[gym.Env, torch.device], Agents],
    action_space: str = "discrete",
) -> main_loop.LoopState:
    """Runs a single-process training run end to end; returns where it stopped.

    Everything that can reject the input (environment name, action space, checkpoint for --resume)
    is checked before the first env step and before anything is written.
    """
    environment_id = gym_env.resolve_environment_name(config.environment_name)
    device = resolve_device(config.device)
    seed_everything(config.seed, config.num_threads)

    resume_payload = None
    if config.resume:
        path = checkpoint.find_latest_checkpoint(config.checkpoint_dir, agent_name, config.environment_name)
        if path is None:
            raise ConfigError(
                f"--resume: no {agent_name} checkpoint for {config.environment_name} in {config.checkpoint_dir}"
            )
        resume_payload = checkpoint.load_checkpoint(path, agent_name, environment_id)
        print(f"resuming from {path}", file=sys.stderr)

    debug_render = "rgb_array" if config.debug_screenshots_interval > 0 else None
    train_env = make_environment(config, config.seed, train=True, render_mode=debug_render)
    eval_env = make_environment(config, config.seed + 1, train=False)
    check_action_space(train_env, agent_name, action_space)
    agents = build_agents(train_env, device)

    if resume_payload is not None:
        agents.train_agent.load_state_dict(resume_payload["agent"])
        loop_state = main_loop.LoopState.from_state_dict(resume_payload["loop"])
        if loop_state.next_iteration >= config.num_iterations:
            raise ConfigError(
                f"--resume: the run already finished {loop_state.next_iteration} of --num_iterations="
                f"{config.num_iterations} iterations; raise --num_iterations to train further"
            )
    else:
        loop_state = main_loop.LoopState()
    if not loop_state.run_dir or not os.path.isdir(loop_state.run_dir):
        name = checkpoint.file_stem(agent_name, config.environment_name) + (
            f"_{config.tag}" if config.tag else ""
        )
        loop_state.run_dir = trackers.new_run_dir(config.runs_dir, name)
    logger = trackers.RunLogger(
        run_dir=loop_state.run_dir,
        use_tensorboard=config.use_tensorboard,
        results_csv_path=config.results_csv_path or os.path.join(loop_state.run_dir, "results.csv"),
        debug_screenshots_interval=config.debug_screenshots_interval,
    )
    _write_config(loop_state.run_dir, config)

    def save(iteration: int, state: main_loop.LoopState) -> str:
        path = checkpoint.checkpoint_path(
            config.checkpoint_dir, agent_name, config.environment_name, iteration
        )
        checkpoint.save_checkpoint(
            path,
            agent_name,
            environment_id,
            iteration,
            agents.train_agent.state_dict(),
            state.state_dict(),
            config=dataclasses.asdict(config),
        )
        return path

    solved_return = None
    if config.stop_when_solved and train_env.spec is not None:
        solved_return = train_env.spec.reward_threshold
    try:
        return main_loop.run_single_thread_training_iterations(
            num_iterations=config.num_iterations,
            num_train_steps=config.num_train_steps,
            num_eval_steps=config.num_eval_steps,
            train_agent=agents.train_agent,
            train_env=train_env,
            eval_agent=agents.eval_agent,
            eval_env=eval_env,
            seed=config.seed,
            logger=logger,
            save_checkpoint=save,
            loop_state=loop_state,
            solved_return=solved_return,
            show_progress=config.show_progress,
        )
    finally:
        logger.close()
        train_env.close()
        eval_env.close()


def _write_config(run_dir: str, config: Any) -> None:
    with open(os.path.join(run_dir, "config.txt"), "a") as f:
        for key, value in dataclasses.asdict(config).items():
            f.write(f"{key}={value}\n")


def evaluate(
    config: EvalConfig,
    agent_name: str,
    build_actor: Callable[[gym.Env, torch.device, dict | None], Agent],
    action_space: str = "discrete",
) -> list[float]:
    """Plays `config.num_episodes` episodes with a checkpoint's (or random) weights; records the first.

    Args:
      build_actor: builds the evaluation actor for the env; receives the checkpoint (its "agent" state
        and the training run's "config"), or None to play freshly initialised (random) weights.
    """
    environment_id = gym_env.resolve_environment_name(config.environment_name)
    device = resolve_device(config.device)
    seed_everything(config.seed, config.num_threads)
    path = config.load_checkpoint_file
    if path == "latest":
        path = checkpoint.find_latest_checkpoint(config.checkpoint_dir, agent_name, config.environment_name)
        if path is None:
            raise ConfigError(
                f"no {agent_name} checkpoint for {config.environment_name} in {config.checkpoint_dir}"
            )
    payload = None
    if path:
        payload = checkpoint.load_checkpoint(path, agent_name, environment_id)
        print(f"loaded {path}")
    else:
        print("no --load_checkpoint_file given: playing with random weights")

    video_dir = config.recording_video_dir or None
    env = make_environment(
        config, config.seed, train=False, render_mode="rgb_array" if video_dir else None, video_dir=video_dir
    )
    try:
        check_action_space(env, agent_name, action_space)
        actor = build_actor(env, device, payload)
        returns = main_loop.evaluate_episodes(env, actor, config.num_episodes, seed=config.seed)
    finally:
        env.close()
    for index, episode_return in enumerate(returns):
        print(f"episode {index}: return {episode_return:.1f}")
    print(f"mean return over {len(returns)} episodes: {np.mean(returns):.1f}")
    if video_dir:
        print(f"video of the first episode in {video_dir}")
    return returns
