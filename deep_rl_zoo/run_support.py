"""What every run script does around its agent: environments, device, seeding, logging, checkpoints,
resume, the iteration loop, and greedy evaluation with video.

An algorithm's `train.py` supplies only a function that builds its agents from the environment.
"""

import dataclasses
import functools
import importlib.util
import os
import random
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import checkpoint, gym_env, main_loop, trackers, vector_env
from deep_rl_zoo.config import EvalConfig, QEvalConfig, RunConfig, field
from deep_rl_zoo.errors import CheckpointError, ConfigError, require
from deep_rl_zoo.networks import common
from deep_rl_zoo.runtime.interface import ActorRuntime, DistributedLearner, LearnerLink
from deep_rl_zoo.runtime.local import LocalActorRuntime
from deep_rl_zoo.runtime.loop import run_distributed_training_iterations
from deep_rl_zoo.runtime.ray_backend import RayActorRuntime, import_ray
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


def set_learner_precision(config: Any, device: torch.device) -> None:
    """`--bfloat16` for this (the learner's) process: Nature-CNN torsos compute in bfloat16 autocast.
    Where the device has no native bfloat16 the run still does as asked, with a one-line warning: it
    is then slower, not faster (benchmarks/README.md)."""
    common.set_torso_bfloat16(config.bfloat16)
    if config.bfloat16 and not common.native_bfloat16(device):
        print(f"warning: --bfloat16 on {device.type}, which has no native bfloat16: expect it to be slower")


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
    elsewhere). Their episode statistics and timesteps mean what a single env's do."""
    num_envs = getattr(config, "num_envs", 1)
    if num_envs == 1:
        return make_environment(config, seed, train=True, render_mode=render_mode, wrap_env=wrap_env)
    require(
        wrap_env is None,
        f"--num_envs={num_envs}: {agent_name} wraps its environment (e.g. obscured screens) and runs one env",
    )
    if gym_env.is_atari(config.environment_name):
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
            video_name=video_name,
        )
    return gym_env.create_classic_environment(
        config.environment_name,
        seed=seed,
        max_episode_steps=config.max_episode_steps,
        render_mode=render_mode,
        video_dir=video_dir,
        video_name=video_name,
    )


def check_script_fits_environment(script: str, environment_name: str) -> None:
    """Raises a one-line ConfigError naming the right script when `script` is not for this environment.

    An Atari game given to a classic-control script points at the package's `run_atari`, another game
    given to `run_atari` at `run_classic`; a continuous-action task given to `run_classic` of a package
    that has a `run_continuous` (PPO) points there, and a discrete one given to `run_continuous` back.

    Args:
      script: the running module, e.g. `deep_rl_zoo.ppo.run_classic`; other modules (eval_agent, tests)
        are not checked.
      environment_name: as the user typed it.
    """
    package, _, kind = script.rpartition(".")
    if not package.startswith("deep_rl_zoo.") or not kind.startswith("run_"):
        return
    atari = gym_env.is_atari(environment_name)  # an unknown name raises its own one-line error

    def refuse(reason: str, target_kind: str) -> None:
        target = f"{package}.{target_kind}"
        if importlib.util.find_spec(target) is None:
            raise ConfigError(f"{environment_name} {reason}, and {package} has no {target_kind} script")
        raise ConfigError(
            f"{environment_name} {reason}: use python -m {target} --environment_name={environment_name}"
        )

    if atari and "atari" not in kind:
        refuse("is an Atari game", kind.replace("classic", "atari") if "classic" in kind else "run_atari")
    if not atari and "atari" in kind:
        refuse("is not an Atari game", kind.replace("atari", "classic"))
    if kind in ("run_classic", "run_continuous") and importlib.util.find_spec(f"{package}.run_continuous"):
        probe = gym_env.create_classic_environment(environment_name, seed=0)
        continuous = isinstance(probe.action_space, gym.spaces.Box)
        probe.close()
        if continuous and kind == "run_classic":
            refuse("has continuous actions", "run_continuous")
        if not continuous and kind == "run_continuous":
            refuse("has discrete actions", "run_classic")


def check_action_space(env: gym.Env, agent_name: str, action_space: str) -> None:
    if action_space == "discrete":
        gym_env.check_discrete_action_space(env, agent_name)
    elif action_space == "continuous":
        gym_env.check_continuous_action_space(env, agent_name)


def eval_exploration_epsilon(config: QEvalConfig) -> float:
    """The flag's value, or for -1 the customary one: 0.01 on Atari (breaks no-op loops), 0 elsewhere."""
    if config.eval_exploration_epsilon >= 0:
        return config.eval_exploration_epsilon
    return 0.01 if gym_env.is_atari(config.environment_name) else 0.0


def train(
    config: RunConfig,
    agent_name: str,
    build_agents: Callable[[gym.Env, torch.device], Agents],
    action_space: str = "discrete",
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
) -> main_loop.LoopState:
    """Runs a single-process training run end to end; returns where it stopped.

    Everything that can reject the input (environment name, action space, checkpoint for --resume)
    is checked before the first env step and before anything is written.
    """
    environment_id = gym_env.resolve_environment_name(config.environment_name)
    device = resolve_device(config.device)
    seed_everything(config.seed, config.num_threads)
    set_learner_precision(config, device)

    resume = load_resume_checkpoint(config, agent_name, environment_id)

    debug_render = "rgb_array" if config.debug_screenshots_interval > 0 else None
    train_env = make_train_environment(
        config, config.seed, agent_name=agent_name, render_mode=debug_render, wrap_env=wrap_env
    )
    eval_env = make_environment(config, config.seed + 1, train=False, wrap_env=wrap_env)
    check_action_space(train_env, agent_name, action_space)
    agents = build_agents(train_env, device)
    check_num_envs(config, agent_name, agents.train_agent)

    loop_state = restore_or_start(config, agents.train_agent, resume)
    if resume is not None and getattr(config, "checkpoint_replay", False):
        restore_replay(config, agent_name, agents.train_agent, resume)
    logger, checkpoint_folder = open_run(config, agent_name, loop_state, resume)
    save = checkpoint_saver(config, agent_name, environment_id, agents.train_agent, checkpoint_folder)
    solved_return = solved_return_of(config, train_env)
    solved_min_episodes = solved_min_episodes_of(config, eval_env)
    try:
        with main_loop.stop_on_signals() as stop:
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
                solved_min_episodes=solved_min_episodes,
                show_progress=config.show_progress,
                stop=stop,
            )
    finally:
        logger.close()
        train_env.close()
        eval_env.close()


class ResumePoint(NamedTuple):
    payload: dict  # the checkpoint's contents
    path: str  # the checkpoint file
    checkpoint_folder: str  # the run's checkpoint folder: the resumed run keeps writing there


def load_resume_checkpoint(config: RunConfig, agent_name: str, environment_id: str) -> ResumePoint | None:
    """For --resume, the newest run with this agent, environment and --tag; else None (a fresh run)."""
    if not config.resume:
        return None
    latest = checkpoint.find_run_checkpoint(
        config.checkpoint_dir, agent_name, config.environment_name, checkpoint.LATEST, tag=config.tag
    )
    if latest is None:
        tagged = f" tagged {config.tag!r}" if config.tag else " without a --tag"
        raise ConfigError(
            f"--resume: no {agent_name} checkpoint for {config.environment_name}{tagged} in {config.checkpoint_dir}"
        )
    payload = checkpoint.load_checkpoint(latest, agent_name, environment_id)
    print(f"resuming from {latest}", file=sys.stderr)
    return ResumePoint(payload, latest, os.path.dirname(latest))


def restore_or_start(config: RunConfig, agent: Any, resume: ResumePoint | None) -> main_loop.LoopState:
    """Loads the agent's state and the loop's position from a resume checkpoint, or starts afresh."""
    if resume is None:
        return main_loop.LoopState()
    agent.load_state_dict(resume.payload["agent"])
    loop_state = main_loop.LoopState.from_state_dict(resume.payload["loop"])
    if loop_state.next_iteration >= config.num_iterations:
        raise ConfigError(
            f"--resume: the run already finished {loop_state.next_iteration} of --num_iterations="
            f"{config.num_iterations} iterations; raise --num_iterations to train further"
        )
    return loop_state


def open_run(
    config: RunConfig, agent_name: str, loop_state: main_loop.LoopState, resume: ResumePoint | None
) -> tuple[trackers.RunLogger, str]:
    """The run's logger and checkpoint folder: the resumed run's, or a new pair sharing one fresh name.

    A new run is `<AGENT>_<env>[_<tag>]`, with `-2`, `-3`... when that name is taken under --runs_dir
    or --checkpoint_dir, so runs of a --tag sweep never collide and nothing is ever overwritten.
    """
    if resume is not None:
        checkpoint_folder = resume.checkpoint_folder
        # A run's two folders share one name, so the resumed run logs to that name under the --runs_dir
        # given now, not to the folder the checkpoint remembers: a checkpoint copied elsewhere and resumed
        # there must not write into the original run's logs.
        name = os.path.basename(os.path.abspath(checkpoint_folder))
        loop_state.run_dir = os.path.join(config.runs_dir, name)
        os.makedirs(loop_state.run_dir, exist_ok=True)
    else:
        name = checkpoint.new_run_name(
            [config.runs_dir, config.checkpoint_dir],
            checkpoint.run_name(agent_name, config.environment_name, config.tag),
        )
        loop_state.run_dir = os.path.join(config.runs_dir, name)
        checkpoint_folder = os.path.join(config.checkpoint_dir, name)
    _write_config(loop_state.run_dir, config, agent_name)
    logger = trackers.RunLogger(
        run_dir=loop_state.run_dir,
        use_tensorboard=config.use_tensorboard,
        results_csv_path=config.results_csv_path or os.path.join(loop_state.run_dir, "results.csv"),
        debug_screenshots_interval=config.debug_screenshots_interval,
    )
    return logger, checkpoint_folder


def checkpoint_replay_field() -> Any:
    """The `checkpoint_replay` flag of the replay agents' configs (see `checkpoint_saver`)."""
    return field(
        False,
        "Also save the replay (each Atari frame once) beside every checkpoint, so that --resume "
        "continues exactly; only the newest iteration's replay file is kept.",
    )


def restore_replay(config: RunConfig, agent_name: str, agent: Any, resume: ResumePoint) -> None:
    """--resume --checkpoint_replay: loads the replay file beside the resumed checkpoint, if there is one."""
    path = checkpoint.replay_path(resume.path)
    if not os.path.isfile(path):
        print(f"--checkpoint_replay: no replay file {path}; the replay starts empty", file=sys.stderr)
        return
    try:
        agent.replay_writer.load_state_arrays(checkpoint.load_arrays(path))
    except ValueError as e:
        raise CheckpointError(f"{path} does not fit this run's replay: {e}") from None
    print(f"restored {agent.replay_writer.replay.size} transitions from {path}", file=sys.stderr)


def checkpoint_saver(
    config: RunConfig, agent_name: str, environment_id: str, agent: Any, checkpoint_folder: str
) -> Callable[[int, main_loop.LoopState], str]:
    """save(iteration, loop_state, interrupted=False) -> path: writes `<AGENT>_<env>_<iteration>.ckpt` with
    the run's flags, and copies it to `<AGENT>_<env>_best.ckpt` when this iteration's evaluation is the
    best so far; `interrupted`: `<AGENT>_<env>_<iteration>_interrupted.ckpt`, the iteration stopped
    part-way, which the end of that iteration deletes again.

    With `config.checkpoint_replay`, the agent's replay goes first to `<checkpoint name>.replay.npz`
    (so a checkpoint never exists without its replay), then the checkpoint, then the earlier replay
    files are deleted (an Atari replay takes GBs).
    """

    def save(iteration: int, state: main_loop.LoopState, interrupted: bool = False) -> str:
        env_name = config.environment_name
        if interrupted:
            path = checkpoint.interrupted_checkpoint_path(checkpoint_folder, agent_name, env_name, iteration)
        else:
            path = checkpoint.checkpoint_path(checkpoint_folder, agent_name, env_name, iteration)
        if getattr(config, "checkpoint_replay", False):
            checkpoint.save_arrays(checkpoint.replay_path(path), agent.replay_writer.state_arrays())
        checkpoint.save_checkpoint(
            path,
            agent_name,
            environment_id,
            iteration,
            agent.state_dict(),
            state.state_dict(),
            config=dataclasses.asdict(config),
        )
        if state.best_iteration == iteration and not interrupted:
            best = checkpoint.best_checkpoint_path(checkpoint_folder, agent_name, env_name)
            checkpoint.copy_checkpoint(path, best)
        # Superseded now: the interrupted checkpoints this one continues, and every earlier replay file.
        stale = [
            checkpoint.interrupted_checkpoint_path(checkpoint_folder, agent_name, env_name, i)
            for i in range(iteration + (0 if interrupted else 1))
        ]
        stale += [checkpoint.replay_path(p) for p in stale]
        if getattr(config, "checkpoint_replay", False):
            stale += [
                checkpoint.replay_path(checkpoint.checkpoint_path(checkpoint_folder, agent_name, env_name, i))
                for i in range(iteration)
            ]
        for stale_path in stale:
            if os.path.exists(stale_path):
                os.remove(stale_path)
        return path

    return save


def solved_return_of(config: RunConfig, env: gym.Env) -> float | None:
    """The env's reward threshold when --stop_when_solved (CartPole-v1: 475), else None."""
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


def _write_config(run_dir: str, config: Any, agent_name: str) -> None:
    """Appends the run's flags (again on every resume) to `config.txt` as `name=value` lines."""
    with open(os.path.join(run_dir, "config.txt"), "a") as f:
        f.write(f"agent_name={agent_name}\n")
        for key, value in dataclasses.asdict(config).items():
            f.write(f"{key}={value}\n")


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
    device = resolve_device(config.device)
    seed_everything(config.seed, config.num_threads)
    path = resolve_checkpoint_file(config, agent_name)
    payload = None
    if path:
        payload = checkpoint.load_checkpoint(path, agent_name, environment_id)
        print(f"loaded {path}")
    else:
        print("no --load_checkpoint_file given: playing with random weights")

    video_dir = config.recording_video_dir or None
    video_name = None
    if video_dir:
        video_name = gym_env.unique_video_name(video_dir, evaluation_video_name(agent_name, config, payload))
    env = make_environment(
        config,
        config.seed,
        train=False,
        render_mode="rgb_array" if video_dir else None,
        video_dir=video_dir,
        video_name=video_name,
        wrap_env=wrap_env,
    )
    try:
        check_action_space(env, agent_name, action_space)
        actor = build_actor(env, device, payload)
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


# --- Distributed: actors feeding one learner ---


@dataclasses.dataclass(frozen=True)
class DistributedConfig(RunConfig):
    """Flags shared by every agent whose actors run in their own processes (PPO, A2C, ...)."""

    num_actors: int = field(8, "Actor processes, each with its own environment and copy of the network.")
    actors_on_gpu: bool | None = field(
        None,
        "Spread the actors over all visible GPUs (--noactors_on_gpu: all on the CPU). Unset: GPUs if any"
        " are visible, quietly the CPU otherwise.",
    )
    unroll_length: int = field(128, "Env steps per unroll an actor collects before sending it.")
    max_actor_restarts: int = field(
        10,
        "Dead actors (killed, crashed, an exception in the env) replaced over the whole run; the next "
        "death stops the run with an error naming the actor. 0: any actor's death stops the run.",
    )

    backend: str = field(
        "local",
        "Where the actors run. local: processes on this machine; ray: Ray actors anywhere in a Ray cluster "
        "(an optional extra: pip install -e '.[ray]'). The learner stays in this process.",
    )
    ray_address: str = field(
        "",
        "With --backend=ray: empty starts a local Ray instance; auto or host:port joins a running cluster.",
    )
    ray_actor_resource: str = field(
        "",
        "With --backend=ray: a custom Ray resource each actor needs one unit of, which pins the actors to the "
        "nodes started with it (ray start --resources='{\"NAME\": 8}').",
    )

    def __post_init__(self):
        super().__post_init__()
        require(self.num_actors > 0, f"--num_actors must be positive, got {self.num_actors}")
        require(self.backend in ("local", "ray"), f"--backend must be local or ray, got {self.backend!r}")
        require(
            self.backend == "ray" or not (self.ray_address or self.ray_actor_resource),
            "--ray_address and --ray_actor_resource apply only with --backend=ray",
        )
        require(
            self.max_actor_restarts >= 0, f"--max_actor_restarts must be >= 0, got {self.max_actor_restarts}"
        )
        require(self.unroll_length > 0, f"--unroll_length must be positive, got {self.unroll_length}")


class DistributedAgents(NamedTuple):
    learner: DistributedLearner
    eval_agent: Agent  # acts greedily with the learner's own network, in the learner process


def actor_devices(num_actors: int, actors_on_gpu: bool | None) -> list[torch.device]:
    """Actor i on GPU i mod (visible GPUs) unless --noactors_on_gpu; the CPU without a GPU.

    Only a user who asked for GPUs (`actors_on_gpu=True`) is told that there is none.
    """
    num_gpus = torch.cuda.device_count() if actors_on_gpu is not False else 0
    if actors_on_gpu and num_gpus == 0:
        print("--actors_on_gpu: no CUDA device is visible, so every actor runs on the CPU", file=sys.stderr)
    if num_gpus == 0:
        return [torch.device("cpu")] * num_actors
    return [torch.device("cuda", index % num_gpus) for index in range(num_actors)]


def available_cpu_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def warn_if_more_actors_than_cores(num_actors: int) -> None:
    """One line on stderr when the actors would have to take turns on the CPU cores."""
    cores = available_cpu_cores()
    if num_actors > cores:
        print(
            f"note: --num_actors={num_actors} is more than the {cores} CPU cores here; the actors will take "
            f"turns on them (no faster than --num_actors={cores}, and asynchronous agents learn from "
            "older parameters)",
            file=sys.stderr,
        )


def actor_seed(seed: int, actor_index: int, iteration: int) -> int:
    """Distinct per actor, and per resumed iteration so a resumed run does not replay its episodes."""
    return seed + 10_007 * (actor_index + 1) + 1000 * iteration


def _build_actor_process_side(
    config: DistributedConfig,
    build_actor: Callable,
    actor_index: int,
    seed: int,
    device: torch.device,
    link: LearnerLink,
    *,
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
) -> tuple[gym.Env, Agent, torch.nn.Module]:
    """Runs in the actor process: its training env, then the algorithm's actor for it."""
    seed_everything(seed, num_threads=1)
    interval = config.debug_screenshots_interval
    if config.num_envs > 1:
        env = make_train_environment(config, seed, agent_name=config.environment_name, wrap_env=wrap_env)
        actor, module = build_actor(config, env, device, link, seed)
        return env, actor, module
    render_mode = "rgb_array" if interval > 0 else None
    env = make_environment(config, seed, train=True, render_mode=render_mode, wrap_env=wrap_env)
    if interval > 0:  # the frames travel to the learner with the episode statistics
        env = gym_env.TerminalFrames(env, interval)
    actor, module = build_actor(config, env, device, link, seed)
    return env, actor, module


def make_runtime(
    config: DistributedConfig, module: torch.nn.Module, build_actor: Callable, seeds: list[int]
) -> ActorRuntime:
    """The backend `--backend` names, with the run's restart cap."""
    if config.backend == "ray":
        return RayActorRuntime(
            module,
            build_actor,
            seeds,
            max_actor_restarts=config.max_actor_restarts,
            address=config.ray_address,
            actors_on_gpu=config.actors_on_gpu,
            actor_resource=config.ray_actor_resource,
        )
    return LocalActorRuntime(
        module,
        build_actor,
        seeds,
        devices=actor_devices(config.num_actors, config.actors_on_gpu),
        max_actor_restarts=config.max_actor_restarts,
    )


def train_distributed(
    config: DistributedConfig,
    agent_name: str,
    build_learner: Callable[[gym.Env, torch.device], DistributedAgents],
    build_actor: Callable,
    action_space: str = "discrete",
    batched_actors: bool = False,
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
) -> main_loop.LoopState:
    """Runs a distributed training run (one learner process, `config.num_actors` actors).

    Args:
      batched_actors: the agent's actors can step `--num_envs` envs each (`UnrollActor.step_batch` with
        a feed-forward policy) and its learner takes their lists of unrolls; else --num_envs > 1 is
        refused in one line.
      build_learner: in the learner process, from an env (for its spaces) and the learner device.
      build_actor: module-level function `(config, env, device, link, seed) -> (actor, actor_module)`,
        called in each actor process; `actor_module` has the architecture of the learner's
        `shared_module` and receives its published parameters.
      wrap_env: an agent's own outermost wrapper of every env, the actors' and the evaluation's (e.g.
        `drqn.obscured.obscuring_wrapper`); it travels to the actor processes, so it must pickle (a
        module-level class or function, or a functools.partial of one; not a lambda).

    Everything that can reject the input is checked before any process starts or anything is written.
    """
    environment_id = gym_env.resolve_environment_name(config.environment_name)
    require(
        config.num_envs == 1 or batched_actors,
        f"--num_envs={config.num_envs}: {agent_name}'s actors step one env each; use --num_actors for more envs",
    )
    require(
        config.num_envs == 1 or config.debug_screenshots_interval == 0,
        "--debug_screenshots_interval needs --num_envs=1 (screens come from a single env's renderer)",
    )
    device = resolve_device(config.device)
    if config.backend == "ray":
        import_ray()  # a one-line error before any work if the extra is not installed
    seed_everything(config.seed, config.num_threads)
    set_learner_precision(config, device)

    resume = load_resume_checkpoint(config, agent_name, environment_id)
    warn_if_more_actors_than_cores(config.num_actors)

    eval_env = make_environment(config, config.seed + 1, train=False, wrap_env=wrap_env)
    try:
        check_action_space(eval_env, agent_name, action_space)
        agents = build_learner(eval_env, device)
        loop_state = restore_or_start(config, agents.learner, resume)
        logger, checkpoint_folder = open_run(config, agent_name, loop_state, resume)
        save = checkpoint_saver(config, agent_name, environment_id, agents.learner, checkpoint_folder)
        solved_return = solved_return_of(config, eval_env)
        solved_min_episodes = solved_min_episodes_of(config, eval_env)
        runtime = make_runtime(
            config,
            agents.learner.shared_module,
            functools.partial(_build_actor_process_side, config, build_actor, wrap_env=wrap_env),
            seeds=[
                actor_seed(config.seed, i, loop_state.next_iteration) + loop_state.iteration_env_steps
                for i in range(config.num_actors)
            ],
        )
        try:
            with runtime, main_loop.stop_on_signals() as stop:
                return run_distributed_training_iterations(
                    num_iterations=config.num_iterations,
                    num_train_steps=config.num_train_steps,
                    num_eval_steps=config.num_eval_steps,
                    learner=agents.learner,
                    runtime=runtime,
                    eval_agent=agents.eval_agent,
                    eval_env=eval_env,
                    seed=config.seed,
                    logger=logger,
                    save_checkpoint=save,
                    loop_state=loop_state,
                    solved_return=solved_return,
                    solved_min_episodes=solved_min_episodes,
                    show_progress=config.show_progress,
                    stop=stop,
                )
        finally:
            logger.close()
    finally:
        eval_env.close()
