"""A run's folders: the fresh or resumed run's name, its log folder and `config.txt`, the checkpoints it
writes (and the replay beside them), and what `--resume` restores from them."""

import dataclasses
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from deep_rl_zoo import checkpoint, main_loop, trackers
from deep_rl_zoo.config import RunConfig, field
from deep_rl_zoo.errors import CheckpointError, ConfigError, DamagedFileError, DiskFullError, ZooError


class ResumePoint(NamedTuple):
    payload: dict  # the checkpoint's contents
    path: str  # the checkpoint file
    checkpoint_folder: str  # the run's checkpoint folder: the resumed run keeps writing there


def load_resume_checkpoint(config: RunConfig, agent_name: str, environment_id: str) -> ResumePoint | None:
    """For --resume, the newest run with this agent, environment and --tag; else None (a fresh run).

    Within that run, the newest intact checkpoint: a damaged newer one (truncated, empty, flipped bits) is
    skipped with one line naming it, so a torn file never stops a resume that an older one can serve.
    """
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
    path, payload, skipped = checkpoint.load_newest_intact(
        os.path.dirname(latest), agent_name, environment_id, file_environment_name=config.environment_name
    )
    for reason in skipped:
        print(f"--resume: skipping a damaged checkpoint: {reason}", file=sys.stderr)
    print(f"resuming from {path}" + (" (the newest intact checkpoint)" if skipped else ""), file=sys.stderr)
    return ResumePoint(payload, path, os.path.dirname(path))


# Flags that say where a run writes and how long it goes on, never what its agent holds.
_RUN_CONTROL_FLAGS = frozenset(
    {
        "resume",
        "num_iterations",
        "checkpoint_dir",
        "runs_dir",
        "results_csv_path",
        "use_tensorboard",
        "show_progress",
        "tag",
        "load_checkpoint_file",
        "debug_screenshots_interval",
    }
)


def _plain(value: Any) -> Any:
    """A flag's value as the checkpoint keeps it (tuples may come back as lists)."""
    return tuple(_plain(v) for v in value) if isinstance(value, list | tuple) else value


def changed_flags(config: RunConfig, saved_config: dict) -> list[str]:
    """`--name=now (was saved)` for each flag of the agent that differs from the checkpoint's."""
    now = dataclasses.asdict(config)
    return [
        f"--{name}={_plain(now[name])} (was {_plain(saved)})"
        for name, saved in saved_config.items()
        if name in now and name not in _RUN_CONTROL_FLAGS and _plain(now[name]) != _plain(saved)
    ]


def flags_differing_from_checkpoint(saved: dict, now: dict, names: Iterable[str]) -> list[str]:
    """`--name=<saved> in the checkpoint, <now> now` for each of `names` the two configs both hold and
    disagree on (the reasons a checkpoint's networks may not fit)."""
    return [
        f"--{name}={_plain(saved[name])} in the checkpoint, {_plain(now[name])} now"
        for name in names
        if name in saved and name in now and _plain(now[name]) != _plain(saved[name])
    ]


def does_not_fit(config: RunConfig, resume: ResumePoint, what: str, error: Exception) -> CheckpointError:
    """The one-line refusal of a checkpoint whose `what` does not fit this run, naming the flags that
    differ from the checkpoint's (one of them is the reason) and both of their values."""
    now = dataclasses.asdict(config)
    differing = flags_differing_from_checkpoint(
        resume.payload.get("config", {}), now, [name for name in now if name not in _RUN_CONTROL_FLAGS]
    )
    detail = str(error).strip().splitlines()[0][:150] if str(error).strip() else type(error).__name__
    if differing:
        return CheckpointError(
            f"--resume: {resume.path}'s {what} does not fit this run's flags: {'; '.join(differing)}; resume "
            f"with the checkpoint's values (its run's config.txt) ({detail})"
        )
    return CheckpointError(f"--resume: {resume.path}'s {what} does not fit this run ({detail})")


def restore_or_start(config: RunConfig, agent: Any, resume: ResumePoint | None) -> main_loop.LoopState:
    """Loads the agent's state and the loop's position from a resume checkpoint (and, with
    --checkpoint_replay, the replay saved beside it), or starts afresh.

    The run takes the flags given now: one that changes what the agent holds (a network's sizes, NGU's
    --num_actors) is refused in one line naming it, before any work; any other (a learning rate, most
    agents' --num_actors) applies from the resumed iteration on, and is listed in a note.
    """
    if resume is None:
        return main_loop.LoopState()
    try:
        agent.load_state_dict(resume.payload["agent"])
    except ZooError:
        raise  # an agent's own one-line refusal (NGU's --num_actors)
    except (RuntimeError, ValueError, KeyError, IndexError, TypeError) as e:
        raise does_not_fit(config, resume, "saved agent", e) from None
    changed = changed_flags(config, resume.payload.get("config", {}))
    if changed:
        print(f"--resume: flags changed since the checkpoint: {', '.join(changed)}", file=sys.stderr)
    loop_state = main_loop.LoopState.from_state_dict(resume.payload["loop"])
    if loop_state.next_iteration >= config.num_iterations:
        raise ConfigError(
            f"--resume: the run already finished {loop_state.next_iteration} of --num_iterations="
            f"{config.num_iterations} iterations; raise --num_iterations to train further"
        )
    if getattr(config, "checkpoint_replay", False):
        restore_replay(config, agent, resume)
    return loop_state


def open_run(
    config: RunConfig,
    agent_name: str,
    loop_state: main_loop.LoopState,
    resume: ResumePoint | None,
    on_log: trackers.LogCallback | None = None,
) -> tuple[trackers.RunLogger, str]:
    """The run's logger (which also hands its scalars to `on_log`) and checkpoint folder: the resumed
    run's, or a new pair sharing one fresh name.

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
        on_log=on_log,
    )
    return logger, checkpoint_folder


def checkpoint_replay_field() -> Any:
    """The `checkpoint_replay` flag of the configs of agents with a `replay_contents` (a
    `replay.ReplayContents`): the replay Q agents and SAC. See `checkpoint_saver`."""
    return field(
        False,
        "Also save the replay (each Atari frame once) beside every checkpoint, so that --resume "
        "continues exactly; only the newest iteration's replay file is kept.",
    )


def restore_replay(config: RunConfig, agent: Any, resume: ResumePoint) -> None:
    """--resume --checkpoint_replay: loads the replay file beside the resumed checkpoint, if there is one; a
    damaged one is named in one line and the replay starts empty (the agent refills it)."""
    path = checkpoint.replay_path(resume.path)
    if not os.path.isfile(path):
        print(f"--checkpoint_replay: no replay file {path}; the replay starts empty", file=sys.stderr)
        return
    try:
        agent.replay_contents.load_state_arrays(checkpoint.load_arrays(path))
    except DamagedFileError as e:
        print(f"--checkpoint_replay: {e}; the replay starts empty", file=sys.stderr)
        return
    except (ValueError, KeyError) as e:
        raise does_not_fit(config, resume, "replay file", e) from None
    print(f"restored {agent.replay_contents.replay.size} transitions from {path}", file=sys.stderr)


def checkpoint_saver(
    config: RunConfig, agent_name: str, environment_id: str, agent: Any, checkpoint_folder: str
) -> Callable[[int, main_loop.LoopState], str | None]:
    """save(iteration, loop_state, interrupted=False) -> path: writes `<AGENT>_<env>_<iteration>.ckpt` with
    the run's flags, and copies it to `<AGENT>_<env>_best.ckpt` when this iteration's evaluation is the
    best so far; `interrupted`: `<AGENT>_<env>_<iteration>_interrupted.ckpt`, the iteration stopped
    part-way, which the end of that iteration deletes again.

    With `config.checkpoint_replay`, the agent's replay goes first to `<checkpoint name>.replay.npz`
    (so a checkpoint never exists without its replay), then the checkpoint, then the earlier replay
    files are deleted (an Atari replay takes GBs).

    A full disk (or quota, or file-size limit) skips the save: one warning line naming the file and the
    last good checkpoint, which is left intact (files are written to a temporary name, then renamed) and
    is what --resume finds; the run goes on, and the next iteration tries again. `save` then returns
    None. Stopping instead would lose the training since that checkpoint for a problem that freeing
    space fixes while the run continues.
    """

    def save(iteration: int, state: main_loop.LoopState, interrupted: bool = False) -> str | None:
        env_name = config.environment_name
        if interrupted:
            path = checkpoint.interrupted_checkpoint_path(checkpoint_folder, agent_name, env_name, iteration)
        else:
            path = checkpoint.checkpoint_path(checkpoint_folder, agent_name, env_name, iteration)
        try:
            if getattr(config, "checkpoint_replay", False):
                checkpoint.save_arrays(checkpoint.replay_path(path), agent.replay_contents.state_arrays())
            checkpoint.save_checkpoint(
                path,
                agent_name,
                environment_id,
                iteration,
                agent.state_dict(),
                state.state_dict(),
                config=dataclasses.asdict(config),
            )
        except DiskFullError as e:
            if getattr(config, "checkpoint_replay", False) and os.path.exists(checkpoint.replay_path(path)):
                os.remove(checkpoint.replay_path(path))  # GBs, and no checkpoint of its own
            last = checkpoint.find_latest_checkpoint(checkpoint_folder, agent_name, env_name)
            print(
                f"warning: {e}; skipped saving iteration {iteration}"
                + (f"; the last good checkpoint, {last}, is intact and --resume continues it" if last else "")
                + "; the run goes on and saves again after the next iteration",
                file=sys.stderr,
            )
            return None
        if state.best_iteration == iteration and not interrupted:
            best = checkpoint.best_checkpoint_path(checkpoint_folder, agent_name, env_name)
            try:
                checkpoint.copy_checkpoint(path, best)
            except DiskFullError as e:
                print(f"warning: {e}; {best} still holds an earlier best iteration", file=sys.stderr)
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


def _write_config(run_dir: str, config: Any, agent_name: str) -> None:
    """Appends the run's flags (again on every resume) to `config.txt` as `name=value` lines."""
    with open(os.path.join(run_dir, "config.txt"), "a") as f:
        f.write(f"agent_name={agent_name}\n")
        for key, value in dataclasses.asdict(config).items():
            f.write(f"{key}={value}\n")
