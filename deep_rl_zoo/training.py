"""What every single-process `train.py` calls: `train` runs one training run end to end around the
agents that the algorithm's own function builds from the environment."""

import sys
from collections.abc import Callable
from typing import NamedTuple

import gymnasium as gym
import torch

from deep_rl_zoo import environments, gym_env, main_loop, process_setup, run_folders
from deep_rl_zoo.config import RunConfig
from deep_rl_zoo.trackers import LogCallback
from deep_rl_zoo.types_ import Agent


class Agents(NamedTuple):
    train_agent: Agent  # learns
    eval_agent: Agent  # acts greedily with the train agent's (shared) network


def train(
    config: RunConfig,
    agent_name: str,
    build_agents: Callable[[gym.Env, torch.device], Agents],
    action_space: str = "discrete",
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
    on_log: LogCallback | None = None,
) -> main_loop.LoopState:
    """Runs a single-process training run end to end; returns where it stopped.

    `on_log(prefix, values, env_step)` receives every group of scalars the run logs (`trackers.RunLogger`).

    Everything that can reject the input (environment name, action space, checkpoint for --resume)
    is checked before the first env step and before anything is written.
    """
    environment_id = gym_env.resolve_environment_name(config.environment_name)
    device = process_setup.resolve_device(config.device)
    process_setup.seed_everything(config.seed, config.num_threads)
    resume = run_folders.load_resume_checkpoint(config, agent_name, environment_id)
    process_setup.set_learner_precision(config, device, resume.payload.get("config") if resume else None)
    print(process_setup.describe_layout(config), file=sys.stderr)

    debug_render = "rgb_array" if config.debug_screenshots_interval > 0 else None
    train_env = environments.make_train_environment(
        config, config.seed, agent_name=agent_name, render_mode=debug_render, wrap_env=wrap_env
    )
    eval_env = environments.make_environment(config, config.seed + 1, train=False, wrap_env=wrap_env)
    environments.check_action_space(train_env, agent_name, action_space)
    agents = build_agents(train_env, device)
    environments.check_num_envs(config, agent_name, agents.train_agent)

    loop_state = run_folders.restore_or_start(config, agents.train_agent, resume)
    logger, checkpoint_folder = run_folders.open_run(config, agent_name, loop_state, resume, on_log)
    save = run_folders.checkpoint_saver(
        config, agent_name, environment_id, agents.train_agent, checkpoint_folder
    )
    solved_return = environments.solved_return_of(config, train_env)
    solved_min_episodes = environments.solved_min_episodes_of(config, eval_env)
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
        process_setup.reset_learner_precision()
