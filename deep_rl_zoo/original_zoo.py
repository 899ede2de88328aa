"""The original Deep RL Zoo's command lines (github.com/michaelnny/deep_rl_zoo), translated in one place.

Users arrive with the original README's commands. Every flag the original's scripts defined (over its
versions) either means something here, and is rewritten to this project's flag before absl parses the
command line (with one note on stderr), or is refused with one line that says what to type instead:

    --use_lstm                     -> --lstm_size=64 (classic) / 256 (Atari)          IMPALA
    --num_train_frames=N           -> --num_train_steps=N
    --rmsprop_eps=0.01             -> error: IMPALA here uses Adam (--learning_rate, --adam_eps)

An agent package of the original that is not built here (`python -m deep_rl_zoo.rainbow_dqn.run_classic`)
is answered by `MissingAgentFinder` with one line and exit code 2 instead of `No module named ...`;
a package that exists always wins over it.
"""

import difflib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from deep_rl_zoo.errors import ConfigError


class Context(NamedTuple):
    """What a translation may depend on: the script's own flags and their defaults."""

    script: str  # e.g. "deep_rl_zoo.impala.run_classic"
    flags: Mapping[str, Any]  # this script's flag names -> their defaults
    atari: bool  # the script takes Atari frames (its flags include environment_height)
    evaluation: bool  # an eval_agent script


# A translation gets the value as typed (a bool for `--flag`/`--noflag`) and returns the new
# `--name=value` arguments (possibly none), or raises ConfigError with what to type instead.
Translate = Callable[[Any, Context], list[str]]


class Legacy(NamedTuple):
    translate: Translate
    is_bool: bool = False  # `--flag`, `--noflag` and `--flag=true` forms; otherwise it takes a value


def _rename(new: str) -> Legacy:
    def translate(value: Any, context: Context) -> list[str]:
        if new not in context.flags:
            raise ConfigError(f"this is --{new} here, which {context.script} does not have (see --help)")
        return [f"--{new}={value}"]

    return Legacy(translate)


def _rename_bool(new: str) -> Legacy:
    def translate(value: bool, context: Context) -> list[str]:
        if new not in context.flags:
            raise ConfigError(f"this is --{new} here, which {context.script} does not have (see --help)")
        return [f"--{new}" if value else f"--no{new}"]

    return Legacy(translate, is_bool=True)


def _refuse(message: str, is_bool: bool = False) -> Legacy:
    def translate(value: Any, context: Context) -> list[str]:
        raise ConfigError(message)

    return Legacy(translate, is_bool)


def _ignore(note: str, is_bool: bool = False) -> Legacy:
    def translate(value: Any, context: Context) -> list[str]:
        print(f"note: {note}", file=sys.stderr)
        return []

    return Legacy(translate, is_bool)


def _use_lstm(value: bool, context: Context) -> list[str]:
    if "lstm_size" not in context.flags:
        raise ConfigError(f"{context.script} has no LSTM; IMPALA and DRQN do (--lstm_size)")
    # The IMPALA paper's Atari LSTM has 256 units; 64 matches the classic-control torso here.
    return [f"--lstm_size={(256 if context.atari else 64) if value else 0}"]


def _clip_grad(value: bool, context: Context) -> list[str]:
    if "max_grad_norm" not in context.flags:
        raise ConfigError(f"{context.script} does not clip gradients")
    if not value:
        return ["--max_grad_norm=0"]
    if not context.flags["max_grad_norm"]:
        raise ConfigError("--clip_grad: give the norm instead, e.g. --max_grad_norm=10 (0 disables clipping)")
    return []  # clipping at --max_grad_norm is already on


def _q_target_tau(value: str, context: Context) -> list[str]:
    # The original kept tau of the old target (0.995); here the rate is the online network's share.
    if "target_update_rate" not in context.flags:
        raise ConfigError(
            f"this is --target_update_rate (= 1 - q_target_tau) here, which {context.script} lacks"
        )
    return [f"--target_update_rate={1.0 - float(value):g}"]


def _learner_batch_size(value: str, context: Context) -> list[str]:
    if "minibatch_size" in context.flags:  # PPO: the original's batch_size was its minibatch
        return [f"--minibatch_size={value}"]
    raise ConfigError(
        "this agent learns from one unroll per actor per update: the batch is --num_actors x --unroll_length"
    )


def _checkpoint_path(value: str, context: Context) -> list[str]:
    # An early version named the checkpoint *folder* of training and the *file* of evaluation so.
    return [f"--load_checkpoint_file={value}" if context.evaluation else f"--checkpoint_dir={value}"]


def _tensorboard_in_eval(value: bool, context: Context) -> list[str]:
    if context.evaluation:
        print("note: eval_agent prints its returns and writes no TensorBoard log", file=sys.stderr)
        return []
    return [f"--use_tensorboard={str(value).lower()}"]


_NOT_NEEDED = "deep_rl_zoo stores each Atari frame once in replay (FrameStackStore), so nothing is compressed"

FLAGS: dict[str, Legacy] = {
    # Budgets and logging (renamed between the original's versions).
    "num_train_frames": _rename("num_train_steps"),
    "num_eval_frames": _rename("num_eval_steps"),
    "tensorboard": Legacy(_tensorboard_in_eval, is_bool=True),
    "use_tensorboard": Legacy(_tensorboard_in_eval, is_bool=True),  # only eval lacks it
    "debug_screenshots_frequency": _rename("debug_screenshots_interval"),
    "checkpoint_path": Legacy(_checkpoint_path),
    "actors_on_gpu": _ignore("this script runs in one process: --actors_on_gpu has no effect", is_bool=True),
    # Optimisation.
    "clip_grad": Legacy(_clip_grad, is_bool=True),
    "baseline_coef": _rename("value_coef"),
    "rmsprop_momentum": _refuse("IMPALA here uses Adam: tune --learning_rate and --adam_eps instead"),
    "rmsprop_eps": _refuse("this agent uses Adam here: tune --learning_rate and --adam_eps instead"),
    "rmsprop_alpha": _refuse("this agent uses Adam here: tune --learning_rate and --adam_eps instead"),
    # Replay-based Q agents.
    "learn_frequency": _rename("learn_interval"),
    "target_network_update_frequency": _rename("target_network_update_period"),
    "target_net_update_interval": _rename("target_network_update_period"),
    "exploration_epsilon_decay_step": _rename("exploration_epsilon_decay_steps"),
    "uniform_sample_probability": _refuse(
        "prioritized replay here adds --priority_epsilon to every priority instead of uniform noise"
    ),
    "normalize_weights": _ignore("importance weights are always divided by their maximum here", is_bool=True),
    "compress_state": _ignore(_NOT_NEEDED, is_bool=True),
    "obscure_epsilon": _rename("obscure_probability"),  # DRQN's partially observed CartPole
    "huber_param": _rename("huber_delta"),
    "tau_latent_dim": _rename("tau_embedding_size"),
    "tau_embed_size": _rename("tau_embedding_size"),
    "tau_samples_policy": _rename("num_acting_taus"),
    "num_tau_samples": _rename("num_online_taus"),
    "num_tau_prime_samples": _rename("num_target_taus"),
    "num_quantile_samples": _rename("num_acting_taus"),
    # Policy-gradient agents.
    "use_lstm": Legacy(_use_lstm, is_bool=True),
    "update_k": _rename("num_epochs"),
    "clip_epsilon_begin_value": _rename("clip_epsilon"),
    "clip_epsilon_end_value": _refuse(
        "PPO here keeps --clip_epsilon fixed and anneals the learning rate (--anneal_learning_rate)"
    ),
    "q_learning_rate": _refuse("SAC here trains the policy and the Q networks with one --learning_rate"),
    "q_target_tau": Legacy(_q_target_tau),
    "batch_size": Legacy(_learner_batch_size),  # only reached where batch_size is not our own flag
}


def translate_argv(argv: Sequence[str], context: Context) -> list[str]:
    """Rewrites the original zoo's flags in `argv[1:]` to ours; `-h` becomes `--help`.

    Flags this script defines are never touched; a flag unknown to both is left for absl to report.
    """
    out = [argv[0]]
    args = list(argv[1:])
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            out.extend(args[index - 1 :])
            break
        if arg in ("-h", "-?"):
            out.append("--help")
            continue
        parsed = _parse(arg)
        if parsed is None:
            out.append(arg)
            continue
        name, value = parsed
        legacy_name = name[2:] if value is None and name.startswith("no") and name[2:] in FLAGS else name
        if name in context.flags or legacy_name in context.flags or legacy_name not in FLAGS:
            out.append(arg)
            continue
        legacy = FLAGS[legacy_name]
        if legacy.is_bool:
            value = _bool_value(legacy_name, value, negated=legacy_name != name)
        elif value is None:
            if index >= len(args):
                raise ConfigError(f"--{legacy_name} needs a value")
            value, index = args[index], index + 1
            arg = f"{arg} {value}"
        try:
            new = legacy.translate(value, context)
        except ConfigError as e:
            raise ConfigError(f"--{legacy_name} (a flag of the original Deep RL Zoo): {e}") from None
        if new:
            print(f"note: {arg} (original Deep RL Zoo) is {' '.join(new)} here", file=sys.stderr)
        out.extend(new)
    return out


def unknown_flag_message(name: str, script: str, names: Sequence[str]) -> str:
    """One line for a flag neither this script nor the original zoo has, with the closest of ours."""
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join('--' + c for c in close)}? " if close else ""
    return f"{script} has no flag --{name}; {hint}`--help` lists them all"


def _parse(arg: str) -> tuple[str, str | None] | None:
    """`--name=value` -> (name, value); `--name` / `-name` -> (name, None); a positional -> None."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return None
    body = arg.lstrip("-")
    name, sep, value = body.partition("=")
    return name, (value if sep else None)


def _bool_value(name: str, value: str | None, negated: bool) -> bool:
    if value is None:
        return not negated
    if value.lower() in ("true", "t", "1", "yes"):
        return True
    if value.lower() in ("false", "f", "0", "no"):
        return False
    raise ConfigError(f"--{name} takes true or false, got {value!r}")


# --- Agents of the original that are not built here ---

# package -> what to type instead (or why not yet).
MISSING_AGENTS = {
    "rainbow_dqn": "the original's rainbow_dqn is deep_rl_zoo.rainbow here",
}


class MissingAgentFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers `deep_rl_zoo.<agent>` for the original's agents that have no package here.

    Sits last on `sys.meta_path`, so a package that exists is always found first. Run as
    `python -m deep_rl_zoo.rainbow_dqn.run_classic` (sys.argv[0] is "-m" while runpy looks the module up), it
    prints one line and exits 2; imported from code, it raises ModuleNotFoundError with that line.
    """

    def find_spec(self, fullname, path=None, target=None):
        package, _, agent = fullname.rpartition(".")
        if package == "deep_rl_zoo" and agent in MISSING_AGENTS:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        agent = module.__name__.rpartition(".")[2]
        message = (
            f"deep_rl_zoo.{agent}: {MISSING_AGENTS[agent]} (`ls deep_rl_zoo` lists the agents built here)"
        )
        if sys.argv and sys.argv[0] == "-m":
            print(f"error: {message}", file=sys.stderr)
            sys.exit(2)
        raise ModuleNotFoundError(message, name=module.__name__)


def install_missing_agent_finder() -> None:
    if not any(isinstance(finder, MissingAgentFinder) for finder in sys.meta_path):
        sys.meta_path.append(MissingAgentFinder())
