"""PPO: unroll layout and advantages, normalisers, learner checks, smoke runs of every script, resume
with normaliser statistics, bad input, and a learning test on CartPole."""

import dataclasses
import importlib
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint, unrolls
from deep_rl_zoo.config import PolicyEvalConfig
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.normalizers import ObservationNormalizer, RewardScaler
from deep_rl_zoo.ppo import eval_agent, run_atari, run_continuous, train
from deep_rl_zoo.ppo.agent import Ppo
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.types_ import TimeStep

# ----------------------------------------------------------------------------------------------------
# Unrolls: layout and advantages


class _FakeLink:
    actor_index = 0
    parameter_version = 1

    def __init__(self):
        self.sent = []
        self.sent_versions = []  # the link's version at each send: what the ActorMessage carries
        self.waits = 0

    def send(self, payload):
        self.sent.append(payload)
        self.sent_versions.append(self.parameter_version)

    def wait_for_new_parameters(self):
        self.waits += 1
        self.parameter_version += 1


def _timestep(observation, reward=0.0, terminated=False, truncated=False, first=False):
    return TimeStep(np.array([observation], np.float32), reward, terminated, truncated, first, {})


def _cartpole_like_actor(link, unroll_length):
    network = train.build_network(train.PpoConfig(), gym.make("CartPole-v1"))
    return unrolls.UnrollActor(
        policy=unrolls.policy_part(network),
        link=link,
        action_space=gym.spaces.Discrete(2),
        observation_space=gym.spaces.Box(-1, 1, (1,)),
        unroll_length=unroll_length,
        rng=np.random.default_rng(0),
        device=torch.device("cpu"),
        agent_name="PPO",
    )


class _OneInputPolicy(torch.nn.Module):
    """pi_logits = [0, 0] whatever the (one-dimensional) observation."""

    def forward(self, x):
        return train.policy.ActorOutput(pi_logits=torch.zeros(x.shape[0], 2))


def test_unroll_actor_shares_end_points_and_masks_episode_boundaries():
    link = _FakeLink()
    actor = unrolls.UnrollActor(
        policy=_OneInputPolicy(),
        link=link,
        action_space=gym.spaces.Discrete(2),
        observation_space=gym.spaces.Box(-1, 1, (1,)),
        unroll_length=3,
        rng=np.random.default_rng(0),
        device=torch.device("cpu"),
        agent_name="PPO",
    )
    # Episode 1: s=0 (first), 1, 2 (terminated); episode 2: s=10 (first), 11, 12, 13.
    stream = [
        _timestep(0, first=True),
        _timestep(1, reward=1.0),
        _timestep(2, reward=2.0, terminated=True),
        _timestep(10, first=True),
        _timestep(11, reward=3.0),
        _timestep(12, reward=4.0, truncated=True),
        _timestep(20, first=True),
    ]
    for timestep in stream:
        actor.step(timestep)
    assert len(link.sent) == 2 and link.waits == 2  # each send is followed by a wait for new parameters
    first, second = link.sent
    assert first.observation[:, 0].tolist() == [0, 1, 2, 10]
    assert first.reward.tolist() == [1.0, 2.0, 0.0]  # the reset's "reward" is 0 and masked anyway
    assert first.terminated.tolist() == [False, True, False]
    assert first.valid.tolist() == [True, True, False]  # 2 -> 10 is no transition
    assert second.observation[:, 0].tolist() == [10, 11, 12, 20]  # starts where the first ended
    assert second.truncated.tolist() == [False, True, False]
    assert second.valid.tolist() == [True, True, False]
    assert link.sent_versions == [1, 2]  # each unroll was played by the parameters its message names


def _batch(reward, terminated, truncated):
    t = len(reward)
    return unrolls.UnrollBatch(
        observation=torch.zeros(t + 1, 1, 1),
        action=torch.zeros(t, 1, dtype=torch.int64),
        reward=torch.tensor(reward, dtype=torch.float32)[:, None],
        terminated=torch.tensor(terminated)[:, None],
        truncated=torch.tensor(truncated)[:, None],
        valid=torch.ones(t, 1, dtype=torch.bool),
    )


def test_advantages_bootstrap_at_truncation_but_not_at_termination():
    values = torch.tensor([[1.0], [2.0], [4.0]])  # V(s_0), V(s_1), V(s_2)
    # Terminated at s_1: A_0 = r_1 - V(s_0) = 1 - 1 = 0.
    terminated, _ = unrolls.advantages_and_returns(
        _batch([1.0, 0.0], [True, False], [False, False]), values, 0.5, 1.0
    )
    assert terminated[0, 0].item() == pytest.approx(0.0)
    # Truncated at s_1: A_0 = r_1 + 0.5 * V(s_1) - V(s_0) = 1 + 1 - 1 = 1.
    truncated, _ = unrolls.advantages_and_returns(
        _batch([1.0, 0.0], [False, False], [True, False]), values, 0.5, 1.0
    )
    assert truncated[0, 0].item() == pytest.approx(1.0)


def test_advantages_with_lambda_one_are_n_step_returns_minus_values():
    values = torch.tensor([[1.0], [2.0], [4.0]])
    advantages, targets = unrolls.advantages_and_returns(
        _batch([1.0, 1.0], [False, False], [False, False]), values, 0.5, 1.0
    )
    # G_0 = 1 + 0.5 * 1 + 0.25 * 4 = 2.5, G_1 = 1 + 0.5 * 4 = 3.
    assert targets[:, 0].tolist() == pytest.approx([2.5, 3.0])
    assert advantages[:, 0].tolist() == pytest.approx([2.5 - 1.0, 3.0 - 2.0])


# ----------------------------------------------------------------------------------------------------
# Normalisers


def test_observation_normalizer_matches_numpy_statistics():
    normalizer = ObservationNormalizer((2,))
    data = np.array([[1.0, 10.0], [3.0, 10.0], [5.0, 40.0]])
    normalizer.update(torch.as_tensor(data[:2]))
    normalizer.update(torch.as_tensor(data[2:]))
    # mean = (1 + 3 + 5) / 3 = 3, (10 + 10 + 40) / 3 = 20 (the initial count of 1e-4 barely shows)
    assert normalizer.mean.tolist() == pytest.approx([3.0, 20.0], rel=1e-3)
    assert normalizer.var.tolist() == pytest.approx(data.var(axis=0).tolist(), rel=1e-3)
    normalised = normalizer(torch.tensor([[3.0, 20.0]]))
    assert normalised.dtype == torch.float32 and normalised.abs().max().item() < 1e-3
    # The statistics are buffers: they travel in state_dict (checkpoints, shared parameters).
    assert {"mean", "var", "count"} <= set(normalizer.state_dict())


def test_reward_scaler_resets_the_return_at_episode_ends_and_round_trips():
    scaler = RewardScaler(num_streams=2, discount=0.5)
    scaler.scale(0, np.array([1.0, 1.0]), np.array([False, True]))
    assert scaler.state_dict()["returns"].tolist() == [0.0, 0.0]  # episode ended: return restarts
    scaler.scale(1, np.array([2.0]), np.array([False]))
    assert scaler.state_dict()["returns"].tolist() == [0.0, 2.0]
    restored = RewardScaler(num_streams=2, discount=0.5)
    restored.load_state_dict(scaler.state_dict())
    r = np.array([4.0])
    assert restored.scale(0, r, np.array([False])) == pytest.approx(scaler.scale(0, r, np.array([False])))


# ----------------------------------------------------------------------------------------------------
# The learner


def _config(tmp_path, **overrides) -> train.PpoConfig:
    values = dict(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_train_steps=64,
        num_eval_steps=50,
        num_actors=2,
        unroll_length=16,
        minibatch_size=16,
        num_epochs=2,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    values.update(overrides)
    return train.PpoConfig(**values)


def _random_unroll(actor_index, length=8):
    rng = np.random.default_rng(actor_index)
    return unrolls.Unroll(
        actor_index=actor_index,
        observation=rng.standard_normal((length + 1, 4)).astype(np.float32),
        action=rng.integers(0, 2, length),
        reward=np.ones(length, np.float32),
        terminated=np.zeros(length, bool),
        truncated=np.zeros(length, bool),
        valid=np.ones(length, bool),
    )


def test_learner_declares_itself_on_policy(tmp_path):
    # The loop then gives it only unrolls of the newest parameters (test_distributed checks the loop).
    learner = train.build_learner(_config(tmp_path), gym.make("CartPole-v1"), torch.device("cpu")).learner
    assert learner.on_policy is True


def test_learner_moves_the_policy_and_anneals_the_learning_rate(tmp_path):
    config = _config(tmp_path, num_iterations=1, num_train_steps=32)  # decay over 1 update of 32 steps
    learner = train.build_learner(config, gym.make("CartPole-v1"), torch.device("cpu")).learner
    before = [p.detach().clone() for p in learner.shared_module.parameters()]
    learner.learn([_random_unroll(0, 16), _random_unroll(1, 16)])
    assert any(not torch.equal(b, p) for b, p in zip(before, learner.shared_module.parameters(), strict=True))
    assert learner.statistics["learning_rate"] == pytest.approx(config.learning_rate)  # used at step 0
    learner.learn([_random_unroll(0, 16), _random_unroll(1, 16)])  # after the run's 32 env steps
    assert learner.statistics["learning_rate"] == 0.0


class _ObservationLogits(torch.nn.Module):
    """pi_logits = [0, w * s] and V(s) = v * s for one-dimensional observations s (w = v = 1 at first):
    elementwise arithmetic, so a state's output is bit-identical whatever batch it is computed in."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
        self.v = torch.nn.Parameter(torch.ones(()))

    def forward(self, x):
        s = x[:, 0]
        logits = torch.stack([torch.zeros_like(s), self.w * s], dim=-1)
        return train.policy.ActorCriticOutput(pi_logits=logits, value=self.v * s)


def test_pi_old_comes_from_the_very_states_the_actions_were_taken_in():
    # One epoch of one minibatch holding every transition: its step evaluates log pi(a|s) with the
    # parameters that computed pi_old, so the ratio is exactly 1 for every pair, and approx KL and the
    # clip fraction are exactly 0, if (and only if) pi_old of pair t was computed on s_t (of the same
    # unroll, with the pair from an episode's last state to the reset dropped). pi_old taken one state
    # off (s_{t+1}) gives logits w * (s_t + 1) and a ratio of sigmoid(s_t) / sigmoid(s_t + 1) != 1.
    network = _ObservationLogits()
    learner = Ppo(
        network=network,
        optimizer=torch.optim.Adam(network.parameters(), lr=0.1),
        num_actors=2,
        discount=0.9,
        gae_lambda=0.9,
        clip_epsilon=0.2,
        num_epochs=1,
        minibatch_size=16,
        value_coef=0.5,
        entropy_coef=0.0,
        max_grad_norm=0.0,
        learning_rate=LinearSchedule(begin_value=0.1, end_value=0.1, begin_t=0, decay_steps=1),
        rng=np.random.default_rng(0),
        device=torch.device("cpu"),
    )
    payloads = []
    for index in range(2):
        unroll = _random_unroll(index, length=6)
        observation = (np.arange(7, dtype=np.float32) + 10 * index)[:, None]  # s_t = t + 10 * actor
        valid = np.array([True, True, False, True, True, True])  # s_2 ended an episode
        payloads.append(unroll._replace(observation=observation, valid=valid))
    learner.learn(payloads)
    assert learner.statistics["approx_kl"] == 0.0
    assert learner.statistics["clip_fraction"] == 0.0
    assert network.w.item() != 1.0  # the step did happen (the policy loss has a gradient)


# ----------------------------------------------------------------------------------------------------
# Bad input: rejected before any process starts


def test_bad_minibatch_size_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="minibatch_size"):
        _config(tmp_path, minibatch_size=33)  # 2 actors x 16 steps = 32


def test_continuous_env_for_the_discrete_script_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="discrete"):
        train.main(_config(tmp_path, environment_name="Pendulum-v1"))
    assert not os.path.exists(tmp_path / "runs")


def test_discrete_env_for_the_continuous_script_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="continuous"):
        train.main(_config(tmp_path), action_space="continuous")


# ----------------------------------------------------------------------------------------------------
# Smoke runs of every script


@pytest.mark.smoke
def test_run_classic_then_eval_agent(tmp_path):
    state = train.main(_config(tmp_path))
    # Each phase ends on the learner step (2 actors x 16 steps) nearest to 64 env steps: within 16 of it.
    assert state.next_iteration == 2 and abs(state.train_env_steps - 2 * 64) <= 2 * 16
    for iteration in (0, 1):
        assert os.path.isfile(
            tmp_path / "checkpoints" / "PPO_CartPole-v1" / f"PPO_CartPole-v1_{iteration}.ckpt"
        )
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
def test_run_atari_smoke(tmp_path):
    config = train.PpoConfig(
        **{
            **run_atari.DEFAULTS,
            "num_iterations": 1,
            "num_train_steps": 16,
            "num_eval_steps": 20,
            "max_episode_steps": 40,
            "num_actors": 1,
            "unroll_length": 16,
            "minibatch_size": 8,
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "runs_dir": str(tmp_path / "runs"),
            "use_tensorboard": False,
            "show_progress": False,
        }
    )
    state = train.main(config)
    assert abs(state.train_env_steps - 16) <= 8  # the learner-step boundary nearest 16 (steps of 16)
    assert os.path.isfile(tmp_path / "checkpoints" / "PPO_Pong" / "PPO_Pong_0.ckpt")


@pytest.mark.smoke
def test_run_continuous_resume_restores_normaliser_statistics_and_eval_plays_the_mean(tmp_path):
    overrides = {
        **run_continuous.DEFAULTS,
        "num_iterations": 1,
        "num_train_steps": 64,
        "num_eval_steps": 200,
        "num_actors": 2,
        "unroll_length": 32,
        "minibatch_size": 32,
        "num_epochs": 1,
    }
    state = train.main(_config(tmp_path, **overrides), action_space="continuous")
    path = tmp_path / "checkpoints" / "PPO_Pendulum-v1" / "PPO_Pendulum-v1_0.ckpt"
    payload = checkpoint.load_checkpoint(str(path), "PPO", "Pendulum-v1")
    saved_mean = payload["agent"]["network"]["normalizer.mean"]
    assert saved_mean.abs().sum().item() > 0  # the learner updated and saved the statistics
    assert "reward_scaler" in payload["agent"]

    resumed = train.main(
        _config(tmp_path, **{**overrides, "num_iterations": 2, "resume": True}), action_space="continuous"
    )
    assert resumed.next_iteration == 2 and resumed.train_env_steps > state.train_env_steps
    later = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "PPO_Pendulum-v1" / "PPO_Pendulum-v1_1.ckpt"), "PPO", "Pendulum-v1"
    )
    # Statistics continued from the saved ones: more observations counted than one iteration gives.
    assert later["agent"]["network"]["normalizer.count"] > payload["agent"]["network"]["normalizer.count"]

    returns = eval_agent.main(
        PolicyEvalConfig(
            environment_name="Pendulum-v1",
            num_episodes=1,
            load_checkpoint_file=str(path),
            recording_video_dir=str(tmp_path / "video"),
        )
    )
    assert len(returns) == 1
    assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "video"))


def test_eval_agent_rebuilds_the_trained_architecture(tmp_path):
    config = dataclasses.replace(_config(tmp_path), hidden_sizes=(8,))
    network = train.build_network(config, gym.make("CartPole-v1"))
    assert [m.out_features for m in network.modules() if isinstance(m, torch.nn.Linear)][0] == 8


# ----------------------------------------------------------------------------------------------------
# Learning


@pytest.mark.learning
def test_ppo_learns_cartpole(tmp_path):
    """Guards the whole PPO loop (actors, unrolls, GAE, epochs of minibatches, learning-rate decay).

    Threshold: the env's own, a greedy mean of 475 over the 10 episodes of a 5,000-step evaluation.
    Budget: 100k env steps (the issue's target for PPO), evaluated every 10k; measured seeds 1-3 solve
    at 10k, 61k and 61k (README), so the budget is not tuned to the one seed that passes. The run is
    synchronous: seed 1, the default, repeats its 10k exactly (a few seconds).
    """
    config = _config(
        tmp_path,
        num_iterations=10,  # the 100k budget; the learning rate decays over it, as benchmarked
        num_train_steps=10_000,
        num_eval_steps=5_000,
        num_actors=train.PpoConfig.num_actors,
        unroll_length=train.PpoConfig.unroll_length,
        minibatch_size=train.PpoConfig.minibatch_size,
        num_epochs=train.PpoConfig.num_epochs,
        stop_when_solved=True,
    )
    state = train.main(config)
    assert state.solved, "PPO did not reach a greedy mean return of 475 on CartPole-v1 within 100k env steps"


@pytest.mark.smoke
@pytest.mark.parametrize(
    "environment_name", ["HalfCheetah-v5", "LunarLanderContinuous-v3", "BipedalWalker-v3"]
)
def test_run_continuous_trains_mujoco_and_box2d_tasks(tmp_path, environment_name):
    overrides = {
        **run_continuous.DEFAULTS,
        "environment_name": environment_name,
        "num_iterations": 1,
        "num_train_steps": 64,
        "num_eval_steps": 20,
        "max_episode_steps": 20,
        "num_actors": 1,
        "unroll_length": 32,
        "minibatch_size": 32,
        "num_epochs": 1,
    }
    state = train.main(_config(tmp_path, **overrides), action_space="continuous")
    assert abs(state.train_env_steps - 64) <= 16  # the nearest boundary of 32-step learner steps
    assert os.path.isfile(
        tmp_path / "checkpoints" / f"PPO_{environment_name}" / f"PPO_{environment_name}_0.ckpt"
    )


@pytest.mark.parametrize("package", ["ppo", "ppo_rnd", "ppo_icm"])
def test_a_stop_request_ends_an_update_after_the_minibatch_in_progress(tmp_path, package):
    module = importlib.import_module(f"deep_rl_zoo.{package}.train")
    config_class = {"ppo": "PpoConfig", "ppo_rnd": "PpoRndConfig", "ppo_icm": "PpoIcmConfig"}[package]
    extra = {"observation_warmup_steps": 0} if package == "ppo_rnd" else {}  # RND: learn from the first batch
    config = getattr(module, config_class)(
        num_actors=2,
        unroll_length=16,
        num_epochs=4,
        minibatch_size=8,
        checkpoint_dir=str(tmp_path / "c"),
        **extra,
    )
    learner = module.build_learner(config, gym.make("CartPole-v1"), torch.device("cpu")).learner
    steps = []
    learner.should_stop = lambda: len(steps) >= 3  # Ctrl-C during the 3rd of 4 x 4 = 16 minibatches
    optimizer = learner._optimisation._optimizer
    step = optimizer.step
    optimizer.step = lambda *a, **k: steps.append(1) or step(*a, **k)
    learner.learn([_random_unroll(0, 16), _random_unroll(1, 16)])
    assert len(steps) == 3
