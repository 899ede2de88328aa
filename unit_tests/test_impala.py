"""IMPALA: the ResNet torso and the LSTM core, the actor's unrolls, the V-trace learner, smoke runs of
every script (Atari included), resume, bad input, and a learning test on CartPole."""

import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint, unrolls
from deep_rl_zoo.config import PolicyEvalConfig
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.impala import eval_agent, run_atari, train
from deep_rl_zoo.impala.agent import ImpalaActingPolicy
from deep_rl_zoo.networks.impala_resnet import ImpalaActorCritic, ImpalaResNetTorso, ImpalaShallowTorso
from deep_rl_zoo.types_ import TimeStep
from unit_tests.distributed_helpers import evaluations, rounded, train_until

# ----------------------------------------------------------------------------------------------------
# Networks


def test_resnet_torso_has_three_stacks_of_16_32_32_channels_and_15_convolutions():
    torso = ImpalaResNetTorso((4, 84, 84))
    convs = [m for m in torso.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 15  # per stack: 1 + 2 residual blocks x 2
    assert [c.out_channels for c in convs[::5]] == [16, 32, 32]
    features = torso(torch.zeros(2, 4, 84, 84, dtype=torch.uint8))
    assert features.shape == (2, 256)
    # 84 -> 42 -> 21 -> 11 after three stride-2 pools: 32 * 11 * 11 inputs to the linear layer.
    assert torso.fc[0].in_features == 32 * 11 * 11


def test_shallow_torso_is_16_8x8_stride_4_then_32_4x4_stride_2_then_256_units():
    torso = ImpalaShallowTorso((4, 84, 84))
    convs = [m for m in torso.modules() if isinstance(m, torch.nn.Conv2d)]
    shapes = [(c.out_channels, c.kernel_size, c.stride) for c in convs]
    assert shapes == [(16, (8, 8), (4, 4)), (32, (4, 4), (2, 2))]
    assert torso.fc[0].in_features == 32 * 9 * 9  # 84 -> 20 -> 9
    features = torso(torch.full((2, 4, 84, 84), 255, dtype=torch.uint8))
    assert features.shape == (2, 256)
    # Frames are scaled to [0, 1] inside: 255 everywhere is the same as 1.0 into the first convolution.
    expected = torso.fc(torso.convs(torch.ones(2, 4, 84, 84)))
    torch.testing.assert_close(features, expected)


def test_image_torso_flag_picks_the_torso_on_frames_only(tmp_path):
    frames = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    env = type("Env", (), {"observation_space": frames, "action_space": gym.spaces.Discrete(6)})()
    for name, torso_class in (("deep", ImpalaResNetTorso), ("shallow", ImpalaShallowTorso)):
        assert isinstance(train.build_network(_config(tmp_path, image_torso=name), env).torso, torso_class)
    assert run_atari.DEFAULTS["image_torso"] == "shallow"
    with pytest.raises(ConfigError, match="--image_torso must be one of deep, shallow, got 'wide'"):
        _config(tmp_path, image_torso="wide")


def test_lstm_over_a_sequence_equals_step_by_step_and_first_resets_the_state():
    torch.manual_seed(0)
    network = ImpalaActorCritic((3,), num_actions=2, hidden_sizes=(8,), lstm_size=4)
    x = torch.randn(5, 2, 3)
    first = torch.zeros(5, 2, dtype=torch.bool)
    first[3, 0] = True  # sequence 0 starts a new episode at step 3
    start = tuple(torch.randn(2, 4) for _ in range(2))
    whole, _ = network(x, first, start)
    state, steps = start, []
    for t in range(5):
        output, state = network(x[t : t + 1], first[t : t + 1], state)
        steps.append(output.pi_logits[0])
    torch.testing.assert_close(whole.pi_logits, torch.stack(steps))
    # After the reset, sequence 0 no longer depends on where it started.
    other, _ = network(x, first, (torch.zeros(2, 4), torch.zeros(2, 4)))
    torch.testing.assert_close(whole.pi_logits[3:, 0], other.pi_logits[3:, 0])
    assert not torch.allclose(whole.pi_logits[:3, 0], other.pi_logits[:3, 0])


# ----------------------------------------------------------------------------------------------------
# The actor


class _FakeLink:
    actor_index = 0
    parameter_version = 1

    def __init__(self):
        self.sent = []
        self.pulls = 0

    def send(self, payload):
        self.sent.append(payload)

    def pull_parameters(self):
        self.pulls += 1
        return False

    def wait_for_new_parameters(self):
        raise AssertionError("an IMPALA actor never waits for the learner")


def _timestep(observation, reward=0.0, terminated=False, truncated=False, first=False):
    return TimeStep(np.array([observation, 0.0, 0.0], np.float32), reward, terminated, truncated, first, {})


def test_actor_sends_behaviour_logits_first_flags_and_the_initial_lstm_state_without_waiting():
    network = ImpalaActorCritic((3,), num_actions=2, hidden_sizes=(8,), lstm_size=4)
    link = _FakeLink()
    actor = unrolls.UnrollActor(
        policy=ImpalaActingPolicy(network, torch.device("cpu")),
        link=link,
        action_space=gym.spaces.Discrete(2),
        observation_space=gym.spaces.Box(-1, 1, (3,)),
        unroll_length=3,
        rng=np.random.default_rng(0),
        device=torch.device("cpu"),
        agent_name="IMPALA",
        wait_for_parameters=False,
        record_behaviour=True,
    )
    stream = [
        _timestep(0, first=True),
        _timestep(1, reward=1.0),
        _timestep(2, reward=2.0, terminated=True),
        _timestep(10, first=True),
        _timestep(11, reward=3.0),
        _timestep(12, reward=4.0),
        _timestep(13, reward=5.0),
    ]
    for timestep in stream:
        actor.step(timestep)
    assert len(link.sent) == 2 and link.pulls == 2
    first, second = link.sent
    assert first.observation[:, 0].tolist() == [0, 1, 2, 10]
    assert first.first.tolist() == [True, False, False, True]
    assert first.valid.tolist() == [True, True, False]
    assert first.behaviour_logits.shape == (3, 2) and first.behaviour_logits.dtype == np.float32
    assert np.all(first.behaviour_logits[2] == 0)  # s=2 ended the episode: no action was sampled there
    assert np.all(first.core_state[0] == 0)  # the run starts from a zero state
    assert second.observation[:, 0].tolist() == [10, 11, 12, 13]
    # The second unroll carries the state before s=10 was read (after s=1, the last state the network
    # read): non-zero, and reset by the learner's network anyway since s=10 is `first`.
    assert second.core_state[0].shape == (4,) and np.any(second.core_state[0] != 0)


# ----------------------------------------------------------------------------------------------------
# The learner


def _config(tmp_path, **overrides) -> train.ImpalaConfig:
    values = dict(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_train_steps=64,
        num_eval_steps=50,
        num_actors=2,
        unroll_length=8,
        batch_size=2,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    values.update(overrides)
    return train.ImpalaConfig(**values)


def _random_unroll(actor_index, length=8, lstm_size=0):
    rng = np.random.default_rng(actor_index)
    valid = np.ones(length, bool)
    valid[3] = False  # s_3 ended an episode (s_3 terminal): pair 3 -> 4 is no transition
    terminated = np.zeros(length, bool)
    terminated[2] = True
    first = np.zeros(length + 1, bool)
    first[[0, 4]] = True
    return unrolls.Unroll(
        actor_index=actor_index,
        observation=rng.standard_normal((length + 1, 4)).astype(np.float32),
        first=first,
        action=rng.integers(0, 2, length),
        behaviour_logits=rng.standard_normal((length, 2)).astype(np.float32),
        reward=np.ones(length, np.float32),
        terminated=terminated,
        truncated=np.zeros(length, bool),
        valid=valid,
        core_state=tuple(np.zeros(lstm_size, np.float32) for _ in range(2)) if lstm_size else (),
    )


@pytest.mark.parametrize("lstm_size", [0, 8])
def test_learner_takes_a_step_from_off_policy_unrolls(tmp_path, lstm_size):
    config = _config(tmp_path, lstm_size=lstm_size)
    learner = train.build_learner(config, gym.make("CartPole-v1"), torch.device("cpu")).learner
    before = [p.detach().clone() for p in learner.shared_module.parameters()]
    learner.learn([_random_unroll(0, lstm_size=lstm_size), _random_unroll(1, lstm_size=lstm_size)])
    learner.learn([_random_unroll(0, lstm_size=lstm_size), _random_unroll(1, lstm_size=lstm_size)])
    assert any(not torch.equal(b, p) for b, p in zip(before, learner.shared_module.parameters(), strict=True))
    statistics = learner.statistics  # (the loop reports the actors' lag: test_distributed)
    assert statistics["learner_steps"] == 2 and statistics["env_steps_learned"] == 32
    assert np.isfinite(statistics["loss"]) and 0 < statistics["mean_clipped_rho"] <= config.rho_bar


def test_learner_rejects_unrolls_of_different_lengths(tmp_path):
    learner = train.build_learner(_config(tmp_path), gym.make("CartPole-v1"), torch.device("cpu")).learner
    with pytest.raises(ValueError, match="different lengths"):
        learner.learn([_random_unroll(0, 8), _random_unroll(1, 6)])


# ----------------------------------------------------------------------------------------------------
# Bad input: rejected before any process starts


def test_bad_vtrace_threshold_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="rho_bar"):
        _config(tmp_path, rho_bar=0.0)


def test_continuous_env_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="discrete"):
        train.main(_config(tmp_path, environment_name="Pendulum-v1"))
    assert not os.path.exists(tmp_path / "runs")


# ----------------------------------------------------------------------------------------------------
# Smoke runs of every script


@pytest.mark.smoke
def test_run_classic_resume_then_eval_agent(tmp_path):
    state = train.main(_config(tmp_path, num_iterations=1, lstm_size=8))
    # The phase ends on the learner step (2 unrolls of 8 steps) nearest to 64 env steps: within 8 of it.
    assert state.next_iteration == 1 and abs(state.train_env_steps - 64) <= 8
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "IMPALA_CartPole-v1" / "IMPALA_CartPole-v1_0.ckpt"),
        "IMPALA",
        "CartPole-v1",
    )
    resumed = train.main(_config(tmp_path, num_iterations=2, lstm_size=8, resume=True))
    assert resumed.next_iteration == 2 and resumed.train_env_steps > state.train_env_steps
    later = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "IMPALA_CartPole-v1" / "IMPALA_CartPole-v1_1.ckpt"),
        "IMPALA",
        "CartPole-v1",
    )
    assert later["agent"]["learner_steps"] > saved["agent"]["learner_steps"]  # counted on, not restarted
    returns = eval_agent.main(
        PolicyEvalConfig(
            environment_name="CartPole-v1",
            num_episodes=2,
            load_checkpoint_file="latest",
            checkpoint_dir=str(tmp_path / "checkpoints"),
            recording_video_dir=str(tmp_path / "video"),
        )
    )
    assert len(returns) == 2
    assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "video"))


@pytest.mark.smoke
def test_run_atari_smoke_with_one_actor(tmp_path):
    config = train.ImpalaConfig(
        **{
            **run_atari.DEFAULTS,
            "num_iterations": 1,
            "num_train_steps": 16,
            "num_eval_steps": 20,
            "max_episode_steps": 30,
            "num_actors": 1,
            "unroll_length": 8,
            "batch_size": 2,  # two unrolls of the single actor per learner step
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "runs_dir": str(tmp_path / "runs"),
            "use_tensorboard": False,
            "show_progress": False,
        }
    )
    state = train.main(config)
    assert abs(state.train_env_steps - 16) <= 8  # the learner-step boundary nearest 16 (steps of 2 x 8)
    path = tmp_path / "checkpoints" / "IMPALA_Pong" / "IMPALA_Pong_0.ckpt"
    saved = checkpoint.load_checkpoint(str(path), "IMPALA", "PongNoFrameskip-v4")
    assert saved["agent"]["network"]["torso.fc.0.weight"].shape == (256, 32 * 9 * 9)  # the shallow torso
    # eval_agent rebuilds the torso the run trained (not ImpalaConfig's own default, the ResNet).
    returns = eval_agent.main(
        PolicyEvalConfig(
            environment_name="Pong",
            num_episodes=1,
            max_episode_steps=30,
            load_checkpoint_file=str(path),
            recording_video_dir="",
        )
    )
    assert len(returns) == 1


# ----------------------------------------------------------------------------------------------------
# Learning


@pytest.mark.learning
def test_impala_learns_cartpole(tmp_path):
    """Guards that the whole IMPALA loop learns (asynchronous actors, behaviour logits, V-trace
    learner) within a budget CI can afford; the wiring tests check the V-trace inputs exactly.

    Milestone: a greedy evaluation (2,000 env steps) >= 150 with the latest iteration's training games
    (about 150 of them, so a steady figure) averaging >= 50, where a uniformly random policy scores about
    22; trained 15k env steps at a time until it (`train_until`), at most 150k. The actors are
    asynchronous, so the same seed varies from run to run: four runs reached it within 90k (best
    evaluations 239-463 by then), and a CI run under load read 46, 136, 116, 140, 149, 141 in its six
    iterations (training mean 99.7), which a fixed 90k budget failed. 475 is reached at 120-180k (README).
    """

    def reached(rows):
        return max(evaluations(rows)) >= 150 and float(rows[-1]["train_mean_episode_return"]) >= 50

    rows = train_until(
        train.main,
        lambda **iterations: _config(
            tmp_path,
            num_train_steps=15_000,
            num_eval_steps=2_000,
            num_actors=2,
            unroll_length=train.ImpalaConfig.unroll_length,
            batch_size=train.ImpalaConfig.batch_size,
            **iterations,
        ),
        tmp_path / "runs" / "IMPALA_CartPole-v1" / "results.csv",
        reached,
        max_iterations=10,
    )
    assert reached(rows), (
        f"IMPALA on CartPole-v1 in {len(rows) * 15}k steps: greedy evaluations {rounded(evaluations(rows))}, last "
        f"training mean {float(rows[-1]['train_mean_episode_return']):.1f} (random play: about 22)"
    )
