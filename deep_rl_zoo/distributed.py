"""Distributed runs, actors feeding one learner: their flags (`DistributedConfig`), where the actors run
(devices, local processes or Ray) and `train_distributed`, what every distributed `train.py` calls."""

import dataclasses
import functools
import sys
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import torch

from deep_rl_zoo import environments, gym_env, main_loop, process_setup, run_folders
from deep_rl_zoo.config import RunConfig, available_cpu_cores, field, is_atari_name
from deep_rl_zoo.errors import require
from deep_rl_zoo.runtime.interface import (
    DEFAULT_ACTOR_TIMEOUT_S,
    ActorRuntime,
    DistributedLearner,
    LearnerLink,
)
from deep_rl_zoo.runtime.local import LocalActorRuntime
from deep_rl_zoo.runtime.loop import run_distributed_training_iterations
from deep_rl_zoo.runtime.ray_backend import RayActorRuntime, import_ray
from deep_rl_zoo.trackers import LogCallback
from deep_rl_zoo.types_ import Agent


def num_parallel_envs_field(default: int, what: str) -> Any:
    """`--num_parallel_envs` of a config with batched actors: `what` says what the envs are in the paper."""
    return field(
        default,
        f"Envs whose unrolls make one update ({what}), spread over --num_actors processes x --num_envs envs "
        "each; with both unset (0) the split suits this machine's cores.",
    )


def auto_num_actors_field() -> Any:
    """`--num_actors` of a config with batched actors: 0 is auto (`actor_layout`)."""
    return field(
        0,
        "Actor processes, each with its copy of the network and --num_envs envs; 0: auto "
        "(distributed.actor_layout: as many as --num_parallel_envs needs, at most one per core on Atari).",
    )


def auto_num_envs_field() -> Any:
    """`--num_envs` of a config with batched actors: 0 is auto (`actor_layout`)."""
    return field(0, "Envs per actor, stepped with one batched forward; 0: auto (see --num_actors).")


@dataclasses.dataclass(frozen=True)
class DistributedConfig(RunConfig):
    """Flags shared by every agent whose actors run in their own processes (PPO, A2C, ...).

    A config whose `batched_actors` is True (PPO, A2C, PPO-RND, PPO-ICM: actors that step several envs
    each) has a field `num_parallel_envs` too, and 0 for `num_actors`/`num_envs` means auto
    (`actor_layout`; the fields: `num_parallel_envs_field`, `auto_num_actors_field`, `auto_num_envs_field`).
    """

    # The agent's actors can step --num_envs envs each (see train_distributed's `batched_actors`).
    batched_actors: ClassVar[bool] = False
    # Its learner learns while the actors wait for its parameters (synchronous, the learner's
    # `on_policy`): it may then use every core; an asynchronous one leaves each actor its core.
    learner_waits_for_actors: ClassVar[bool] = False
    # Its learner owes gradient steps per env step received (a replay ratio, `updates_per_env_step`): an
    # actor whose messages wait unlearned stops acting, so where cores are few the learner sets the pace
    # and, like a synchronous one, may use every core.
    learner_sets_the_pace: ClassVar[bool] = False

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
    actor_timeout: float = field(
        DEFAULT_ACTOR_TIMEOUT_S,
        "Seconds an actor may show no sign of life (no env step, no wake-up while it waits) before it is "
        "taken for hung (stopped, a deadlocked emulator, a stuck Ray node), killed and replaced like a dead "
        "one. The default leaves room for the slowest start (CUDA in an actor) on a slow machine.",
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
        if self.batched_actors:
            require(self.num_actors >= 0, f"--num_actors must be >= 0 (0: auto), got {self.num_actors}")
            require(self.num_envs >= 0, f"--num_envs must be >= 0 (0: auto), got {self.num_envs}")
            actors, envs = actor_layout(
                self.num_parallel_envs,
                self.num_actors,
                self.num_envs,
                available_cpu_cores(),
                is_atari_name(self.environment_name),
            )
            object.__setattr__(self, "num_actors", actors)
            object.__setattr__(self, "num_envs", envs)
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
        require(self.actor_timeout > 0, f"--actor_timeout must be positive, got {self.actor_timeout}")

    def auto_num_threads(self, cores: int) -> int:
        if not is_atari_name(self.environment_name):
            return 1
        if self.learner_waits_for_actors or self.learner_sets_the_pace:
            return cores
        # A learner that learns while its actors act (IMPALA): with a core per actor the actors keep theirs
        # and the learner takes what is left; with fewer cores than actors every process shares every core
        # anyway, and a thread per core gave the learner 1.22x the env steps/s of one (16 actors on 2
        # cores, benchmarks/README.md).
        if cores < self.num_actors:
            return cores
        return max(1, cores - self.num_actors)


def actor_layout(
    num_parallel_envs: int, num_actors: int, num_envs: int, cores: int, atari: bool
) -> tuple[int, int]:
    """(actor processes, envs per actor) of an agent with batched actors, 0 meaning auto.

    The batch of an update is `num_parallel_envs` unrolls however the envs are spread over processes,
    so auto keeps that product: on Atari the fewest envs per actor with at most one actor per core
    (8 envs: 2 actors x 4 on 2 cores, the fastest PPO layout measured there; 4 x 2 on 4 cores, 8 x 1 from
    8 cores on); elsewhere one env per actor (envs stepped in Python gain nothing from sharing a
    process). `--num_actors` alone keeps one env per actor, as before `--num_envs` existed; `--num_envs`
    alone takes as many actors as make `num_parallel_envs`.
    """
    if num_actors > 0:
        return num_actors, num_envs or 1
    if num_envs > 0:
        require(
            num_parallel_envs % num_envs == 0,
            f"--num_envs={num_envs} does not divide --num_parallel_envs={num_parallel_envs}; "
            "set --num_actors as well",
        )
        return num_parallel_envs // num_envs, num_envs
    if not atari:
        return num_parallel_envs, 1
    actors = max(d for d in range(1, min(cores, num_parallel_envs) + 1) if num_parallel_envs % d == 0)
    return actors, num_parallel_envs // actors


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
    process_setup.seed_everything(seed, num_threads=1)
    interval = config.debug_screenshots_interval
    if config.num_envs > 1:
        env = environments.make_train_environment(
            config, seed, agent_name=config.environment_name, wrap_env=wrap_env
        )
        actor, module = build_actor(config, env, device, link, seed)
        return env, actor, module
    render_mode = "rgb_array" if interval > 0 else None
    env = environments.make_environment(config, seed, train=True, render_mode=render_mode, wrap_env=wrap_env)
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
            actor_timeout_s=config.actor_timeout,
        )
    return LocalActorRuntime(
        module,
        build_actor,
        seeds,
        devices=actor_devices(config.num_actors, config.actors_on_gpu),
        max_actor_restarts=config.max_actor_restarts,
        actor_timeout_s=config.actor_timeout,
    )


def train_distributed(
    config: DistributedConfig,
    agent_name: str,
    build_learner: Callable[[gym.Env, torch.device], DistributedAgents],
    build_actor: Callable,
    action_space: str = "discrete",
    batched_actors: bool = False,
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
    on_log: LogCallback | None = None,
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
      on_log: `(prefix, values, env_step)`, called in this (the learner's) process with every group of
        scalars the run logs (`trackers.RunLogger`).

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
    device = process_setup.resolve_device(config.device)
    if config.backend == "ray":
        import_ray()  # a one-line error before any work if the extra is not installed
    process_setup.seed_everything(config.seed, config.num_threads)
    resume = run_folders.load_resume_checkpoint(config, agent_name, environment_id)
    process_setup.set_learner_precision(config, device, resume.payload.get("config") if resume else None)
    print(process_setup.describe_layout(config, config.num_actors), file=sys.stderr)
    warn_if_more_actors_than_cores(config.num_actors)

    eval_env = environments.make_environment(config, config.seed + 1, train=False, wrap_env=wrap_env)
    try:
        environments.check_action_space(eval_env, agent_name, action_space)
        agents = build_learner(eval_env, device)
        loop_state = run_folders.restore_or_start(config, agents.learner, resume)
        logger, checkpoint_folder = run_folders.open_run(config, agent_name, loop_state, resume, on_log)
        save = run_folders.checkpoint_saver(
            config, agent_name, environment_id, agents.learner, checkpoint_folder
        )
        solved_return = environments.solved_return_of(config, eval_env)
        solved_min_episodes = environments.solved_min_episodes_of(config, eval_env)
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
        process_setup.reset_learner_precision()
