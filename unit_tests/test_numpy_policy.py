"""The numpy mirrors of the MLP policies compute what the torch modules compute, and follow updates."""

import numpy as np
import pytest
import torch

from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks import numpy_policy, policy
from deep_rl_zoo.normalizers import NormalizedNetwork, ObservationNormalizer
from deep_rl_zoo.types_ import TimeStep

STATE_DIM = 5


def _normalizer() -> ObservationNormalizer:
    normalizer = ObservationNormalizer((STATE_DIM,), clip=2.0)
    normalizer.update(torch.randn(64, STATE_DIM) * 3 + 1)
    return normalizer


def _categorical_networks():
    yield policy.MlpActor(STATE_DIM, 3, (8, 6))
    yield policy.MlpActorCritic(STATE_DIM, 3, (8,))
    yield NormalizedNetwork(
        policy.build_actor_critic_network((STATE_DIM,), 3, (8, 8), shared_torso=False), _normalizer()
    )
    yield NormalizedNetwork(policy.MlpActor(STATE_DIM, 3, (8,)))  # identity normaliser


@pytest.mark.parametrize("network", list(_categorical_networks()), ids=lambda n: type(n).__name__)
def test_categorical_logits_match_torch(network):
    forward = numpy_policy.policy_forward(network)
    assert forward is not None
    observations = np.random.default_rng(0).normal(0, 3, (10, STATE_DIM)).astype(np.float32)
    with torch.no_grad():
        expected = network(torch.as_tensor(observations)).pi_logits.numpy()
    actual = np.stack([forward(o) for o in observations])
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_gaussian_mean_and_log_std_match_torch():
    actor = policy.GaussianMlpActor(STATE_DIM, 2, (8, 8), initial_std=0.5)
    network = NormalizedNetwork(
        policy.GaussianActorCritic(actor, policy.MlpCritic(STATE_DIM, (8,))), _normalizer()
    )
    forward = numpy_policy.policy_forward(network)
    observation = np.arange(STATE_DIM, dtype=np.float64)  # float64 input is cast as the module does
    mean, log_std = forward(observation)
    with torch.no_grad():
        expected = network(torch.as_tensor(observation, dtype=torch.float32).unsqueeze(0))
    np.testing.assert_allclose(mean, expected.mean[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(log_std, np.log(0.5) * np.ones(2), rtol=1e-6)


def test_in_place_updates_show_through():
    network = NormalizedNetwork(policy.MlpActor(STATE_DIM, 3, (8,)), _normalizer())
    forward = numpy_policy.policy_forward(network)
    observation = np.ones(STATE_DIM, np.float32)
    before = forward(observation).copy()
    optimizer = torch.optim.Adam(network.parameters(), lr=0.1)
    network(torch.ones(4, STATE_DIM)).pi_logits.sum().backward()
    optimizer.step()  # an optimizer step ...
    network.normalizer.update(torch.randn(32, STATE_DIM))  # ... and new normaliser statistics
    with torch.no_grad():
        expected = network(torch.as_tensor(observation).unsqueeze(0)).pi_logits[0].numpy()
    assert not np.allclose(before, expected)
    np.testing.assert_allclose(forward(observation), expected, rtol=1e-5, atol=1e-6)
    other = NormalizedNetwork(policy.MlpActor(STATE_DIM, 3, (8,)), _normalizer())
    network.load_state_dict(other.state_dict())  # a loaded checkpoint
    with torch.no_grad():
        expected = other(torch.as_tensor(observation).unsqueeze(0)).pi_logits[0].numpy()
    np.testing.assert_allclose(forward(observation), expected, rtol=1e-5, atol=1e-6)


def test_unsupported_networks_fall_back_to_torch():
    assert numpy_policy.policy_forward(policy.NatureCnnActor((4, 84, 84), 6)) is None
    assert numpy_policy.policy_forward(policy.MlpActor(STATE_DIM, 3).half()) is None


def test_greedy_actor_takes_the_same_actions_with_numpy_and_torch():
    network = policy.MlpActor(STATE_DIM, 4, (16,))
    fast = PolicyGreedyActor(network, torch.device("cpu"), "test")
    rng = np.random.default_rng(1)
    for _ in range(50):
        observation = rng.normal(0, 2, STATE_DIM).astype(np.float32)
        timestep = TimeStep(observation, 0.0, False, False, False, {})
        assert fast.step(timestep) == fast._torch_step(timestep)
