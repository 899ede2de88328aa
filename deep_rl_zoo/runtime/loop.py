"""The distributed training loop: the learner consumes actor messages from any `ActorRuntime`."""

import math
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from deep_rl_zoo import trackers
from deep_rl_zoo.main_loop import (
    LEARNER_LOG_INTERVAL,
    SOLVED_MIN_EPISODES,
    LoopState,
    RunClock,
    StopRequest,
    WarmUpNotice,
    evaluate_iteration,
    finish_iteration,
    phase_progress_bar,
    save_interrupted_and_stop,
)
from deep_rl_zoo.runtime.interface import (
    ACTOR_TIME_KEYS,
    ActorMessage,
    ActorRuntime,
    DistributedLearner,
    TimeSpent,
)
from deep_rl_zoo.types_ import Agent

MAX_LOGGED_ACTORS = 8  # actors whose own curves go to TensorBoard (actor_0/ ... actor_7/)


def run_distributed_training_iterations(
    *,
    num_iterations: int,
    num_train_steps: int,
    num_eval_steps: int,
    learner: DistributedLearner,
    runtime: ActorRuntime,
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
    """Iterations of distributed training, then greedy evaluation in the learner, then a checkpoint.

    When `stop` is requested (`main_loop.stop_on_signals`), the learner finishes its learner step (or
    leaves the evaluation), saves an interrupted checkpoint and raises `RunInterrupted`; the actors'
    data not yet learned from is dropped, and --resume finishes the iteration with fresh actors.

    A training phase consumes actor messages for whole learner steps and ends on the learner-step boundary
    nearest to `num_train_steps` env steps (summed over all actors; see `training_phase_done`), so it
    can differ from it by up to half a learner step's worth of env steps; the first phase that differs
    says so once on the console. Actors keep their episodes running across iterations, as in the
    single-process loop.
    While the learner evaluates, actors of synchronous algorithms wait for new parameters and
    asynchronous ones send up to their in-flight cap and then wait: no message is lost or
    double-counted. Every env step an actor reports counts on the x-axis; an on-policy learner is given
    only payloads of the newest parameters (others arise only after an actor restart, and are dropped).
    """
    if stop is not None and hasattr(learner, "should_stop"):
        learner.should_stop = lambda: stop.requested  # learners owing many gradient steps stop between two
    eval_stats = trackers.PhaseStats()
    last_learner_log = loop_state.train_env_steps // LEARNER_LOG_INTERVAL
    warm_up = WarmUpNotice(learner.statistics)
    phase_length_noted = False
    loop_statistics: dict[str, float] = {}
    clock = RunClock(loop_state)
    for iteration in range(loop_state.next_iteration, num_iterations):
        done, train_returns, _ = loop_state.take_interrupted_iteration()
        phase_start_steps = loop_state.train_env_steps - done
        speed_start_steps, phase_start_time = loop_state.train_env_steps, time.perf_counter()
        phase_learner_steps, last_step_env_steps = 0, 0
        times = PhaseTimes()
        with phase_progress_bar(iteration, "train", num_train_steps, show_progress, initial=done) as bar:
            while not training_phase_done(
                loop_state.train_env_steps - phase_start_steps, num_train_steps, last_step_env_steps
            ):
                if stop is not None and stop.requested:
                    break
                step_start_steps = loop_state.train_env_steps
                payloads, lags, num_messages = [], [], 0
                while num_messages < learner.messages_per_step:
                    with times.waiting:
                        message = runtime.get()
                    times.add_actor(message.statistics)
                    _log_restarts(runtime, logger, loop_state.train_env_steps)
                    loop_state.train_env_steps += message.num_env_steps
                    bar.update(message.num_env_steps)
                    _log_actor_message(logger, message, loop_state.train_env_steps, train_returns)
                    lag = runtime.parameter_version - message.parameter_version
                    if learner.on_policy and lag != 0:
                        continue  # collected before the last update (a replaced actor's): off-policy
                    num_messages += 1
                    # An actor of N envs (--num_envs) sends its N unrolls as one list.
                    batch = message.payload if isinstance(message.payload, list) else [message.payload]
                    payloads.extend(batch)
                    lags.append(lag)
                with times.learning:
                    learner.learn(payloads)
                    runtime.publish(learner.shared_module)
                phase_learner_steps += 1
                last_step_env_steps = loop_state.train_env_steps - step_start_steps
                if warm_up.pending:
                    warm_up.check(learner.statistics, loop_state.train_env_steps)
                if not learner.on_policy:
                    loop_statistics["mean_parameter_lag"] = float(np.mean(lags))  # updates behind
                # By env steps, not learner steps: a PPO step takes ~1k env steps, an IMPALA one ~32.
                if loop_state.train_env_steps // LEARNER_LOG_INTERVAL > last_learner_log:
                    last_learner_log = loop_state.train_env_steps // LEARNER_LOG_INTERVAL
                    logger.scalars(
                        "learner", {**learner.statistics, **loop_statistics}, loop_state.train_env_steps
                    )
        train_steps = loop_state.train_env_steps - phase_start_steps
        if stop is not None and stop.requested:
            clock.tick()
            save_interrupted_and_stop(
                save_checkpoint, iteration, train_steps, train_returns, [], loop_state, stop
            )
        if train_steps != num_train_steps and not phase_length_noted and phase_learner_steps > 0:
            phase_length_noted = True
            tqdm.write(
                f"note: a training phase ends between two learner steps (here {phase_learner_steps} of about "
                f"{train_steps / phase_learner_steps:,.0f} env steps each), so iteration {iteration} trained "
                f"{train_steps:,} env steps for --num_train_steps={num_train_steps:,}"
            )
        speed_steps = loop_state.train_env_steps - speed_start_steps
        train_steps_per_second = speed_steps / max(time.perf_counter() - phase_start_time, 1e-9)
        phase_times = times.statistics()

        eval_summary = evaluate_iteration(
            iteration, num_eval_steps, eval_env, eval_agent, seed, show_progress, eval_stats, loop_state, stop
        )
        clock.tick()
        if stop is not None and stop.requested:
            save_interrupted_and_stop(
                save_checkpoint, iteration, train_steps, train_returns, [], loop_state, stop
            )
        solved = finish_iteration(
            iteration=iteration,
            train_mean_return=float(np.mean(train_returns)) if train_returns else math.nan,
            train_num_episodes=len(train_returns),
            train_steps_per_second=train_steps_per_second,
            eval_summary=eval_summary,
            learner_statistics={**learner.statistics, **loop_statistics, **phase_times},
            logger=logger,
            save_checkpoint=save_checkpoint,
            loop_state=loop_state,
            solved_return=solved_return,
            solved_min_episodes=solved_min_episodes,
        )
        if solved:
            break
    return loop_state


class PhaseTimes:
    """Where a training phase's wall-clock went, learner and actors, for finding the idle cores.

    The learner waits for actor messages (`runtime.get`, which also reads and unpickles them) or learns
    (the update and publishing its parameters; the rest, bookkeeping and logging, is neither). The
    actors report their own split with each message (`interface.ActorLinkBase.send`): waiting for
    parameters, sending, acting. Reported at the phase's end as shares of the time, with the cores each
    process kept busy meanwhile (CPU seconds over wall seconds: 2.0 is two busy threads):

        waiting_share, learning_share        the learner's, of the phase's wall-clock
        cores_while_waiting                  the learner process's, receiving messages
        cores_while_learning                 the learner process's, during its updates
        actor_waiting_share, actor_sending_share, actor_cores_while_acting
                                             summed over every actor's messages in the phase

    A synchronous learner (PPO, A2C) and its actors take turns, so their waiting shares say which side
    the other waits for. The actors' figures are those of the messages received in the phase, so the
    first ones carry the end of the iteration before (its evaluation and checkpoint) too. While the
    learner waits, its cores include torch's threads still spinning after an update (OpenMP), so
    `cores_while_waiting` is a bound, and noise where the waiting share is near 0. NaN where the phase
    had no such time (no update, or no actor reported).
    """

    def __init__(self):
        self._start = time.perf_counter()
        self.waiting, self.learning = TimeSpent(), TimeSpent()
        self._actor = dict.fromkeys(ACTOR_TIME_KEYS, 0.0)

    def add_actor(self, statistics: dict) -> None:
        """Adds one message's actor times (a message without them, e.g. from a test's stand-in, adds 0)."""
        for key in ACTOR_TIME_KEYS:
            self._actor[key] += statistics.get(key, 0.0)

    def statistics(self) -> dict[str, float]:
        wall = time.perf_counter() - self._start
        actor = self._actor
        actor_wall = actor["seconds_waiting"] + actor["seconds_sending"] + actor["seconds_acting"]
        return {
            "waiting_share": _ratio(self.waiting.wall, wall),
            "learning_share": _ratio(self.learning.wall, wall),
            "cores_while_waiting": _ratio(self.waiting.cpu, self.waiting.wall),
            "cores_while_learning": _ratio(self.learning.cpu, self.learning.wall),
            "actor_waiting_share": _ratio(actor["seconds_waiting"], actor_wall),
            "actor_sending_share": _ratio(actor["seconds_sending"], actor_wall),
            "actor_cores_while_acting": _ratio(actor["cpu_seconds_acting"], actor["seconds_acting"]),
        }


def _ratio(part: float, whole: float) -> float:
    return part / whole if whole > 0 else math.nan


def training_phase_done(env_steps_done: int, num_train_steps: int, last_learner_step_env_steps: int) -> bool:
    """Whether a distributed training phase stops here, between two learner steps.

    A learner step consumes whole actor messages, so the phase stops at the step boundary nearest to
    `num_train_steps`: once it is reached, or once less than half of a learner step (sized like the last
    one) is missing. Always stopping after it instead overshoots by almost a whole step when steps are a
    little short: 4 actors x 256-step unrolls hold 1,024 transitions, but the pairs across an episode's
    reset are not env steps, so two steps bring ~2,040 env steps and `--num_train_steps=2048` took a third
    (2,967 env steps, and PPO's annealed learning rate reached 0 after two thirds of the run).
    """
    missing = num_train_steps - env_steps_done
    return missing <= 0 or 2 * missing < last_learner_step_env_steps


def _log_restarts(runtime: ActorRuntime, logger: trackers.RunLogger, step: int) -> None:
    for restart in runtime.take_restarts():
        tqdm.write(
            f"actor {restart.actor_index} {restart.how}; restarted it with seed {restart.seed} "
            f"(restart {restart.restart_count} of this run)"
        )
        logger.scalars("runtime", {"actor_restarts": restart.restart_count}, step)
        if restart.actor_index < MAX_LOGGED_ACTORS:
            logger.scalars(f"actor_{restart.actor_index}", {"restarted": 1.0}, step)


def _log_actor_message(
    logger: trackers.RunLogger, message: ActorMessage, step: int, train_returns: list[float]
) -> None:
    for episode in message.episodes:
        if "terminal_frame" in episode:  # every N-th game of this actor, with --debug_screenshots_interval
            frame, number = episode.pop("terminal_frame"), episode.pop("terminal_frame_episode")
            logger.screenshot(f"actor_{message.actor_index}", frame, step, number)
        train_returns.append(episode["episode_return"])
        logger.scalars("train", episode, step)
        if message.actor_index < MAX_LOGGED_ACTORS:
            logger.scalars(f"actor_{message.actor_index}", episode, step)
    if message.actor_index < MAX_LOGGED_ACTORS:
        # The actor's time split goes into the phase's figures (PhaseTimes), not a curve per message.
        statistics = {k: v for k, v in message.statistics.items() if k not in ACTOR_TIME_KEYS}
        statistics["parameter_version"] = message.parameter_version
        logger.scalars(f"actor_{message.actor_index}", statistics, step)
