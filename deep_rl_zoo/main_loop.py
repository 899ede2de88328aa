"""The environment loop and the single-process train/evaluate iterations.

One iteration = `num_train_steps` env steps of training, then `num_eval_steps` env steps of greedy
evaluation on a separate environment, then one CSV row and one checkpoint:

    iteration 0                      iteration 1
    |--- train ---|-- eval --|ckpt   |--- train ---|-- eval --|ckpt   ...

The training environment keeps running across iterations (an episode may span two of them); each
evaluation phase starts fresh episodes. The distributed loop (actors + learner, `deep_rl_zoo.runtime`)
reuses `run_env_loop`, `run_evaluation_phase` and `finish_iteration`.
"""

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from deep_rl_zoo import trackers
from deep_rl_zoo.types_ import Agent, TimeStep

LEARNER_LOG_INTERVAL = 1000  # env steps between two writes of the agent's (or learner's) statistics


def run_env_loop(env: gym.Env, agent: Agent, seed: int | None = None) -> Iterator[tuple[TimeStep, object]]:
    """Yields (timestep, action) forever, resetting the env and agent between episodes.

    The last timestep of an episode is shown to the agent too (so it can learn from it); the action it
    returns there is not used. Only the very first reset receives `seed`.
    """
    reset_seed = seed
    while True:
        agent.reset()
        observation, info = env.reset(seed=reset_seed)
        reset_seed = None
        timestep = TimeStep(observation, 0.0, False, False, True, info)
        while True:
            action = agent.step(timestep)
            yield timestep, action
            if timestep.last:
                break
            observation, reward, terminated, truncated, info = env.step(action)
            timestep = TimeStep(observation, float(reward), bool(terminated), bool(truncated), False, info)


def run_env_steps(
    num_steps: int,
    env_loop: Iterator[tuple[TimeStep, object]],
    stats: trackers.PhaseStats,
    on_step: Callable[[TimeStep, dict | None], None] | None = None,
    progress: tqdm | None = None,
) -> None:
    """Runs `env_loop` for `num_steps` env steps, recording them in `stats`."""
    if num_steps <= 0:
        return
    steps_taken = 0
    for timestep, _ in env_loop:
        if timestep.first:
            continue  # a reset, not an env step
        steps_taken += 1
        episode = stats.step(timestep)
        if on_step is not None:
            on_step(timestep, episode)
        if progress is not None:
            progress.update(1)
            if episode is not None or stats.num_steps % 500 == 0:
                progress.set_postfix(
                    steps_per_s=f"{stats.steps_per_second:.0f}",
                    last_return=f"{stats.episode_returns[-1]:.1f}" if stats.episode_returns else "-",
                    refresh=False,
                )
        if steps_taken >= num_steps:
            return


@dataclasses.dataclass
class LoopState:
    """Where a run stands between iterations; saved in every checkpoint for `--resume`."""

    next_iteration: int = 0
    train_env_steps: int = 0  # env steps of training done so far: the x-axis of every curve
    run_dir: str = ""
    solved: bool = False
    best_eval_return: float = -math.inf  # best greedy evaluation mean so far (whole episodes only)
    best_iteration: int = -1  # the iteration that reached it: its checkpoint is copied to `best`

    def state_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_state_dict(cls, state: dict) -> "LoopState":
        return cls(**state)


def run_single_thread_training_iterations(
    *,
    num_iterations: int,
    num_train_steps: int,
    num_eval_steps: int,
    train_agent: Agent,
    train_env: gym.Env,
    eval_agent: Agent,
    eval_env: gym.Env,
    seed: int,
    logger: trackers.RunLogger,
    save_checkpoint: Callable[[int, LoopState], str],
    loop_state: LoopState,
    solved_return: float | None = None,
    show_progress: bool = True,
) -> LoopState:
    """Trains and evaluates for the iterations left in `loop_state`; returns the final state.

    Args:
      solved_return: stop after the first iteration whose greedy evaluation mean reaches it.
    """
    # A resumed run re-seeds its environments differently, so it does not replay the same episodes.
    train_loop = run_env_loop(train_env, train_agent, seed=seed + 1000 * loop_state.next_iteration)
    train_stats, eval_stats = trackers.PhaseStats(), trackers.PhaseStats()
    train_episode_count = 0

    def on_train_step(timestep: TimeStep, episode: dict | None) -> None:
        nonlocal train_episode_count
        loop_state.train_env_steps += 1
        step = loop_state.train_env_steps
        if episode is not None:
            train_episode_count += 1
            logger.scalars("train", episode, step)
            interval = logger.debug_screenshots_interval
            if interval > 0 and train_episode_count % interval == 0:
                frame = train_env.render() if train_env.render_mode == "rgb_array" else timestep.observation
                logger.screenshot("train", frame, step, train_episode_count)
        if step % LEARNER_LOG_INTERVAL == 0:
            logger.scalars("learner", train_agent.statistics, step)

    for iteration in range(loop_state.next_iteration, num_iterations):
        train_stats.reset()
        with tqdm(
            total=num_train_steps,
            desc=f"iteration {iteration} train",
            unit="step",
            disable=not show_progress,
            leave=False,
            mininterval=1.0,
        ) as bar:
            run_env_steps(num_train_steps, train_loop, train_stats, on_train_step, bar)

        eval_summary = run_evaluation_phase(
            num_eval_steps,
            eval_env,
            eval_agent,
            seed + 7919 + iteration,
            iteration,
            show_progress,
            eval_stats,
        )
        train_summary = train_stats.summary()
        solved = finish_iteration(
            iteration=iteration,
            train_mean_return=train_summary["mean_episode_return"],
            train_num_episodes=train_summary["num_episodes"],
            train_steps_per_second=train_summary["steps_per_second"],
            eval_summary=eval_summary,
            learner_statistics=train_agent.statistics,
            logger=logger,
            save_checkpoint=save_checkpoint,
            loop_state=loop_state,
            solved_return=solved_return,
        )
        if solved:
            break
    train_loop.close()
    return loop_state


def run_evaluation_phase(
    num_eval_steps: int,
    eval_env: gym.Env,
    eval_agent: Agent,
    seed: int,
    iteration: int,
    show_progress: bool,
    eval_stats: trackers.PhaseStats,
) -> dict[str, float]:
    """Plays `num_eval_steps` greedy env steps from fresh episodes; returns the phase's summary."""
    eval_stats.reset()
    eval_loop = run_env_loop(eval_env, eval_agent, seed=seed)
    with tqdm(
        total=num_eval_steps,
        desc=f"iteration {iteration} eval",
        unit="step",
        disable=not show_progress,
        leave=False,
        mininterval=1.0,
    ) as bar:
        run_env_steps(num_eval_steps, eval_loop, eval_stats, progress=bar)
    eval_loop.close()
    eval_summary = eval_stats.summary()
    if eval_summary["num_episodes"] == 0:
        # Not one whole episode fitted in the evaluation budget: report the partial return.
        eval_summary["mean_episode_return"] = eval_stats.current_return
    return eval_summary


def finish_iteration(
    *,
    iteration: int,
    train_mean_return: float,
    train_num_episodes: int,
    train_steps_per_second: float,
    eval_summary: dict[str, float],
    learner_statistics: Mapping[str, float],
    logger: trackers.RunLogger,
    save_checkpoint: Callable[[int, "LoopState"], str],
    loop_state: "LoopState",
    solved_return: float | None,
) -> bool:
    """What ends every iteration: TensorBoard, a CSV row, a checkpoint and a console line.

    Returns whether the evaluation mean reached `solved_return` (the run then stops).
    """
    step = loop_state.train_env_steps
    logger.scalars("train", {"steps_per_second": train_steps_per_second}, step)
    logger.scalars("eval", eval_summary, step)
    logger.scalars("learner", learner_statistics, step)  # at least one point per iteration, however short
    row = {
        "iteration": iteration,
        "train_env_steps": step,
        "train_mean_episode_return": train_mean_return,
        "train_num_episodes": train_num_episodes,
        "train_steps_per_second": round(train_steps_per_second, 1),
        "eval_mean_episode_return": eval_summary["mean_episode_return"],
        "eval_num_episodes": eval_summary["num_episodes"],
    }
    row.update({f"learner_{k}": v for k, v in learner_statistics.items()})
    logger.csv_row(row)
    logger.flush()

    loop_state.next_iteration = iteration + 1
    if eval_summary["num_episodes"] > 0 and eval_summary["mean_episode_return"] > loop_state.best_eval_return:
        loop_state.best_eval_return = float(eval_summary["mean_episode_return"])
        loop_state.best_iteration = iteration
    solved = solved_return is not None and eval_summary["mean_episode_return"] >= solved_return
    loop_state.solved = bool(solved)
    path = save_checkpoint(iteration, loop_state)
    tqdm.write(
        f"iteration {iteration}: env steps {step}, train return {_fmt(train_mean_return)}"
        f" ({train_steps_per_second:.0f} steps/s), eval return "
        f"{_fmt(eval_summary['mean_episode_return'])} over {eval_summary['num_episodes']} episodes, saved {path}"
    )
    if solved:
        tqdm.write(f"solved: evaluation mean {eval_summary['mean_episode_return']:.1f} >= {solved_return}")
    return bool(solved)


def _fmt(x: float) -> str:
    return "-" if isinstance(x, float) and math.isnan(x) else f"{x:.1f}"


def evaluate_episodes(env: gym.Env, agent: Agent, num_episodes: int, seed: int) -> list[float]:
    """Plays `num_episodes` whole episodes and returns their (raw) returns."""
    stats = trackers.PhaseStats()
    for _timestep, _ in _episodes(run_env_loop(env, agent, seed=seed), stats, num_episodes):
        pass
    return stats.episode_returns


def _episodes(env_loop, stats: trackers.PhaseStats, num_episodes: int):
    for timestep, action in env_loop:
        if not timestep.first:
            stats.step(timestep)
        yield timestep, action
        if len(stats.episode_returns) >= num_episodes:
            return


def np_rng_state(rng: np.random.Generator) -> dict:
    """A numpy Generator's state as plain data (safe for weights_only checkpoints)."""
    return rng.bit_generator.state


def set_np_rng_state(rng: np.random.Generator, state: dict) -> None:
    rng.bit_generator.state = state
