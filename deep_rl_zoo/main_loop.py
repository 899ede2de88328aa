"""The environment loop and the single-process train/evaluate iterations.

One iteration = `num_train_steps` env steps of training, then `num_eval_steps` env steps of greedy
evaluation on a separate environment, then one CSV row and one checkpoint:

    iteration 0                      iteration 1
    |--- train ---|-- eval --|ckpt   |--- train ---|-- eval --|ckpt   ...

The training environment keeps running across iterations (an episode may span two of them); each
evaluation phase starts fresh episodes. The distributed loop (actors + learner, `deep_rl_zoo.runtime`)
reuses `run_env_loop`, `run_evaluation_phase` and `finish_iteration`.

A run stopped by Ctrl-C or SIGTERM (this loop or the distributed one) saves itself part-way through its
iteration (`stop_on_signals`, `<stem>_<i>_interrupted.ckpt`), and --resume finishes that iteration:
nothing trained is lost but the episodes that were running.
"""

import contextlib
import dataclasses
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from deep_rl_zoo import trackers
from deep_rl_zoo.errors import RunInterrupted
from deep_rl_zoo.types_ import Agent, TimeStep

LEARNER_LOG_INTERVAL = 1000  # env steps between two writes of the agent's (or learner's) statistics
# Whole evaluation episodes a "solved" verdict needs (fewer when the evaluation budget holds fewer).
SOLVED_MIN_EPISODES = 10


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


def run_vector_env_loop(env: Any, agent: Any, seed: int | None = None) -> Iterator[tuple[TimeStep, object]]:
    """`run_env_loop` for N envs in lockstep (`vector_env.VectorEnvironment`) and an agent with
    `step_batch(timesteps [N]) -> actions [N]`: yields (timestep, action) of env 0, 1, ..., N - 1 for
    each round, forever. Each env's timesteps follow `run_env_loop`'s contract (the agent sees the
    last timestep of an episode, its action is ignored, the next one is the next episode's first);
    the agent's `reset` is not called: a `first` timestep starts each env's episode afresh."""
    timesteps = env.reset(seed=0 if seed is None else seed)
    while True:
        actions = agent.step_batch(timesteps)
        yield from zip(timesteps, actions, strict=True)
        timesteps = env.step(actions)


class StopRequest:
    """Set by `stop_on_signals`' handler; the loops look at it after each env step, where the agent's
    state is whole (it has seen the timestep, its next action is not taken yet), so it can be saved."""

    def __init__(self):
        self.signal: int | None = None

    @property
    def requested(self) -> bool:
        return self.signal is not None


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """While open, the first Ctrl-C (SIGINT) or SIGTERM asks the run to stop at the next env step (and
    save where it stands) instead of ending it at once; a second Ctrl-C quits at once, as before.

    A signal the process ignores stays ignored (SIGINT under `nohup ... &`), and outside the main thread,
    where Python cannot install handlers, nothing changes.
    """
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, frame):
        # Only a flag: printing here could re-enter a write the interrupted code was in the middle of.
        if stop.requested:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return
        stop.signal = signum

    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def run_env_steps(
    num_steps: int,
    env_loop: Iterator[tuple[TimeStep, object]],
    stats: trackers.PhaseStats,
    on_step: Callable[[TimeStep, dict | None], None] | None = None,
    progress: tqdm | None = None,
    stop: StopRequest | None = None,
) -> None:
    """Runs `env_loop` for `num_steps` env steps (fewer if `stop` is requested), recording them in `stats`.

    `on_step(timestep, game)` is called after every env step, and after a `first` timestep that reports
    a game (`trackers.finished_game`; not an env step), with the game's summary or None."""
    if num_steps <= 0:
        return
    steps_taken = 0
    for timestep, _ in env_loop:
        episode = stats.step(timestep)
        if timestep.first:  # a reset, not an env step
            if episode is not None and on_step is not None:
                on_step(timestep, episode)
            continue
        steps_taken += 1
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
        if steps_taken >= num_steps or (stop is not None and stop.requested):
            return


class WarmUpNotice:
    """Says once on the console when a replay agent takes its first gradient step after its warm-up.

    Replay agents report `replay_size` and `learner_steps` in their statistics; for other agents (or a
    resumed run that already learns) there is nothing to announce and `pending` is False from the start.
    """

    def __init__(self, statistics: Mapping[str, float]):
        self.pending = "replay_size" in statistics and statistics.get("learner_steps", 0) == 0

    def check(self, statistics: Mapping[str, float], env_step: int) -> None:
        if statistics.get("learner_steps", 0) > 0:
            self.pending = False
            tqdm.write(
                f"learning starts at env step {env_step:,}: the replay warm-up is over "
                f"({int(statistics['replay_size']):,} transitions stored)"
            )


@dataclasses.dataclass
class LoopState:
    """Where a run stands between iterations; saved in every checkpoint for `--resume`."""

    next_iteration: int = 0
    train_env_steps: int = 0  # env steps of training done so far: the x-axis of every curve
    run_dir: str = ""
    solved: bool = False
    best_eval_return: float = -math.inf  # best greedy evaluation mean so far (whole episodes only)
    best_iteration: int = -1  # the iteration that reached it: its checkpoint is copied to `best`
    # Only in the checkpoint of an iteration stopped part-way: the training env steps of `next_iteration`
    # done before the stop (all of them when it stopped in the evaluation, which is played again) and
    # the whole games those finished, so the iteration's training mean still counts them.
    iteration_env_steps: int = 0
    iteration_episode_returns: list[float] = dataclasses.field(default_factory=list)
    iteration_episode_lengths: list[int] = dataclasses.field(default_factory=list)
    # Wall-clock seconds of the run so far (its resumed parts added up, the pauses between them not),
    # and the part of them spent in greedy evaluation; a checkpoint written before they existed has 0.
    wall_seconds: float = 0.0
    eval_seconds: float = 0.0

    def state_dict(self) -> dict:
        return dataclasses.asdict(self)

    def take_interrupted_iteration(self) -> tuple[int, list[float], list[int]]:
        """(env steps, game returns, game lengths) of `next_iteration` done before an interruption, all
        empty after a whole iteration; cleared here, so the iteration's own checkpoint has none."""
        taken = self.iteration_env_steps, self.iteration_episode_returns, self.iteration_episode_lengths
        self.iteration_env_steps, self.iteration_episode_returns, self.iteration_episode_lengths = 0, [], []
        return taken[0], list(taken[1]), list(taken[2])

    @classmethod
    def from_state_dict(cls, state: dict) -> "LoopState":
        return cls(**state)


class RunClock:
    """Keeps `loop_state.wall_seconds` up to date: it goes on from what the loop state holds (a resumed
    run's earlier parts), counting from the clock's creation, i.e. the start of the iteration loop."""

    def __init__(self, loop_state: LoopState):
        self._loop_state = loop_state
        self._start = time.perf_counter() - loop_state.wall_seconds

    def tick(self) -> None:
        self._loop_state.wall_seconds = time.perf_counter() - self._start


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
    save_checkpoint: Callable[[int, LoopState], str | None],
    loop_state: LoopState,
    solved_return: float | None = None,
    solved_min_episodes: int = SOLVED_MIN_EPISODES,
    show_progress: bool = True,
    stop: StopRequest | None = None,
) -> LoopState:
    """Trains and evaluates for the iterations left in `loop_state`; returns the final state.

    Args:
      save_checkpoint: `(iteration, loop_state, interrupted=False) -> path`, or None when it could not
        save (a full disk: it warned).
      solved_return: stop after the first iteration whose greedy evaluation mean reaches it, over at
        least `solved_min_episodes` whole episodes.
      stop: when it is requested (`stop_on_signals`), the run saves an interrupted checkpoint at the next
        env step and raises `RunInterrupted`.
    """
    # A resumed run re-seeds its environments differently, so it does not replay the same episodes.
    train_seed = seed + 1000 * loop_state.next_iteration + loop_state.iteration_env_steps
    if getattr(train_env, "num_envs", 1) > 1:  # --num_envs: a vector_env.VectorEnvironment
        train_loop = run_vector_env_loop(train_env, train_agent, seed=train_seed)
    else:
        train_loop = run_env_loop(train_env, train_agent, seed=train_seed)
    train_stats, eval_stats = trackers.PhaseStats(), trackers.PhaseStats()
    train_episode_count = 0
    clock = RunClock(loop_state)
    warm_up = WarmUpNotice(train_agent.statistics)

    def on_train_step(timestep: TimeStep, episode: dict | None) -> None:
        nonlocal train_episode_count
        if timestep.first:  # only reports a game (run_env_steps): no env step, no screen of its end
            train_episode_count += 1
            logger.scalars("train", episode, loop_state.train_env_steps)
            return
        loop_state.train_env_steps += 1
        step = loop_state.train_env_steps
        if warm_up.pending:
            warm_up.check(train_agent.statistics, step)
        if episode is not None:
            train_episode_count += 1
            logger.scalars("train", episode, step)
            interval = logger.debug_screenshots_interval
            if interval > 0 and train_episode_count % interval == 0:
                frame = train_env.render() if train_env.render_mode == "rgb_array" else timestep.observation
                logger.screenshot("train", frame, step, train_episode_count)
        if step % LEARNER_LOG_INTERVAL == 0:
            logger.scalars("learner", train_agent.statistics, step)

    def save_and_stop(iteration: int, iteration_env_steps: int) -> NoReturn:
        train_loop.close()
        clock.tick()
        games = (train_stats.episode_returns, train_stats.episode_lengths)
        save_interrupted_and_stop(save_checkpoint, iteration, iteration_env_steps, *games, loop_state, stop)

    for iteration in range(loop_state.next_iteration, num_iterations):
        train_stats.reset()
        done, train_stats.episode_returns, train_stats.episode_lengths = (
            loop_state.take_interrupted_iteration()
        )
        with phase_progress_bar(iteration, "train", num_train_steps, show_progress, initial=done) as bar:
            run_env_steps(num_train_steps - done, train_loop, train_stats, on_train_step, bar, stop)
            # A replay Q agent learning in a second thread (--overlap_learning) finishes before the
            # evaluation reads its network (the time counts to training).
            getattr(train_agent, "finish_learning", lambda: None)()
        train_steps_per_second = train_stats.steps_per_second  # the training phase's own, before evaluating
        if stop is not None and stop.requested:
            save_and_stop(iteration, done + train_stats.num_steps)

        eval_summary = evaluate_iteration(
            iteration, num_eval_steps, eval_env, eval_agent, seed, show_progress, eval_stats, loop_state, stop
        )
        if stop is not None and stop.requested:
            save_and_stop(iteration, num_train_steps)
        train_summary = train_stats.summary()
        clock.tick()
        solved = finish_iteration(
            iteration=iteration,
            train_mean_return=train_summary["mean_episode_return"],
            train_num_episodes=train_summary["num_episodes"],
            train_steps_per_second=train_steps_per_second,
            eval_summary=eval_summary,
            learner_statistics=train_agent.statistics,
            logger=logger,
            save_checkpoint=save_checkpoint,
            loop_state=loop_state,
            solved_return=solved_return,
            solved_min_episodes=solved_min_episodes,
        )
        if solved:
            break
    train_loop.close()
    return loop_state


def save_interrupted_and_stop(
    save_checkpoint: Callable[..., str | None],
    iteration: int,
    iteration_env_steps: int,
    episode_returns: list[float],
    episode_lengths: list[int],
    loop_state: LoopState,
    stop: StopRequest,
) -> NoReturn:
    """Saves `<stem>_<iteration>_interrupted.ckpt` (the iteration's env steps and games so far in the loop
    state) and raises `RunInterrupted`, whose exit code is 128 + the signal's number."""
    tqdm.write(
        f"{signal.Signals(stop.signal).name}: saving the run at env step {loop_state.train_env_steps:,} "
        "(Ctrl-C again quits without saving)"
    )
    loop_state.iteration_env_steps = iteration_env_steps
    loop_state.iteration_episode_returns = list(episode_returns)
    loop_state.iteration_episode_lengths = list(episode_lengths)
    path = save_checkpoint(iteration, loop_state, interrupted=True)
    saved = (
        f"saved {path}, which --resume continues" if path else "could not save it (no room: see the warning)"
    )
    raise RunInterrupted(
        f"stopped in iteration {iteration} at env step {loop_state.train_env_steps:,}; {saved}",
        exit_code=128 + stop.signal,
    )


def phase_progress_bar(iteration: int, phase: str, total: int, show_progress: bool, initial: int = 0) -> tqdm:
    """The console bar of one phase ("train" or "eval") of an iteration, in env steps; it disappears
    when the phase ends (the iteration's summary line replaces it) and redraws at most once a second."""
    return tqdm(
        total=total,
        initial=initial,
        desc=f"iteration {iteration} {phase}",
        unit="step",
        disable=not show_progress,
        leave=False,
        mininterval=1.0,
    )


def run_evaluation_phase(
    num_eval_steps: int,
    eval_env: gym.Env,
    eval_agent: Agent,
    seed: int,
    iteration: int,
    show_progress: bool,
    eval_stats: trackers.PhaseStats,
    stop: StopRequest | None = None,
) -> dict[str, float]:
    """Plays `num_eval_steps` greedy env steps from fresh episodes (fewer if `stop` is requested: the
    phase is then worth nothing); returns the phase's summary."""
    eval_stats.reset()
    eval_loop = run_env_loop(eval_env, eval_agent, seed=seed)
    with phase_progress_bar(iteration, "eval", num_eval_steps, show_progress) as bar:
        run_env_steps(num_eval_steps, eval_loop, eval_stats, progress=bar, stop=stop)
    eval_loop.close()
    eval_summary = eval_stats.summary()
    if eval_summary["num_episodes"] == 0 and eval_stats.num_steps > 0:
        # Not one whole episode fitted in the budget. The mean stays NaN (there is none); the partial
        # episode is reported as what it is, never as a mean over episodes.
        eval_summary["unfinished_episode_return"] = eval_stats.current_return
        eval_summary["unfinished_episode_length"] = eval_stats.current_length
    return eval_summary


def evaluate_iteration(
    iteration: int,
    num_eval_steps: int,
    eval_env: gym.Env,
    eval_agent: Agent,
    seed: int,
    show_progress: bool,
    eval_stats: trackers.PhaseStats,
    loop_state: "LoopState",
    stop: StopRequest | None = None,
) -> dict[str, float]:
    """The evaluation phase that ends `iteration` of a run seeded `seed`: its games are seeded
    seed + 7919 + iteration, apart from the training envs' seeds and from every other iteration's, and its
    wall time adds to `loop_state.eval_seconds` (a stopped phase's too: the time passed)."""
    start = time.perf_counter()
    summary = run_evaluation_phase(
        num_eval_steps,
        eval_env,
        eval_agent,
        seed + 7919 + iteration,
        iteration,
        show_progress,
        eval_stats,
        stop,
    )
    loop_state.eval_seconds += time.perf_counter() - start
    return summary


def finish_iteration(
    *,
    iteration: int,
    train_mean_return: float,
    train_num_episodes: int,
    train_steps_per_second: float,
    eval_summary: dict[str, float],
    learner_statistics: Mapping[str, float],
    logger: trackers.RunLogger,
    save_checkpoint: Callable[[int, "LoopState"], str | None],
    loop_state: "LoopState",
    solved_return: float | None,
    solved_min_episodes: int = SOLVED_MIN_EPISODES,
) -> bool:
    """What ends every iteration: TensorBoard, a CSV row, a checkpoint and a console line.

    Returns whether the run is solved (it then stops): the greedy evaluation's mean over at least
    `solved_min_episodes` whole episodes reached `solved_return`. An unfinished episode never counts.
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
        # the spread over whole games: a mean of +3 may be every game near +3 or half won, half lost
        **{
            f"eval_{edge}_episode_return": eval_summary.get(f"{edge}_episode_return", math.nan)
            for edge in ("min", "max", "std")
        },
        # since the run started (a resumed run's earlier parts included), and the part spent evaluating
        "wall_seconds": round(loop_state.wall_seconds, 1),
        "eval_seconds": round(loop_state.eval_seconds, 1),
    }
    row.update({f"learner_{k}": v for k, v in learner_statistics.items()})
    logger.csv_row(row)
    logger.flush()

    loop_state.next_iteration = iteration + 1
    eval_mean, eval_episodes = eval_summary["mean_episode_return"], int(eval_summary["num_episodes"])
    if eval_episodes > 0 and eval_mean > loop_state.best_eval_return:
        loop_state.best_eval_return = float(eval_mean)
        loop_state.best_iteration = iteration
    reached = solved_return is not None and eval_episodes > 0 and eval_mean >= solved_return
    solved = reached and eval_episodes >= solved_min_episodes
    loop_state.solved = bool(solved)
    path = save_checkpoint(iteration, loop_state)
    tqdm.write(
        f"iteration {iteration}: env steps {step:,}, {_describe_training(train_mean_return, train_num_episodes)}"
        f" ({train_steps_per_second:.0f} steps/s), {_describe_evaluation(eval_summary)}, "
        + (f"saved {path}" if path else "not saved (no room, see the warning)")
    )
    if solved:
        tqdm.write(
            f"solved: evaluation mean {eval_mean:.1f} >= {solved_return} over {_episodes_text(eval_episodes)}"
        )
    elif reached:
        tqdm.write(
            f"not solved yet: the evaluation mean {eval_mean:.1f} reached {solved_return}, but over "
            f"{_episodes_text(eval_episodes, 'whole ')}; solved needs at least {solved_min_episodes}"
        )
    return bool(solved)


def _describe_training(mean_return: float, num_episodes: int) -> str:
    if num_episodes == 0:
        return "train: no episode finished"
    return f"train return {mean_return:.1f} over {_episodes_text(num_episodes)}"


def _describe_evaluation(eval_summary: Mapping[str, float]) -> str:
    """`eval return 46.2 over 6 episodes`, or what the unfinished episode reached (never a mean of 0)."""
    num_episodes = int(eval_summary["num_episodes"])
    if num_episodes > 0:
        return f"eval return {eval_summary['mean_episode_return']:.1f} over {_episodes_text(num_episodes)}"
    if "unfinished_episode_return" in eval_summary:
        return (
            f"eval: no episode finished in {int(eval_summary['num_steps']):,} steps (the unfinished one had "
            f"return {eval_summary['unfinished_episode_return']:.1f} after "
            f"{int(eval_summary['unfinished_episode_length']):,} steps)"
        )
    return "no evaluation (--num_eval_steps=0)"


def _episodes_text(count: int, adjective: str = "") -> str:
    return f"{count} {adjective}episode{'' if count == 1 else 's'}"


def evaluate_episodes(env: gym.Env, agent: Agent, num_episodes: int, seed: int) -> list[float]:
    """Plays `num_episodes` whole episodes and returns their (raw) returns."""
    stats = trackers.PhaseStats()
    for _timestep, _ in _episodes(run_env_loop(env, agent, seed=seed), stats, num_episodes):
        pass
    return stats.episode_returns


def _episodes(env_loop, stats: trackers.PhaseStats, num_episodes: int):
    for timestep, action in env_loop:
        stats.step(timestep)
        yield timestep, action
        if len(stats.episode_returns) >= num_episodes:
            return


def np_rng_state(rng: np.random.Generator) -> dict:
    """A numpy Generator's state as plain data (safe for weights_only checkpoints)."""
    return rng.bit_generator.state


def set_np_rng_state(rng: np.random.Generator, state: dict) -> None:
    rng.bit_generator.state = state
