"""What every replay-based Q agent must do, checked once per agent: smoke runs of run_classic, run_atari
and eval_agent (with video, rebuilding a non-default network from the checkpoint's config), resume, the
common bad input, and the classic defaults each agent was tuned with. Agent-specific behaviour and
learning live in each agent's own test file."""

import csv
import dataclasses
import importlib
import os
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint, environments, evaluation, replay_q_agents
from deep_rl_zoo import config as config_lib
from deep_rl_zoo.config import QEvalConfig
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.types_ import TimeStep


@dataclasses.dataclass(frozen=True)
class Agent:
    name: str  # as in checkpoint file names
    config_class: str
    tiny: dict  # smaller agent-specific sizes for the smoke runs
    network: dict  # a non-default network, which eval_agent must rebuild from the checkpoint's config


AGENTS = {
    "dqn": Agent("DQN", "DqnConfig", {}, {"hidden_sizes": (32, 16)}),
    "double_dqn": Agent("DoubleDQN", "DoubleDqnConfig", {}, {"hidden_sizes": (32, 16)}),
    "prioritized_dqn": Agent("PrioritizedDQN", "PrioritizedDqnConfig", {}, {"hidden_sizes": (32, 16)}),
    "c51_dqn": Agent("C51", "C51Config", {}, {"num_atoms": 11, "v_max": 50.0, "hidden_sizes": (32, 16)}),
    "rainbow": Agent(
        "Rainbow", "RainbowConfig", {}, {"num_atoms": 11, "v_max": 50.0, "hidden_sizes": (32, 16)}
    ),
    "qr_dqn": Agent(
        "QR-DQN", "QrDqnConfig", {"num_quantiles": 8}, {"num_quantiles": 5, "hidden_sizes": (32,)}
    ),
    "iqn": Agent(
        "IQN",
        "IqnConfig",
        {"num_online_taus": 4, "num_target_taus": 5, "num_acting_taus": 6},
        {"tau_embedding_size": 8, "hidden_sizes": (32,)},
    ),
    "drqn": Agent(
        "DRQN",
        "DrqnConfig",
        {"unroll_length": 4, "burn_in": 2},
        {"lstm_size": 16, "hidden_sizes": (32,), "head_hidden_sizes": (8,)},
    ),
}

# Each agent's classic-control defaults where they differ from `replay_q_agents`' (DQN's), as tuned
# and measured on CartPole (README's results table): a change of the shared defaults must not move them.
TUNED_CLASSIC_DEFAULTS = {
    "dqn": {},
    "double_dqn": {"num_iterations": 20},
    "prioritized_dqn": {"num_iterations": 20, "learning_rate": 5e-4, "target_network_update_period": 200},
    "c51_dqn": {"num_iterations": 20, "learning_rate": 5e-4, "target_network_update_period": 200},
    "rainbow": {
        "num_iterations": 20,
        "batch_size": 64,
        "learning_rate": 5e-4,
        "n_step": 3,
        "learn_interval": 2,
        "target_network_update_period": 200,
    },
    "qr_dqn": {
        "batch_size": 64,
        "learning_rate": 5e-4,
        "n_step": 3,
        "learn_interval": 1,
        "target_network_update_period": 200,
        "exploration_epsilon_decay_steps": 10_000,
    },
    "iqn": {"learning_rate": 1e-3, "n_step": 3},
    "drqn": {"batch_size": 32, "learning_rate": 1e-3, "n_step": 5, "hidden_sizes": (128,)},
}
SHARED_CLASSIC_DEFAULTS = {
    "num_iterations": 10,
    "replay_capacity": 50_000,
    "min_replay_size": 1000,
    "batch_size": 128,
    "learning_rate": 2e-3,
    "adam_eps": 1e-8,
    "discount": 0.99,
    "n_step": 1,
    "learn_interval": 4,
    "target_network_update_period": 125,
    "max_grad_norm": 10.0,
    "hidden_sizes": (128, 128),
    "exploration_epsilon_begin_value": 1.0,
    "exploration_epsilon_end_value": 0.01,
    "exploration_epsilon_decay_steps": 5000,
    "eval_exploration_epsilon": 0.0,
}


@pytest.fixture(params=sorted(AGENTS))
def package(request) -> SimpleNamespace:
    agent = AGENTS[request.param]
    train = importlib.import_module(f"deep_rl_zoo.{request.param}.train")
    return SimpleNamespace(
        key=request.param,
        name=agent.name,
        agent=agent,
        train=train,
        config_cls=getattr(train, agent.config_class),
        run_atari=importlib.import_module(f"deep_rl_zoo.{request.param}.run_atari"),
        eval_agent=importlib.import_module(f"deep_rl_zoo.{request.param}.eval_agent"),
    )


def tiny_classic_config(package, tmp_path, **overrides):
    values = dict(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_train_steps=300,
        num_eval_steps=200,
        replay_capacity=1000,
        min_replay_size=100,
        batch_size=16,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
        **package.agent.tiny,
    )
    values.update(overrides)
    return package.config_cls(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def frame_store_of(train_agent):
    """Where the agent keeps Atari frames: its transition writer's store, or DRQN's own."""
    writer = getattr(train_agent, "_writer", None)
    return writer.frame_store if writer is not None else train_agent._frame_store


def test_classic_defaults_are_the_tuned_ones(package):
    values = {f.name: f.default for f in dataclasses.fields(package.config_cls)}
    expected = {**SHARED_CLASSIC_DEFAULTS, **TUNED_CLASSIC_DEFAULTS[package.key]}
    if package.key == "rainbow":  # noisy layers explore: no epsilon flags
        expected = {k: v for k, v in expected.items() if "epsilon" not in k}
    assert {k: values[k] for k in expected} == expected
    assert issubclass(package.config_cls, replay_q_agents.ReplayQConfig)


@pytest.mark.smoke
def test_run_classic_writes_a_checkpoint_and_a_csv_row_per_iteration(package, tmp_path):
    state = package.train.main(tiny_classic_config(package, tmp_path))
    for iteration in (0, 1):
        assert os.path.isfile(
            tmp_path
            / "checkpoints"
            / f"{package.name}_CartPole-v1"
            / f"{package.name}_CartPole-v1_{iteration}.ckpt"
        )
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    assert [int(r["train_env_steps"]) for r in rows] == [300, 600]
    assert float(rows[-1]["learner_learner_steps"]) > 0  # it learned, not only acted
    assert float(rows[-1]["learner_loss"]) >= 0 and float(rows[-1]["learner_grad_norm"]) >= 0
    assert ("learner_epsilon" in rows[-1]) == (package.key != "rainbow")  # noisy nets explore
    written = [name for _, _, names in os.walk(tmp_path / "checkpoints") for name in names]
    assert written and not [n for n in written if n.startswith(".tmp")]  # written atomically


@pytest.mark.smoke
def test_run_atari_smoke_stores_each_frame_once(package, tmp_path):
    config = package.config_cls(
        **{
            **package.run_atari.DEFAULTS,
            "num_iterations": 1,
            "num_train_steps": 80,
            "num_eval_steps": 30,
            "max_episode_steps": 40,
            "replay_capacity": 200,
            "min_replay_size": 40,
            "batch_size": 8,
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "runs_dir": str(tmp_path / "runs"),
            "use_tensorboard": False,
            "show_progress": False,
            **package.agent.tiny,
        }
    )
    env = environments.make_environment(config, 0, train=True)
    agent = package.train.build_agents(config, env, torch.device("cpu")).train_agent
    assert frame_store_of(agent) is not None
    state = package.train.main(config)
    assert state.train_env_steps == 80
    assert os.path.isfile(tmp_path / "checkpoints" / f"{package.name}_Pong" / f"{package.name}_Pong_0.ckpt")


@pytest.mark.smoke
def test_eval_agent_rebuilds_the_checkpoints_network_plays_it_and_records_a_video(package, tmp_path, capsys):
    package.train.main(tiny_classic_config(package, tmp_path, num_iterations=1, **package.agent.network))
    returns = package.eval_agent.main(
        package.eval_agent.__dict__.get("DrqnEvalConfig", QEvalConfig)(
            environment_name="CartPole-v1",
            num_episodes=2,
            load_checkpoint_file="latest",
            checkpoint_dir=str(tmp_path / "checkpoints"),
            recording_video_dir=str(tmp_path / "recordings"),
        )
    )
    assert len(returns) == 2 and all(r >= 1 for r in returns)
    assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "recordings"))
    assert "episode 1: return" in capsys.readouterr().out


def test_the_network_of_a_checkpoint_is_rebuilt_from_its_saved_config(package):
    train_config = package.config_cls(**package.agent.network)
    network = package.train.build_network(train_config, (4,), 2)
    saved = {"config": dataclasses.asdict(train_config), "agent": {"network": network.state_dict()}}
    rebuilt_config = config_lib.trained_config(package.config_cls, saved)
    env = SimpleNamespace(observation_space=SimpleNamespace(shape=(4,)), action_space=SimpleNamespace(n=2))
    rebuilt = replay_q_agents.load_network(package.train.build_network, rebuilt_config, saved, env, "cpu")
    for key, value in network.state_dict().items():
        assert torch.equal(rebuilt.state_dict()[key], value), key
    assert not rebuilt.training  # evaluation mode (noisy layers use their mean)
    # Without a checkpoint: the defaults, which give a differently shaped network here.
    default = replay_q_agents.load_network(
        package.train.build_network,
        config_lib.trained_config(package.config_cls, None),
        None,
        env,
        "cpu",
    )
    assert [v.shape for v in default.state_dict().values()] != [
        v.shape for v in network.state_dict().values()
    ]


@pytest.mark.smoke
def test_resume_continues_where_the_run_stopped(package, tmp_path):
    name = package.name
    first = package.train.main(tiny_classic_config(package, tmp_path, num_iterations=2))
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / f"{name}_CartPole-v1" / f"{name}_CartPole-v1_1.ckpt"),
        name,
        "CartPole-v1",
    )
    resumed = package.train.main(tiny_classic_config(package, tmp_path, num_iterations=3, resume=True))
    assert resumed.run_dir == first.run_dir and resumed.train_env_steps == 900
    final = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / f"{name}_CartPole-v1" / f"{name}_CartPole-v1_2.ckpt"),
        name,
        "CartPole-v1",
    )
    assert final["agent"]["env_steps"] == saved["agent"]["env_steps"] + 300
    assert final["agent"]["learner_steps"] > saved["agent"]["learner_steps"]
    # The optimizer's state carried on (Adam's step count of the first parameter).
    assert final["agent"]["optimizer"]["state"][0]["step"] > saved["agent"]["optimizer"]["state"][0]["step"]
    rows = read_csv(os.path.join(resumed.run_dir, "results.csv"))
    assert [int(r["train_env_steps"]) for r in rows] == [300, 600, 900]  # one curve, continued


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"environment_name": "CartPol-v1"}, "CartPole-v1"),
        ({"environment_name": "Pendulum-v1"}, "discrete"),
        ({"batch_size": 2000}, "batch_size"),
        ({"min_replay_size": 2000}, "min_replay_size"),
        ({"target_network_update_period": 0}, "target_network_update_period"),
        ({"n_step": 0}, "n_step"),
        ({"discount": 1.5}, "discount"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"max_grad_norm": -1.0}, "max_grad_norm"),
    ],
)
def test_common_bad_input_is_rejected_before_any_work(package, tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        package.train.main(tiny_classic_config(package, tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")


def test_epsilon_flags_outside_zero_one_are_rejected(package, tmp_path):
    if package.key == "rainbow":
        pytest.skip("Rainbow has no epsilon")
    with pytest.raises(ConfigError, match="exploration_epsilon_end_value"):
        tiny_classic_config(package, tmp_path, exploration_epsilon_end_value=1.5)


@pytest.mark.parametrize(
    "key, overrides, message",
    [
        ("prioritized_dqn", {"priority_exponent": -0.5}, "priority_exponent"),
        (
            "prioritized_dqn",
            {"importance_sampling_exponent_end_value": 1.5},
            "importance_sampling_exponent_end_value",
        ),
        ("c51_dqn", {"num_atoms": 1}, "num_atoms"),
        ("c51_dqn", {"v_min": 10.0, "v_max": -10.0}, "v_min"),
        ("rainbow", {"v_min": 1.0, "v_max": 1.0}, "v_min"),
        ("rainbow", {"noisy_sigma0": -0.1}, "noisy_sigma0"),
        ("rainbow", {"priority_exponent": -1.0}, "priority_exponent"),
        ("qr_dqn", {"num_quantiles": 0}, "num_quantiles"),
        ("qr_dqn", {"huber_delta": -1.0}, "huber_delta"),
        ("iqn", {"num_target_taus": 0}, "num_target_taus"),
        ("iqn", {"huber_delta": -1.0}, "huber_delta"),
        ("drqn", {"replay_capacity": 5, "min_replay_size": 0, "batch_size": 1}, "replay_capacity"),
        ("drqn", {"burn_in": -1}, "burn_in"),
        ("drqn", {"unroll_length": 0}, "unroll_length"),
    ],
)
def test_agent_specific_bad_input_is_rejected_before_any_work(tmp_path, key, overrides, message):
    agent = AGENTS[key]
    train = importlib.import_module(f"deep_rl_zoo.{key}.train")
    package = SimpleNamespace(agent=agent, config_cls=getattr(train, agent.config_class))
    with pytest.raises(ConfigError, match=message):
        train.main(tiny_classic_config(package, tmp_path, **overrides))
    assert not os.path.exists(tmp_path / "checkpoints") and not os.path.exists(tmp_path / "runs")


# 256 CartPole-shaped states, each as the first timestep of an episode, for comparing actions.
STATES = np.random.default_rng(0).normal(scale=2.0, size=(256, 4)).astype(np.float32)
STATE_TIMESTEPS = [TimeStep(o, 0.0, False, False, True, {}) for o in STATES]


def arg_max_actions(network) -> np.ndarray:
    """The actions [256] of `network`'s largest `q_values` in STATES."""
    with torch.no_grad():
        return network(torch.as_tensor(STATES)).q_values.argmax(dim=1).numpy()


@pytest.mark.parametrize("key", ["dqn", "double_dqn", "prioritized_dqn", "c51_dqn", "qr_dqn"])
def test_evaluation_plays_the_network_the_learner_holds(key, tmp_path):
    """The agents built by `replay_q_agents.build_epsilon_greedy_agents`: the evaluation actor plays the
    learner's own online network (so a network restored by --resume is what gets evaluated), greedily
    at --eval_exploration_epsilon=0, and reports the configured evaluation epsilon."""
    train = importlib.import_module(f"deep_rl_zoo.{key}.train")
    package = SimpleNamespace(config_cls=getattr(train, AGENTS[key].config_class), agent=AGENTS[key])
    config = tiny_classic_config(package, tmp_path, eval_exploration_epsilon=0.0)
    env = gym.make("CartPole-v1")
    # Fixed initial weights: drawn from torch's global generator, which the xdist worker leaves in any
    # state, two random networks act the same in all 256 states about once in a hundred draws.
    torch.manual_seed(11)
    agents = train.build_agents(config, env, torch.device("cpu"))

    def greedy(state_dict):
        network = train.build_network(config, (4,), 2)
        network.load_state_dict(state_dict)
        return arg_max_actions(network)

    other = train.build_agents(dataclasses.replace(config, seed=config.seed + 1), env, torch.device("cpu"))
    state = agents.train_agent.state_dict()
    before = greedy(state["network"])
    state["network"] = other.train_agent.state_dict()["network"]
    agents.train_agent.load_state_dict(state)
    after = greedy(state["network"])
    assert (before != after).any()  # the two networks disagree somewhere, so the check can fail

    np.testing.assert_array_equal(agents.eval_agent.step_batch(STATE_TIMESTEPS), after)
    assert agents.eval_agent.statistics["epsilon"] == 0.0
    config = dataclasses.replace(config, eval_exploration_epsilon=0.25)
    assert train.build_agents(config, env, torch.device("cpu")).eval_agent.statistics["epsilon"] == 0.25


@pytest.mark.parametrize("key", ["dqn", "double_dqn", "prioritized_dqn", "c51_dqn", "qr_dqn", "rainbow"])
def test_eval_agent_plays_the_checkpoints_weights_at_the_flags_epsilon(key, monkeypatch):
    """The `eval_agent` scripts built by `replay_q_agents.evaluate_epsilon_greedy`: the actor they hand to
    `evaluation.evaluate` plays the checkpoint's own weights (not a fresh network of the same shape)
    greedily at --eval_exploration_epsilon=0, under the agent's name."""
    train = importlib.import_module(f"deep_rl_zoo.{key}.train")
    eval_script = importlib.import_module(f"deep_rl_zoo.{key}.eval_agent")
    handed_over = {}

    def evaluate(config, agent_name, build_actor):
        handed_over.update(agent_name=agent_name, build_actor=build_actor)
        return []

    monkeypatch.setattr(evaluation, "evaluate", evaluate)
    eval_script.main(QEvalConfig(environment_name="CartPole-v1", eval_exploration_epsilon=0.0))
    assert handed_over["agent_name"] == AGENTS[key].name

    train_config = getattr(train, AGENTS[key].config_class)(**AGENTS[key].network)
    torch.manual_seed(11)
    network = train.build_network(train_config, (4,), 2).eval()
    saved = {"config": dataclasses.asdict(train_config), "agent": {"network": network.state_dict()}}
    expected = arg_max_actions(network)
    env = gym.make("CartPole-v1")

    actor = handed_over["build_actor"](env, torch.device("cpu"), saved)
    np.testing.assert_array_equal(actor.step_batch(STATE_TIMESTEPS), expected)
    assert actor.statistics["epsilon"] == 0.0
    # A network of the same shape with other weights acts otherwise: the check above can fail.
    other = handed_over["build_actor"](
        env,
        torch.device("cpu"),
        {
            **saved,
            "agent": {
                "network": {name: torch.randn_like(value) for name, value in network.state_dict().items()}
            },
        },
    )
    assert (other.step_batch(STATE_TIMESTEPS) != expected).any()
