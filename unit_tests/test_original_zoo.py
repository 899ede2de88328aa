"""Coming from the original Deep RL Zoo: its flags translated or refused in one line, its agents that
are not built here refused in one line, `-h`, and eval scripts' --num_iterations / --num_eval_steps."""

import subprocess
import sys

import pytest

from deep_rl_zoo import original_zoo
from deep_rl_zoo.errors import ConfigError

_IMPALA_CLASSIC = original_zoo.Context(
    script="deep_rl_zoo.impala.run_classic",
    flags={"lstm_size": 0, "learning_rate": 1e-3, "max_grad_norm": 40.0, "use_tensorboard": True, "tag": ""},
    atari=False,
    evaluation=False,
)


def _translate(*args, context=_IMPALA_CLASSIC):
    return original_zoo.translate_argv(["prog", *args], context)[1:]


def test_the_original_readme_impala_command_maps_use_lstm_and_keeps_our_flags():
    args = _translate("--use_lstm", "--learning_rate=0.00045", "--tag=LSTM-LR0.00045")
    assert args == ["--lstm_size=64", "--learning_rate=0.00045", "--tag=LSTM-LR0.00045"]
    assert _translate("--nouse_lstm") == ["--lstm_size=0"]
    assert _translate("--use_lstm=false") == ["--lstm_size=0"]
    atari = _IMPALA_CLASSIC._replace(atari=True)
    assert _translate("--use_lstm", context=atari) == ["--lstm_size=256"]  # the IMPALA paper's LSTM


def test_renamed_flags_take_their_value_in_either_form():
    context = _IMPALA_CLASSIC._replace(
        flags={**_IMPALA_CLASSIC.flags, "num_train_steps": 1, "value_coef": 0.5}
    )
    assert _translate("--num_train_frames=500", "--baseline_coef", "0.25", context=context) == [
        "--num_train_steps=500",
        "--value_coef=0.25",
    ]
    assert _translate("--notensorboard") == ["--use_tensorboard=false"]
    assert _translate("-h") == ["--help"]


def test_clip_grad_maps_onto_max_grad_norm():
    assert _translate("--noclip_grad") == ["--max_grad_norm=0"]
    assert _translate("--clip_grad") == []  # clipping at --max_grad_norm=40 is already on
    no_clipping = _IMPALA_CLASSIC._replace(flags={**_IMPALA_CLASSIC.flags, "max_grad_norm": 0.0})
    with pytest.raises(ConfigError, match="--max_grad_norm=10"):
        _translate("--clip_grad", context=no_clipping)


def test_sac_target_tau_is_turned_into_the_online_share():
    context = _IMPALA_CLASSIC._replace(flags={"target_update_rate": 0.005})
    assert _translate("--q_target_tau=0.995", context=context) == ["--target_update_rate=0.005"]  # 1 - 0.995


def test_flags_without_an_equivalent_say_what_to_use_instead():
    with pytest.raises(ConfigError, match=r"^--rmsprop_eps \(a flag of the original.*--adam_eps"):
        _translate("--rmsprop_eps=0.01")
    with pytest.raises(ConfigError, match="--num_epochs here, which deep_rl_zoo.impala.run_classic does not"):
        _translate("--update_k=4")


def test_our_own_flags_and_unknown_flags_pass_through_untouched():
    # batch_size is the original's PPO minibatch, but where it is our own flag it stays as typed.
    context = _IMPALA_CLASSIC._replace(flags={"batch_size": 2})
    assert _translate("--batch_size=8", "--v_min", "-10", "--whatever=1", context=context) == [
        "--batch_size=8",
        "--v_min",
        "-10",
        "--whatever=1",
    ]


def _context_of(package: str, evaluation: bool = False) -> original_zoo.Context:
    """The real flags of `deep_rl_zoo.<package>.run_classic` (or its eval_agent)."""
    import dataclasses
    import importlib

    from deep_rl_zoo.config import ATARI_FIELDS, QEvalConfig

    if evaluation:
        fields = dataclasses.fields(QEvalConfig)
    else:
        module = importlib.import_module(f"deep_rl_zoo.{package}.train")
        (config_cls,) = [
            c for c in vars(module).values()
            if dataclasses.is_dataclass(c) and isinstance(c, type) and c.__module__ == module.__name__
        ]  # fmt: skip
        fields = [f for f in dataclasses.fields(config_cls) if f.name not in ATARI_FIELDS]
    script = f"deep_rl_zoo.{package}.{'eval_agent' if evaluation else 'run_classic'}"
    return original_zoo.Context(script, {f.name: f.default for f in fields}, False, evaluation)


_ALL_AGENTS = [
    "dqn", "double_dqn", "prioritized_dqn", "c51_dqn", "qr_dqn", "iqn", "rainbow", "drqn",
    "reinforce", "reinforce_baseline", "actor_critic", "a2c", "ppo", "impala", "sac",
]  # fmt: skip
_REPLAY_Q_AGENTS = ["dqn", "double_dqn", "prioritized_dqn", "c51_dqn", "qr_dqn", "iqn", "rainbow", "drqn"]


@pytest.mark.parametrize("package", _ALL_AGENTS)
def test_the_original_common_training_flags_become_flags_every_script_has(package):
    context = _context_of(package)
    original = [
        "--num_train_frames=100",
        "--num_eval_frames=50",
        "--notensorboard",
        "--debug_screenshots_frequency=3",
    ]
    if context.flags.get("max_grad_norm"):
        original.append("--clip_grad")
    if package in _REPLAY_Q_AGENTS:
        original += ["--learn_frequency=2", "--target_network_update_frequency=100"]
    if package in _REPLAY_Q_AGENTS and package != "rainbow":  # noisy nets explore without epsilon
        original.append("--exploration_epsilon_decay_step=9")
    translated = _translate(*original, context=context)
    assert {arg[2:].split("=")[0] for arg in translated} <= set(context.flags)
    assert "--num_train_steps=100" in translated and "--use_tensorboard=false" in translated


def test_the_original_eval_flags_become_eval_agent_flags():
    context = _context_of("dqn", evaluation=True)
    translated = _translate(
        "--num_iterations=2",
        "--num_eval_frames=100",
        "--tensorboard",
        "--checkpoint_path=a.ckpt",
        context=context,
    )
    assert translated == ["--num_iterations=2", "--num_eval_steps=100", "--load_checkpoint_file=a.ckpt"]


def _run(*args, cwd):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd, timeout=180)


@pytest.mark.slow
@pytest.mark.parametrize(
    "module, message",
    [
        ("deep_rl_zoo.rainbow_dqn.run_classic", "is deep_rl_zoo.rainbow here"),
        ("deep_rl_zoo.rainbow_dqn.eval_agent", "is deep_rl_zoo.rainbow here"),
    ],
)
def test_agents_not_built_here_answer_in_one_line_and_exit_2(tmp_path, module, message):
    result = _run(module, "--num_iterations=1", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and message in result.stderr
    assert "No module named" not in result.stderr


def test_importing_an_agent_not_built_here_from_code_is_a_module_not_found_error():
    with pytest.raises(ModuleNotFoundError, match="is deep_rl_zoo.rainbow here"):
        import deep_rl_zoo.rainbow_dqn  # noqa: F401
    import deep_rl_zoo.dqn  # a package that exists is never shadowed

    assert deep_rl_zoo.dqn.__file__.endswith("__init__.py")


@pytest.mark.slow
def test_dash_h_shows_the_same_help_as_double_dash_help(tmp_path):
    short = _run("deep_rl_zoo.dqn.run_classic", "-h", cwd=tmp_path)
    long = _run("deep_rl_zoo.dqn.run_classic", "--help", cwd=tmp_path)
    assert "--learning_rate: Adam learning rate." in short.stdout
    assert short.stdout == long.stdout and short.returncode == long.returncode


@pytest.mark.slow
def test_unknown_and_malformed_flags_are_one_line_errors_with_a_suggestion(tmp_path):
    result = _run("deep_rl_zoo.dqn.run_classic", "--learnin_rate=0.1", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: deep_rl_zoo.dqn.run_classic has no flag --learnin_rate; did you mean --learning_rate, "
        "--learn_interval? `--help` lists them all"
    )
    result = _run("deep_rl_zoo.dqn.run_classic", "--num_iterations=two", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith("error: flag --num_iterations=two")


@pytest.mark.slow
def test_the_original_readme_impala_sweep_command_runs(tmp_path):
    result = _run(
        "deep_rl_zoo.impala.run_classic",
        "--use_lstm",
        "--learning_rate=0.00045",
        "--tag=LSTM-LR0.00045",
        "--num_actors=2",
        "--num_iterations=1",
        "--num_train_steps=64",
        "--num_eval_steps=20",
        "--notensorboard",  # the original's spelling too
        "--noshow_progress",
        "--noactors_on_gpu",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "note: --use_lstm (original Deep RL Zoo) is --lstm_size=64 here" in result.stderr
    folder = tmp_path / "checkpoints" / "IMPALA_CartPole-v1_LSTM-LR0.00045"
    assert (folder / "IMPALA_CartPole-v1_0.ckpt").is_file()
    assert (tmp_path / "runs" / "IMPALA_CartPole-v1_LSTM-LR0.00045").is_dir()
    import torch

    saved = torch.load(folder / "IMPALA_CartPole-v1_0.ckpt", weights_only=True)
    assert saved["config"]["lstm_size"] == 64 and saved["config"]["learning_rate"] == 0.00045
