"""PPO-RND: the intrinsic reward reaches the advantages, the observation warm-up, exact learner resume
through a checkpoint file, smoke runs of every script, bad input, and a learning test on MountainCar."""

import functools
import os

import gymnasium as gym
import pytest
import torch

from deep_rl_zoo import checkpoint
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.ppo_rnd import eval_agent, run_atari, run_classic, train
from unit_tests.distributed_helpers import (
    TINY_UNROLL_RUN,
    best_greedy_mean,
    curiosity_atari_smoke,
    evaluate_latest,
    one_actor_of_two_envs_learns_as_two_actors,
    stacked,
    tiny_config,
    train_then_resume,
)
from unit_tests.distributed_helpers import mountain_car_unroll as _unroll

ENV = "MountainCar-v0"


def _config(tmp_path, **overrides) -> train.PpoRndConfig:
    mountain_car = dict(environment_name=ENV, observation_warmup_steps=0)
    return tiny_config(train.PpoRndConfig, tmp_path, TINY_UNROLL_RUN, mountain_car, overrides)


def _learner(tmp_path, seed=0, **overrides):
    torch.manual_seed(seed)
    return train.build_learner(_config(tmp_path, **overrides), gym.make(ENV), torch.device("cpu")).learner


def test_intrinsic_reward_reaches_the_advantages(tmp_path):
    payloads = [_unroll(0), _unroll(1)]  # extrinsic reward 0 everywhere
    plain = _learner(tmp_path, intrinsic_coef=0.0).advantages(stacked(payloads), [0, 1])
    curious = _learner(tmp_path, intrinsic_coef=1.0).advantages(stacked(payloads), [0, 1])
    valid = stacked(payloads).valid
    # The same initial networks (same torch seed): the extrinsic parts agree ...
    assert torch.equal(plain.extrinsic_advantage, curious.extrinsic_advantage)
    # ... intrinsic_coef 0 leaves 2 * A_E, and intrinsic_coef 1 adds A_I, which is not zero.
    assert torch.allclose(plain.advantage, 2 * plain.extrinsic_advantage)
    assert torch.allclose(curious.advantage, 2 * curious.extrinsic_advantage + curious.intrinsic_advantage)
    assert curious.intrinsic_reward[valid].abs().min() > 0  # every transition has a prediction error
    assert (curious.intrinsic_reward[~valid] == 0).all()  # the reset pair has none
    assert not torch.allclose(plain.advantage[valid], curious.advantage[valid])


def test_warmup_only_feeds_the_observation_statistics(tmp_path):
    learner = _learner(tmp_path, observation_warmup_steps=2 * 7)  # one batch: 2 unrolls x 7 valid pairs
    before = [p.detach().clone() for p in learner.shared_module.parameters()]
    learner.learn([_unroll(0), _unroll(1)])
    assert all(torch.equal(b, p) for b, p in zip(before, learner.shared_module.parameters(), strict=True))
    # 2 unrolls x 8 next observations reached RND's normaliser (its count starts at 1e-4) ...
    assert learner._rnd.normalizer.count.item() == pytest.approx(16, abs=1e-3)
    assert learner.statistics["learner_steps"] == 0
    learner.learn([_unroll(0, seed=5), _unroll(1, seed=5)])  # ... and the next batch is learned from
    assert learner.statistics["learner_steps"] == 1
    assert any(not torch.equal(b, p) for b, p in zip(before, learner.shared_module.parameters(), strict=True))


def test_an_actor_of_several_envs_gives_the_learner_what_one_env_actors_give(tmp_path):
    # The Atari default spreads 8 envs over the cores (2 actors x 4 on 2): each env keeps its own reward
    # statistics, and the update is the one of 8 one-env actors.
    one_actor_of_two_envs_learns_as_two_actors(functools.partial(_learner, tmp_path))


def test_a_learner_restored_from_a_checkpoint_file_continues_exactly(tmp_path):
    options = dict(normalize_extrinsic_rewards=True)
    original = _learner(tmp_path, seed=0, **options)
    original.learn([_unroll(0, seed=1, reward=-1.0), _unroll(1, seed=1, reward=-1.0)])
    path = str(tmp_path / "learner.ckpt")
    checkpoint.save_checkpoint(path, "PPO-RND", ENV, 0, original.state_dict(), {})
    restored = _learner(tmp_path, seed=123, **options)  # other initial weights: all must come from the file
    restored.load_state_dict(checkpoint.load_checkpoint(path, "PPO-RND", ENV)["agent"])
    next_batch = [_unroll(0, seed=2, reward=-1.0), _unroll(1, seed=2, reward=-1.0)]
    original.learn(next_batch)
    restored.learn(next_batch)
    for a, b in zip(
        original.state_dict()["network"].values(), restored.state_dict()["network"].values(), strict=True
    ):
        assert torch.equal(a, b)  # network and policy observation statistics
    for a, b in zip(
        original.state_dict()["rnd"].values(), restored.state_dict()["rnd"].values(), strict=True
    ):
        assert torch.equal(a, b)  # target, predictor and RND's observation statistics
    for key in ("intrinsic_normalizer", "extrinsic_reward_scaler"):
        a, b = original.state_dict()[key], restored.state_dict()[key]
        assert torch.equal(a["returns"], b["returns"]) and a["var"] == b["var"] and a["count"] == b["count"]
    assert original.statistics == restored.statistics


# ----------------------------------------------------------------------------------------------------
# Bad input: rejected before any process starts


def test_bad_flags_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="predictor_proportion"):
        _config(tmp_path, predictor_proportion=0.0)
    with pytest.raises(ConfigError, match="intrinsic_discount"):
        _config(tmp_path, intrinsic_discount=1.5)
    with pytest.raises(ConfigError, match="minibatch_size"):
        _config(tmp_path, minibatch_size=33)  # 2 actors x 16 steps = 32


def test_continuous_env_is_a_config_error_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="discrete"):
        train.main(_config(tmp_path, environment_name="Pendulum-v1"))
    assert not os.path.exists(tmp_path / "runs")


# ----------------------------------------------------------------------------------------------------
# Smoke runs of every script


@pytest.mark.smoke
def test_run_classic_resume_then_eval_agent(tmp_path):
    first, second = train_then_resume(
        train, functools.partial(_config, tmp_path, use_tensorboard=True), "PPO-RND"
    )
    # Every running statistic continued from the saved one rather than starting again.
    assert second["rnd"]["normalizer.count"] > first["rnd"]["normalizer.count"]
    assert second["network"]["normalizer.count"] > first["network"]["normalizer.count"]
    assert second["intrinsic_normalizer"]["count"] > first["intrinsic_normalizer"]["count"]
    assert second["learner_steps"] > first["learner_steps"]
    # TensorBoard got both reward streams.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = tmp_path / "runs" / f"PPO-RND_{ENV}"
    events = EventAccumulator(str(run_dir)).Reload()
    tags = set(events.Tags()["scalars"])
    assert {"learner/intrinsic_reward_mean", "learner/extrinsic_reward_mean"} <= tags

    assert len(evaluate_latest(eval_agent, tmp_path, environment_name=ENV, num_episodes=1)) == 1


@pytest.mark.smoke
def test_run_atari_smoke(tmp_path):
    state, agent, _ = curiosity_atari_smoke(
        tmp_path,
        "PPO-RND",
        train,
        train.PpoRndConfig,
        run_atari.DEFAULTS,
        eval_agent,
        num_train_steps=48,
        observation_warmup_steps=8,  # the first unroll only feeds the statistics; then updates
        max_episode_steps=10,
        debug_screenshots_interval=2,  # the command: every 2nd game's last screen
    )
    # Games of 10 env steps, ~48 steps in all: every 2nd game was photographed (checked there).
    assert state.train_env_steps >= 40  # the phase ends on the learner step nearest to 48 env steps
    assert agent["learner_steps"] >= 1
    assert agent["rnd"]["normalizer.mean"].shape == (1, 84, 84)  # per-pixel statistics of the newest frame


def test_run_classic_defaults_are_the_documented_budget():
    config = train.PpoRndConfig(**run_classic.DEFAULTS)
    assert config.num_iterations * config.num_train_steps == 500_000


# ----------------------------------------------------------------------------------------------------
# Learning


@pytest.mark.learning
def test_ppo_rnd_learns_mountain_car(tmp_path):
    """Guards the whole PPO-RND path on MountainCar-v0, where PPO with its own classic defaults stays at -200
    for 500k env steps. The bar: the best of the greedy evaluations within 100k env steps >= -150.
    Measured in the benchmark (README; fused Adam, since the shared PPO optimisation): seeds 1 / 2 / 3
    first reached -150 at 76k / 25k / 25k (seed 1: -157.5, -152.3, -146.4 at 25k, 50k, 76k); this test
    runs seed 1, the slowest, which is why its budget is 100k and not 50k."""
    best = best_greedy_mean(train, train.PpoRndConfig, run_classic.DEFAULTS, tmp_path, num_iterations=4)
    assert best >= -150, f"PPO-RND's best greedy mean on MountainCar-v0 within 100k env steps was {best}"
