"""What every `eval_agent.py` calls: play a checkpoint's (or random) weights greedily, print the returns
and record the first episode's video."""

import dataclasses
import os
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import checkpoint, environments, gym_env, main_loop, process_setup, run_folders, trackers
from deep_rl_zoo.config import EvalConfig, QEvalConfig
from deep_rl_zoo.errors import CheckpointError, ConfigError
from deep_rl_zoo.types_ import Agent


def evaluate(
    config: EvalConfig,
    agent_name: str,
    build_actor: Callable[[gym.Env, torch.device, dict | None], Agent],
    action_space: str = "discrete",
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
) -> list[float]:
    """Plays a checkpoint's (or random) weights greedily and records the first episode.

    Each of `config.num_iterations` iterations plays `config.num_episodes` whole episodes, or with
    `config.num_eval_steps` > 0 the whole episodes that fit that many env steps; returns every return.

    Args:
      build_actor: builds the evaluation actor for the env; receives the checkpoint (its "agent" state
        and the training run's "config"), or None to play freshly initialised (random) weights.
    """
    environment_id = gym_env.resolve_environment_name(config.environment_name)
    device = process_setup.resolve_device(config.device)
    process_setup.seed_everything(config.seed, config.num_threads)
    path = resolve_checkpoint_file(config, agent_name)
    payload = None
    if path:
        payload = checkpoint.load_checkpoint(path, agent_name, environment_id)
        print(f"loaded {path}")
        config = with_training_environment(config, payload.get("config", {}))
    else:
        print("no --load_checkpoint_file given: playing with random weights")

    video_dir = config.recording_video_dir or None
    video_name = None
    if video_dir:
        video_name = gym_env.unique_video_name(video_dir, evaluation_video_name(agent_name, config, payload))
    env = environments.make_environment(
        config,
        config.seed,
        train=False,
        render_mode="rgb_array" if video_dir else None,
        video_dir=video_dir,
        video_name=video_name,
        wrap_env=wrap_env,
    )
    try:
        environments.check_action_space(env, agent_name, action_space)
        try:
            actor = build_actor(env, device, payload)
        except RuntimeError as e:
            if "loading state_dict" not in str(e):
                raise
            raise network_does_not_fit(config, path, payload, e) from None
        returns = []
        for iteration in range(config.num_iterations):
            returns.extend(_evaluation_iteration(config, env, actor, iteration))
    finally:
        env.close()
    if returns:
        print(
            f"mean return over {len(returns)} episode{'' if len(returns) == 1 else 's'}: {np.mean(returns):.1f}"
        )
    else:
        print(f"no episode finished within --num_eval_steps={config.num_eval_steps}: no return to report")
    if video_dir:
        print(f"video of the first episode: {gym_env.video_path(video_dir, video_name)}")
    return returns


# The env flags a network is trained for: the constructor's arguments and the observation's shape.
TRAINING_ENVIRONMENT_FLAGS = (
    "env_kwargs",
    "environment_height",
    "environment_width",
    "environment_frame_stack",
)


def with_training_environment(config: EvalConfig, training_config: dict) -> EvalConfig:
    """The evaluation's config with the training run's env flags where the evaluation leaves them at
    their defaults: a network trained with --env_kwargs='{"size": 8}' or 36-pixel frames is played on
    that env without repeating the flags. A flag given a value of its own is kept (playing another
    variant of the env is a fair question to ask); each flag taken from the run is printed."""
    defaults = {f.name: f.default for f in dataclasses.fields(EvalConfig)}
    taken = {}
    for name in TRAINING_ENVIRONMENT_FLAGS:
        trained = training_config.get(name)
        if trained is None or getattr(config, name) != defaults[name] or trained == defaults[name]:
            continue
        taken[name] = type(defaults[name])(trained)
    if not taken:
        return config
    flags = " ".join(f"--{name}={value}" for name, value in taken.items())
    print(f"playing the env the checkpoint was trained on: {flags}")
    return dataclasses.replace(config, **taken)


def network_does_not_fit(
    config: EvalConfig, path: str, payload: dict, error: RuntimeError
) -> CheckpointError:
    """The one-line refusal of a checkpoint whose network the evaluation cannot rebuild: the env flags
    the evaluation sets otherwise than the training run did (one of them is the reason), or else a
    network saved by another version of the agent."""
    differing = run_folders.flags_differing_from_checkpoint(
        payload.get("config", {}), dataclasses.asdict(config), TRAINING_ENVIRONMENT_FLAGS
    )
    detail = str(error).strip().splitlines()[-1].strip()
    detail = detail if len(detail) <= 150 else detail[:147] + "..."
    if differing:
        return CheckpointError(
            f"{path}'s network does not fit this evaluation's env: {'; '.join(differing)} ({detail})"
        )
    return CheckpointError(
        f"{path}'s network does not fit the agent's network today (saved by another version of the zoo?) "
        f"({detail})"
    )


def evaluation_video_name(agent_name: str, config: EvalConfig, checkpoint_payload: dict | None) -> str:
    """Names a video after the run it shows: `<run folder>_iteration<k>`, e.g.
    `DQN_CartPole-v1_LSTM-2_iteration9` (agent, environment, tag and the run's number), so evaluating
    another agent, tag or run on the same game never replaces this one's video."""
    if checkpoint_payload is None:
        return checkpoint.file_stem(agent_name, config.environment_name) + "_random-weights"
    run_dir = str(checkpoint_payload.get("loop", {}).get("run_dir", ""))
    run_name = os.path.basename(os.path.normpath(run_dir)) if run_dir else ""
    if not run_name:
        tag = checkpoint_payload.get("config", {}).get("tag", "")
        run_name = checkpoint.file_stem(agent_name, config.environment_name) + (f"_{tag}" if tag else "")
    return f"{run_name}_iteration{checkpoint_payload.get('iteration', 0)}"


def _evaluation_iteration(config: EvalConfig, env: gym.Env, actor: Agent, iteration: int) -> list[float]:
    """--num_episodes whole episodes, or with --num_eval_steps the whole episodes that fit that budget
    (as in a training run's evaluation phase); prints each return."""
    seed = config.seed + iteration
    if config.num_eval_steps > 0:
        stats = trackers.PhaseStats()
        main_loop.run_evaluation_phase(config.num_eval_steps, env, actor, seed, iteration, False, stats)
        returns = stats.episode_returns
    else:
        returns = main_loop.evaluate_episodes(env, actor, config.num_episodes, seed=seed)
    if config.num_eval_steps > 0:  # possibly hundreds of short episodes: one line per iteration
        mean = f"mean return {np.mean(returns):.1f}" if returns else "no episode finished"
        print(
            f"iteration {iteration}: {mean} over {len(returns)} whole episodes in {config.num_eval_steps} env steps"
        )
    else:
        prefix = f"iteration {iteration}, " if config.num_iterations > 1 else ""
        for index, episode_return in enumerate(returns):
            print(f"{prefix}episode {index}: return {episode_return:.1f}")
    return returns


def resolve_checkpoint_file(config: EvalConfig, agent_name: str) -> str:
    """--load_checkpoint_file as a path: `latest`/`best` of the newest matching run, a run's folder
    (its latest checkpoint), or the file itself; '' stays '' (random weights)."""
    path = config.load_checkpoint_file
    tag = config.tag or None
    if path in (checkpoint.LATEST, checkpoint.BEST):
        found = checkpoint.find_run_checkpoint(
            config.checkpoint_dir, agent_name, config.environment_name, path, tag
        )
        if found is None:
            what = "best " if path == checkpoint.BEST else ""
            tagged = f" tagged {config.tag!r}" if config.tag else ""
            raise ConfigError(
                f"no {what}{agent_name} checkpoint for {config.environment_name}{tagged} in {config.checkpoint_dir}"
            )
        return found
    if path and os.path.isdir(path):
        found = checkpoint.find_latest_checkpoint(path, agent_name, config.environment_name)
        if found is None:
            raise ConfigError(
                f"no {agent_name} checkpoint for {config.environment_name} in the folder {path}"
            )
        return found
    return path


def eval_exploration_epsilon(config: QEvalConfig) -> float:
    """The flag's value, or for -1 the customary one: 0.01 on Atari (breaks no-op loops), 0 elsewhere."""
    if config.eval_exploration_epsilon >= 0:
        return config.eval_exploration_epsilon
    return 0.01 if gym_env.is_atari(config.environment_name) else 0.0
