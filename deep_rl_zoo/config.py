"""Configuration dataclasses shared by every run script, and the absl flags built from them.

Each run script names one frozen dataclass and a dict of defaults; `run_script` turns every field into
an absl flag (its help string is the field's `help`), parses the command line, builds the config and
calls `main(config)`. Tests build the dataclass directly and call `main` without any flag state.
"""

import dataclasses
import json
import math
import os
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from deep_rl_zoo.errors import ConfigError, exit_on_error, require

_C = TypeVar("_C")


# The smallest frame the Nature CNN's three convolutions (8 stride 4, 4 stride 2, 3 stride 1) accept.
MIN_FRAME_SIZE = 36


def require_frame_size(config: Any) -> None:
    """--environment_height/width must be positive and fit the Nature CNN (checked on every run, as
    whether the env has image observations is known only once it is made)."""
    for name in ("environment_height", "environment_width"):
        value = getattr(config, name)
        require(
            value >= MIN_FRAME_SIZE,
            f"--{name} must be at least {MIN_FRAME_SIZE} (the Nature CNN's smallest frame), got {value}",
        )


def field(default: Any, help: str) -> Any:  # noqa: A002 - `help` reads best at the call sites
    """A dataclass field with a help string (shown by `--help`)."""
    return dataclasses.field(default=default, metadata={"help": help})


def parse_env_kwargs(text: str) -> dict[str, Any]:
    """`--env_kwargs`: the JSON object of the env constructor's keyword arguments; '' is none."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--env_kwargs is not valid JSON ({e.msg} at character {e.pos}): {text}") from None
    require(isinstance(value, dict), f'--env_kwargs must be a JSON object such as {{"size": 8}}, got {text}')
    return value


# Fields that only make sense for Atari; classic-control scripts do not offer them as flags.
ATARI_FIELDS = frozenset(
    {
        "environment_height",
        "environment_width",
        "environment_frame_skip",
        "environment_frame_stack",
        "noop_max",
        "sticky_action_probability",
        "terminal_on_life_loss",
        "clip_reward",
    }
)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Flags shared by every training script. Step counts are env steps (agent decisions)."""

    environment_name: str = field(
        "CartPole-v1",
        "Gymnasium id, a short Atari name such as Pong, or module:id for an env of your own (the module's "
        "import registers it), e.g. mypkg.envs:Maze-v0.",
    )
    env_kwargs: str = field(
        "", "The env constructor's keyword arguments as a JSON object, e.g. '{\"size\": 8}'; empty: none."
    )
    seed: int = field(1, "Seed of every random number generator of the run.")
    num_iterations: int = field(10, "Iterations of training then evaluation; a checkpoint after each.")
    num_train_steps: int = field(5000, "Env steps of training per iteration.")
    num_eval_steps: int = field(5000, "Env steps of greedy evaluation per iteration (whole episodes count).")
    max_episode_steps: int = field(0, "Cut episodes after this many env steps; 0 keeps the env's own limit.")
    num_envs: int = field(
        1,
        "Envs stepped together with one batched forward (replay Q agents: per process; distributed "
        "agents: per actor). Atari uses ale-py's C++ vector env when > 1.",
    )
    environment_height: int = field(84, "Atari frame height after resizing.")
    environment_width: int = field(84, "Atari frame width after resizing.")
    environment_frame_skip: int = field(4, "Atari emulator frames per env step (max over the last two).")
    environment_frame_stack: int = field(4, "Atari frames stacked into one observation.")
    noop_max: int = field(30, "Atari: up to this many no-op actions after each reset.")
    sticky_action_probability: float = field(0.0, "Atari: probability of repeating the previous action.")
    terminal_on_life_loss: bool = field(True, "Atari: a lost life is a terminal state for learning only.")
    clip_reward: bool = field(True, "Atari: learn from the sign of the reward (statistics stay raw).")
    checkpoint_dir: str = field(
        "./checkpoints",
        "Root of the run checkpoint folders, each named like the run's folder under --runs_dir.",
    )
    results_csv_path: str = field(
        "", "CSV file that gets one row per iteration; default: inside the run folder."
    )
    use_tensorboard: bool = field(True, "Write TensorBoard logs under ./runs.")
    runs_dir: str = field("./runs", "Root folder of the TensorBoard run folders.")
    tag: str = field("", "Suffix of the run's folder names (runs/ and checkpoints/), e.g. for a sweep.")
    debug_screenshots_interval: int = field(
        0, "Save the terminal frame of every N-th training episode; 0: off."
    )
    resume: bool = field(
        False, "Continue the newest run of this agent, environment and --tag from its latest checkpoint."
    )
    stop_when_solved: bool = field(True, "Stop once the evaluation mean reaches the env's reward threshold.")
    target_return: float | None = field(
        None,
        "Stop at the first evaluation whose mean over whole episodes (at least 10, or as many as "
        "--num_eval_steps can hold) reaches this return, in place of the env's reward threshold (Atari "
        "games have none); unset: --stop_when_solved decides.",
    )
    device: str = field("auto", "Learner device: auto (CUDA if available), cpu, cuda or cuda:N.")
    num_threads: int = field(
        0,
        "torch CPU threads of the learner's process; 0: auto, every CPU core on Atari (less one per actor "
        "for a learner that learns while its actors act, where there is a core per actor), 1 elsewhere "
        "(small networks are fastest on one).",
    )
    bfloat16: bool | None = field(
        None,
        "Atari: the learner's Nature-CNN torso computes in bfloat16 autocast (weights, heads and losses "
        "stay float32). Faster where the CPU or GPU multiplies bfloat16 natively (avx512_bf16, AMX), slower "
        "elsewhere; unset: on where the learner's device has it natively (a resumed run keeps its own "
        "choice), --nobfloat16 for float32; see benchmarks/README.md.",
    )
    show_progress: bool = field(True, "Show a progress bar on the console.")

    def __post_init__(self):
        parse_env_kwargs(self.env_kwargs)
        require(self.num_threads >= 0, f"--num_threads must be >= 0 (0: auto), got {self.num_threads}")
        if self.num_threads == 0:
            object.__setattr__(self, "num_threads", self.auto_num_threads(available_cpu_cores()))
        for name in ("num_iterations", "num_train_steps"):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        require_frame_size(self)
        for name in ("environment_frame_skip", "environment_frame_stack", "num_envs"):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        for name in ("num_eval_steps", "max_episode_steps", "noop_max", "debug_screenshots_interval"):
            require(getattr(self, name) >= 0, f"--{name} must be >= 0, got {getattr(self, name)}")
        require(
            self.target_return is None or math.isfinite(self.target_return),
            f"--target_return must be a finite number, got {self.target_return}",
        )
        require(
            self.target_return is None or self.num_eval_steps > 0,
            "--target_return needs evaluations: --num_eval_steps must be positive",
        )
        require(
            0.0 <= self.sticky_action_probability <= 1.0,
            f"--sticky_action_probability must be in [0, 1], got {self.sticky_action_probability}",
        )

    def auto_num_threads(self, cores: int) -> int:
        """--num_threads=0: a one-process run acts and learns in turn, so on Atari its learner (the Nature
        CNN) may use every core; classic tasks' small networks are fastest on one thread."""
        return cores if is_atari_name(self.environment_name) else 1


def trained_config(
    config_class: type[_C],
    checkpoint: Mapping | None,
    old_checkpoint_defaults: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> _C:
    """The config a checkpoint was trained with, to rebuild its networks for evaluation: the saved
    flags over `config_class`'s defaults (lists back to tuples, as the checkpoint's JSON-like config
    stores them; flags the class no longer has are dropped), or the defaults without a checkpoint.
    `old_checkpoint_defaults` gives the value of a field that checkpoints saved before it existed must
    get (when that is not today's default); `overrides` are set whatever was saved (for example the
    environment being evaluated)."""
    saved = {**(old_checkpoint_defaults or {}), **checkpoint["config"]} if checkpoint is not None else {}
    names = {f.name for f in dataclasses.fields(config_class)}
    values = {name: tuple(value) if isinstance(value, list) else value for name, value in saved.items()}
    return config_class(**{name: value for name, value in {**values, **overrides}.items() if name in names})


def available_cpu_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def is_atari_name(environment_name: str) -> bool:
    """Whether the name is an Atari game; an unknown name is not (the run rejects it later, in one line)."""
    from deep_rl_zoo import gym_env  # lazily: it imports gymnasium

    try:
        return gym_env.is_atari(environment_name)
    except ConfigError:
        return False


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Flags of every `eval_agent` script; a value-based agent's add `QEvalConfig`'s exploration, a
    policy agent's `PolicyEvaluation`'s sampling."""

    environment_name: str = field(
        "CartPole-v1",
        "Gymnasium id, a short Atari name such as Pong, or module:id for an env of your own (the module's "
        "import registers it), e.g. mypkg.envs:Maze-v0.",
    )
    env_kwargs: str = field(
        "", "The env constructor's keyword arguments as a JSON object, e.g. '{\"size\": 8}'; empty: none."
    )
    seed: int = field(1, "Seed of the environment and of the exploration.")
    num_episodes: int = field(5, "Whole episodes to play per iteration (unless --num_eval_steps is set).")
    num_eval_steps: int = field(
        0, "> 0: per iteration, play the whole episodes that fit this many env steps (as in training)."
    )
    num_iterations: int = field(1, "Repeat the evaluation this many times (each with the next seed).")
    max_episode_steps: int = field(0, "Cut episodes after this many env steps; 0 keeps the env's own limit.")
    environment_height: int = field(84, "Atari frame height after resizing.")
    environment_width: int = field(84, "Atari frame width after resizing.")
    environment_frame_skip: int = field(4, "Atari emulator frames per env step (max over the last two).")
    environment_frame_stack: int = field(4, "Atari frames stacked into one observation.")
    noop_max: int = field(30, "Atari: up to this many no-op actions after each reset.")
    sticky_action_probability: float = field(0.0, "Atari: probability of repeating the previous action.")
    load_checkpoint_file: str = field(
        "",
        "Checkpoint file or run folder to play; 'latest' or 'best' (best greedy evaluation) picks from "
        "the newest run in --checkpoint_dir.",
    )
    checkpoint_dir: str = field("./checkpoints", "Where 'latest' and 'best' look for runs.")
    tag: str = field("", "With 'latest' or 'best': only runs trained with this --tag ('' looks at all).")
    recording_video_dir: str = field(
        "./recordings", "Folder of the mp4 of the first episode; '' records none."
    )
    device: str = field("auto", "Device of the network: auto, cpu, cuda or cuda:N.")
    num_threads: int = field(1, "torch CPU threads of this process.")

    def __post_init__(self):
        parse_env_kwargs(self.env_kwargs)
        require_frame_size(self)
        require(self.num_episodes > 0, f"--num_episodes must be positive, got {self.num_episodes}")
        require(self.num_iterations > 0, f"--num_iterations must be positive, got {self.num_iterations}")
        require(self.num_eval_steps >= 0, f"--num_eval_steps must be >= 0, got {self.num_eval_steps}")
        require(
            self.max_episode_steps >= 0, f"--max_episode_steps must be >= 0, got {self.max_episode_steps}"
        )


@dataclasses.dataclass(frozen=True)
class QEvalConfig(EvalConfig):
    """Flags of a value-based agent's `eval_agent` script: its greedy actor explores with epsilon."""

    eval_exploration_epsilon: float = field(
        -1.0, "Probability of a random action; -1: 0.01 on Atari (breaks no-op loops), 0 otherwise."
    )

    def __post_init__(self):
        super().__post_init__()
        require(
            self.eval_exploration_epsilon == -1.0 or 0.0 <= self.eval_exploration_epsilon <= 1.0,
            f"--eval_exploration_epsilon must be in [0, 1] (or -1 for auto), got {self.eval_exploration_epsilon}",
        )


@dataclasses.dataclass(frozen=True)
class PolicyEvaluation:
    """How a policy agent's evaluation picks actions: one flag shared by its training config and its
    `eval_agent` config (mixed in before their base, e.g. `class PpoConfig(PolicyEvaluation, ...)`)."""

    eval_sample_actions: bool | None = field(
        None,
        "Evaluate with actions sampled from the policy instead of its most probable one (a Gaussian's "
        "mean); unset: sample on Atari, where an arg-max policy can stall for good (e.g. never serve "
        "again in Breakout after a lost life), most probable elsewhere.",
    )

    def evaluation_samples_actions(self) -> bool:
        """Whether evaluation samples: the flag, or when unset whether the environment is an Atari game."""
        if self.eval_sample_actions is not None:
            return self.eval_sample_actions
        from deep_rl_zoo import gym_env  # lazily: it imports gymnasium

        return gym_env.is_atari(self.environment_name)


@dataclasses.dataclass(frozen=True)
class PolicyEvalConfig(PolicyEvaluation, EvalConfig):
    """Flags of a policy agent's `eval_agent` script."""


def _flag_definer(flags_module, annotation):
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation):
        # `bool | None`: unset (None) means "decide for me"; --flag / --noflag say True / False.
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        origin = typing.get_origin(annotation)
    if annotation is bool:
        return flags_module.DEFINE_boolean
    if annotation is int:
        return flags_module.DEFINE_integer
    if annotation is float:
        return flags_module.DEFINE_float
    if annotation is str:
        return flags_module.DEFINE_string
    if origin is tuple:
        return flags_module.DEFINE_list
    raise TypeError(f"no flag type for {annotation}")


def _check_script_fits_environment(config: Any) -> None:
    """A script started with `python -m` checks that its environment is one it is for (see gym_env)."""
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if main_spec is None or not hasattr(config, "environment_name"):
        return
    from deep_rl_zoo import gym_env  # lazily: it imports gymnasium

    gym_env.check_script_fits_environment(
        main_spec.name, config.environment_name, parse_env_kwargs(getattr(config, "env_kwargs", ""))
    )


def run_script(
    config_cls: type[_C],
    defaults: Mapping[str, Any],
    main: Callable[[_C], Any],
    exclude: frozenset[str] = frozenset(),
) -> None:
    """Defines one absl flag per config field (minus `exclude`), parses argv and calls `main(config)`."""
    from absl import app, flags

    hints = typing.get_type_hints(config_cls)
    names = []
    flag_defaults = {}  # name -> default, for translating the original zoo's flags
    for f in dataclasses.fields(config_cls):
        if f.name in exclude:
            continue
        default = defaults.get(f.name, f.default)
        if typing.get_origin(hints[f.name]) is tuple:
            default = [str(x) for x in default]
        # Registered under the script's own module so that `--help` lists them.
        _flag_definer(flags, hints[f.name])(
            f.name, default, f.metadata.get("help", f.name), module_name=sys.argv[0]
        )
        names.append(f.name)
        flag_defaults[f.name] = defaults.get(f.name, f.default)

    argv = _parse_command_line(flags, config_cls, flag_defaults)

    @exit_on_error
    def _main(argv):
        if len(argv) > 1:
            raise ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
        values = dict(defaults)
        for name in names:
            value = flags.FLAGS[name].value
            if typing.get_origin(hints[name]) is tuple:
                element = typing.get_args(hints[name])[0]
                try:
                    value = tuple(element(x) for x in value)
                except ValueError:
                    raise ConfigError(
                        f"--{name} must be a comma-separated list of {element.__name__}"
                    ) from None
            values[name] = value
        config = config_cls(**values)
        _check_script_fits_environment(config)
        main(config)  # absl would print a returned value and exit 1

    app.run(_main, argv=argv)


@exit_on_error
def _parse_command_line(flags_module, config_cls: type, flag_defaults: Mapping[str, Any]) -> list[str]:
    """sys.argv with the original zoo's flags translated (`original_zoo`), after one trial parse that
    turns absl's multi-line flag errors into one line (the real parse is app.run's)."""
    from absl import app

    from deep_rl_zoo import original_zoo

    script = _script_name()
    context = original_zoo.Context(
        script=script,
        flags=flag_defaults,
        atari="environment_height" in flag_defaults,
        evaluation=issubclass(config_cls, EvalConfig),
    )
    argv = original_zoo.translate_argv(sys.argv, context)
    app.define_help_flags()
    try:
        flags_module.FLAGS(argv)
    except flags_module.UnrecognizedFlagError as e:
        raise ConfigError(
            original_zoo.unknown_flag_message(e.flagname, script, list(flag_defaults))
        ) from None
    except flags_module.Error as e:
        raise ConfigError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    flags_module.FLAGS.unparse_flags()
    return argv


def _script_name() -> str:
    """`deep_rl_zoo.dqn.run_classic` when run with -m (else the file name)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return spec.name if spec is not None and spec.name else sys.argv[0]
