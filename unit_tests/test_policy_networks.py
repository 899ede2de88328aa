"""Tests of deep_rl_zoo/networks/policy.py: output shapes, distributions, near-uniform start."""

import math

import pytest
import torch

from deep_rl_zoo.networks import curiosity, policy
from deep_rl_zoo.networks.impala_resnet import ImpalaActorCritic


def test_mlp_actor_distribution():
    net = policy.MlpActor(state_dim=4, num_actions=3)
    out = net(torch.zeros(5, 4))
    assert out.pi_logits.shape == (5, 3)
    dist = out.distribution()
    actions = dist.sample()
    assert actions.shape == (5,) and actions.dtype == torch.int64
    assert dist.log_prob(actions).shape == (5,)
    # the small policy-head initialisation gives a nearly uniform policy: entropy close to log 3
    assert dist.entropy().min().item() == pytest.approx(math.log(3), abs=1e-3)


def test_mlp_critic_and_actor_critic_shapes():
    assert policy.MlpCritic(4)(torch.zeros(5, 4)).value.shape == (5,)
    out = policy.MlpActorCritic(4, 2)(torch.zeros(5, 4))
    assert out.pi_logits.shape == (5, 2) and out.value.shape == (5,)


def test_shared_torso_gets_both_gradients():
    net = policy.MlpActorCritic(4, 2)
    out = net(torch.ones(3, 4))
    out.value.sum().backward()
    value_grad = net.torso[0].weight.grad.clone()
    net.zero_grad()
    out = net(torch.ones(3, 4))
    out.distribution().entropy().sum().backward()
    assert value_grad.abs().sum() > 0 and net.torso[0].weight.grad.abs().sum() > 0


@pytest.mark.parametrize("builder", ["actor", "critic", "actor_critic"])
def test_builders_pick_cnn_for_frames(builder):
    frames = torch.zeros(2, 4, 84, 84, dtype=torch.uint8)
    if builder == "actor":
        net = policy.build_actor_network((4, 84, 84), 6)
        assert isinstance(net, policy.NatureCnnActor) and net(frames).pi_logits.shape == (2, 6)
    elif builder == "critic":
        net = policy.build_critic_network((4, 84, 84))
        assert isinstance(net, policy.NatureCnnCritic) and net(frames).value.shape == (2,)
    else:
        net = policy.build_actor_critic_network((4, 84, 84), 6)
        out = net(frames)
        assert isinstance(net, policy.NatureCnnActorCritic)
        assert out.pi_logits.shape == (2, 6) and out.value.shape == (2,)


def test_builders_pick_mlp_for_vectors():
    assert isinstance(policy.build_actor_network((4,), 2, (8,)), policy.MlpActor)
    assert isinstance(policy.build_critic_network((4,), (8,)), policy.MlpCritic)
    assert isinstance(policy.build_actor_critic_network((4,), 2, (8,)), policy.MlpActorCritic)


def test_gaussian_actor():
    net = policy.GaussianMlpActor(state_dim=3, action_dim=2, initial_std=0.5)
    out = net(torch.zeros(4, 3))
    assert out.mean.shape == (4, 2) and out.log_std.shape == (4, 2)
    dist = out.distribution()
    actions = dist.sample()
    assert actions.shape == (4, 2)
    # log_prob and entropy sum over action dimensions: one number per example
    assert dist.log_prob(actions).shape == (4,)
    # entropy of N(., 0.5^2) per dimension: 0.5 * log(2 pi e) + log 0.5; two dimensions
    expected = 2 * (0.5 * math.log(2 * math.pi * math.e) + math.log(0.5))
    assert dist.entropy()[0].item() == pytest.approx(expected, rel=1e-5)
    # the log-std is learned
    dist.entropy().sum().backward()
    assert net.log_std.grad is not None


def test_separate_actor_critic_shares_nothing():
    net = policy.build_actor_critic_network((4,), 2, (8,), shared_torso=False)
    assert isinstance(net, policy.SeparateActorCritic)
    out = net(torch.ones(3, 4))
    assert out.pi_logits.shape == (3, 2) and out.value.shape == (3,)
    out.value.sum().backward()
    # a value loss leaves the policy's parameters untouched
    assert all(p.grad is None for p in net.actor.parameters())
    assert all(p.grad is not None for p in net.critic.parameters())


def _timestep(observation):
    from deep_rl_zoo.types_ import TimeStep

    return TimeStep(observation, 0.0, False, False, True, {})


def test_greedy_actor_takes_the_most_probable_action_and_samples_only_when_asked():
    from deep_rl_zoo.greedy_actors import PolicyGreedyActor

    net = policy.MlpActor(2, 3, (4,))
    with torch.no_grad():
        net.policy_head.bias.copy_(torch.tensor([0.0, 1.0, 0.0]))  # action 1: probability ~0.58
    observation = torch.zeros(2).numpy()
    greedy = PolicyGreedyActor(net, torch.device("cpu"), "test")
    assert {greedy.step(_timestep(observation)) for _ in range(50)} == {1}
    torch.manual_seed(0)
    sampling = PolicyGreedyActor(net, torch.device("cpu"), "test", sample_actions=True)
    assert {sampling.step(_timestep(observation)) for _ in range(50)} == {0, 1, 2}


def test_greedy_actor_plays_a_gaussian_policy_s_mean():
    from deep_rl_zoo.greedy_actors import PolicyGreedyActor

    net = policy.GaussianMlpActor(2, 2, (4,))
    with torch.no_grad():
        net.mean_head.bias.copy_(torch.tensor([0.5, -0.5]))
        net.mean_head.weight.zero_()
    action = PolicyGreedyActor(net, torch.device("cpu"), "test").step(_timestep(torch.zeros(2).numpy()))
    assert action.tolist() == [0.5, -0.5]


@pytest.mark.parametrize(
    "build",
    [
        lambda: policy.NatureCnnActorCritic((4, 84, 84), 6),
        lambda: policy.NatureCnnActor((4, 84, 84), 6),
        lambda: policy.NatureCnnCritic((4, 84, 84)),
        # PPO-RND's and PPO-ICM's policy on frames: the same torso, which started at PyTorch's default.
        lambda: curiosity.NatureCnnTwoValueActorCritic((4, 84, 84), 6),
    ],
)
def test_nature_cnn_torso_starts_orthogonal_with_relu_gain(build):
    # As in the A2C/PPO reference implementations: each layer's weight, flattened to
    # [out, in * k * k], has orthogonal rows of norm sqrt(2), so W W^T = 2 I (out <= in here:
    # 32 <= 4*8*8 = 256, 64 <= 32*4*4 = 512, 64 <= 64*3*3 = 576, 512 <= 3136); biases start at 0.
    torso = build().torso
    layers = [m for m in torso.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert [layer.weight.shape[0] for layer in layers] == [32, 64, 64, 512]
    for layer in layers:
        weight = layer.weight.detach().flatten(1)
        torch.testing.assert_close(weight @ weight.T, 2 * torch.eye(weight.shape[0]), atol=1e-4, rtol=0)
        assert not layer.bias.any()


def test_impala_shallow_torso_starts_orthogonal_and_sees_the_screen():
    # 16 <= 4*8*8 = 256, 32 <= 16*4*4 = 256, 256 <= 2592: W W^T = 2 I for every layer, biases 0.
    torso = ImpalaActorCritic((4, 84, 84), 6, image_torso="shallow").torso
    layers = [m for m in torso.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert [layer.weight.shape[0] for layer in layers] == [16, 32, 256]
    for layer in layers:
        weight = layer.weight.detach().flatten(1)
        torch.testing.assert_close(weight @ weight.T, 2 * torch.eye(weight.shape[0]), atol=1e-4, rtol=0)
        assert not layer.bias.any()
    # What it is for: a small object (a ball) on a Pong-like screen moves the 256 features by a norm of
    # 0.3-0.4 (seeds 0-3); under PyTorch's default initialisation by 0.02, too little for the heads.
    torch.manual_seed(0)
    torso = ImpalaActorCritic((4, 84, 84), 6, image_torso="shallow").torso
    screens = torch.full((2, 4, 84, 84), 87, dtype=torch.uint8)
    screens[1, :, 40:44, 40:42] = 236
    with torch.no_grad():
        features = torso(screens)
    assert (features[1] - features[0]).norm() > 0.1


def test_impala_resnet_torso_starts_as_the_paper_code_did_and_sees_the_screen():
    # Sonnet's default, which DeepMind's IMPALA code used: a normal of std 1/sqrt(fan_in) cut at two stds
    # (the cut leaves a std of 0.88 of that), zero biases, in all 15 convolutions and the 256-unit layer.
    torch.manual_seed(0)
    torso = ImpalaActorCritic((4, 84, 84), 6, image_torso="deep").torso
    layers = [m for m in torso.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert len(layers) == 16
    for layer in layers:
        weight = layer.weight.detach()
        std = 1 / weight[0].numel() ** 0.5
        assert weight.abs().max() <= 2 * std
        assert 0.8 * std < weight.std() < 0.96 * std, (layer, weight.std() / std)
        assert not layer.bias.any()
    # What it is for: a ball moves the 256 features by a norm of 0.5-0.8 (seeds 0-2); under PyTorch's
    # default initialisation by 0.05.
    screens = torch.full((2, 4, 84, 84), 87, dtype=torch.uint8)
    screens[1, :, 40:44, 40:42] = 236
    with torch.no_grad():
        features = torso(screens)
    assert (features[1] - features[0]).norm() > 0.25
