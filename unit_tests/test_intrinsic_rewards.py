"""Tests of deep_rl_zoo/intrinsic_rewards.py (and RND's clipped observation normaliser): worked examples
with the arithmetic in comments, then properties (termination vs truncation, non-episodic intrinsic
stream, linearity in the coefficients, where gradients flow, bad shapes)."""

import math

import pytest
import torch

from deep_rl_zoo import intrinsic_rewards
from deep_rl_zoo.networks.curiosity import RND_INPUT_CLIP, RandomNetworkDistillation
from deep_rl_zoo.normalizers import ObservationNormalizer


def _column(*xs, dtype=torch.float64):
    """[T] values -> a [T, 1] tensor (one actor's unroll)."""
    return torch.tensor(xs, dtype=dtype).unsqueeze(1)


# ---- RND's observation normaliser: running mean / std, clipped to [-5, 5] ----


def test_rnd_observation_normaliser_whitens_and_clips_at_five():
    normalizer = ObservationNormalizer((1,), clip=RND_INPUT_CLIP)
    normalizer.count.fill_(0.0)  # drop gymnasium's 1e-4 head start so the figures are exact
    normalizer.update(torch.tensor([[0.0], [2.0]]))
    # mean = (0 + 2) / 2 = 1, var = ((0 - 1)^2 + (2 - 1)^2) / 2 = 1
    assert normalizer.mean.item() == pytest.approx(1.0) and normalizer.var.item() == pytest.approx(1.0)
    # (3 - 1) / 1 = 2 stays; (100 - 1) / 1 = 99 clips to 5; (-100 - 1) / 1 = -101 clips to -5
    out = normalizer(torch.tensor([[3.0], [100.0], [-100.0]]))
    assert out[:, 0].tolist() == pytest.approx([2.0, 5.0, -5.0], abs=1e-6)


def test_rnd_reads_the_newest_frame_of_an_atari_stack():
    rnd = RandomNetworkDistillation((4, 84, 84))
    stack = torch.zeros(2, 4, 84, 84, dtype=torch.uint8)
    stack[:, -1] = 7  # only the newest frame is non-zero
    rnd.update_statistics(stack)
    assert rnd.normalizer.mean.shape == (1, 84, 84)
    assert rnd.normalizer.mean.mean().item() == pytest.approx(7.0, rel=1e-3)
    prediction, target = rnd(stack)
    assert prediction.shape == target.shape == (2, 512)
    assert prediction.requires_grad and not target.requires_grad  # the target is never trained


# ---- RND's intrinsic reward ----


def test_rnd_prediction_error_is_the_mean_squared_feature_error():
    prediction = torch.tensor([[1.0, 2.0], [0.0, 0.0]], requires_grad=True)
    target = torch.tensor([[0.0, 0.0], [3.0, 1.0]], requires_grad=True)
    error = intrinsic_rewards.rnd_prediction_error(prediction, target)
    # row 0: ((1 - 0)^2 + (2 - 0)^2) / 2 = 2.5; row 1: ((0 - 3)^2 + (0 - 1)^2) / 2 = 5
    assert error.tolist() == [2.5, 5.0]
    error.sum().backward()
    assert target.grad is None  # the random target gets no gradient
    # d/dp mean_f (p - t)^2 = 2 (p - t) / F: row 0 -> [1, 2]; row 1 -> [-3, -1]
    assert prediction.grad.tolist() == [[1.0, 2.0], [-3.0, -1.0]]


def test_rnd_prediction_error_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="differ"):
        intrinsic_rewards.rnd_prediction_error(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="rank 2"):
        intrinsic_rewards.rnd_prediction_error(torch.zeros(3), torch.zeros(3))


# ---- the running discounted intrinsic return and the reward scaling ----


def test_discounted_return_filter_carries_the_return_across_a_reset():
    # g_0 = 4; discounts 0.5, 0.5, then 1 on the reset pair:
    # g = 0.5 * 4 + 1 = 3; g = 0.5 * 3 + 2 = 3.5; g = 1 * 3.5 + 0 = 3.5 (the reset pair's reward is 0)
    returns = intrinsic_rewards.discounted_return_filter(
        _column(1.0, 2.0, 0.0), _column(0.5, 0.5, 1.0), torch.tensor([4.0], dtype=torch.float64)
    )
    assert returns[:, 0].tolist() == [3.0, 3.5, 3.5]


def test_update_running_moments_matches_the_moments_of_all_values():
    # history {-1, 1}: mean 0, var 1, count 2; batch {2, 4}: mean 3, var 1, count 2.
    # N = 4, d = 3: mean = 0 + 3 * 2 / 4 = 1.5; var = (1 * 2 + 1 * 2 + 9 * 2 * 2 / 4) / 4 = 13 / 4
    mean, var, count = intrinsic_rewards.update_running_moments(0.0, 1.0, 2.0, 3.0, 1.0, 2)
    assert (mean, var, count) == (1.5, 3.25, 4.0)
    values = torch.tensor([-1.0, 1.0, 2.0, 4.0])
    assert var == pytest.approx(values.var(unbiased=False).item())


def test_scale_by_return_std_divides_without_recentring():
    # std = sqrt(4) = 2: [2, -4] / 2 = [1, -2] (a constant reward stays constant, it is not centred)
    scaled = intrinsic_rewards.scale_by_return_std(torch.tensor([2.0, -4.0]), 4.0, epsilon=0.0)
    assert scaled.tolist() == [1.0, -2.0]
    with pytest.raises(ValueError, match="return_var"):
        intrinsic_rewards.scale_by_return_std(torch.tensor([1.0]), -1.0)


def test_intrinsic_reward_normalizer_keeps_one_return_per_actor_and_round_trips():
    normalizer = intrinsic_rewards.IntrinsicRewardNormalizer(num_streams=2, discount=0.5)
    valid = torch.tensor([[True], [False]])
    # actor 1: g = 0.5 * 0 + 2 = 2, then the reset pair: g = 1 * 2 + 0 = 2 (a game over does not stop it)
    normalizer.normalize(_column(2.0, 0.0), valid, streams=[1])
    assert normalizer.state_dict()["returns"].tolist() == [0.0, 2.0]
    # Scaled by the std of the returns seen: var({2, 2}) = 0 merged with the start (mean 0, var 1,
    # count 1e-4) is ~1e-4 * (1 + 4) / 2 ~ 2.5e-4.
    restored = intrinsic_rewards.IntrinsicRewardNormalizer(num_streams=2, discount=0.5)
    restored.load_state_dict(normalizer.state_dict())
    batch = _column(1.0, 3.0)
    both = torch.tensor([[True], [True]])
    assert torch.equal(restored.normalize(batch, both, [0]), normalizer.normalize(batch, both, [0]))
    assert restored.state_dict()["var"] == normalizer.state_dict()["var"]


# ---- the two-stream advantage ----


def _two_stream(r_ext, r_int, terminated, truncated, valid, v_ext, v_int, **overrides):
    kwargs = dict(
        extrinsic_discount=0.5,
        intrinsic_discount=0.5,
        lambda_=1.0,
        extrinsic_coef=2.0,
        intrinsic_coef=1.0,
    )
    kwargs.update(overrides)
    return intrinsic_rewards.two_stream_advantages(
        _column(*r_ext),
        _column(*r_int),
        _column(*terminated, dtype=torch.bool),
        _column(*truncated, dtype=torch.bool),
        _column(*valid, dtype=torch.bool),
        _column(*v_ext),
        _column(*v_int),
        **kwargs,
    )


def test_extrinsic_stream_stops_at_a_game_over_and_intrinsic_runs_on():
    # s_1 is terminal; pair 1 is the reset s_1 -> s_2 (invalid). V_E = V_I = [1, 5, 7], gammas 0.5, lambda 1.
    out = _two_stream(
        r_ext=(1.0, 0.0), r_int=(2.0, 3.0), terminated=(True, False), truncated=(False, False),
        valid=(True, False), v_ext=(1.0, 5.0, 7.0), v_int=(1.0, 5.0, 7.0),
    )  # fmt: skip
    # Extrinsic: A_E0 = r_1 - V_E(s_0) = 1 - 1 = 0 (terminated: no bootstrap); target 0 + 1 = 1.
    assert out.extrinsic_advantage[0, 0].item() == 0.0 and out.extrinsic_target[0, 0].item() == 1.0
    # Intrinsic: A_I0 = 2 + 0.5 * (0 + 1 * V_I(s_2)) - V_I(s_0) = 2 + 0.5 * 7 - 1 = 4.5
    # (the reset pair has discount 1 and reward 0: its 3 is ignored); target 4.5 + 1 = 5.5.
    assert out.intrinsic_advantage[0, 0].item() == 4.5 and out.intrinsic_target[0, 0].item() == 5.5
    # Combined: 2 * 0 + 1 * 4.5 = 4.5
    assert out.advantage[0, 0].item() == 4.5


def test_extrinsic_stream_bootstraps_at_a_time_limit():
    # s_1 truncated: A_E0 = 1 + 0.5 * V_E(s_1) - V_E(s_0) = 1 + 0.5 * 5 - 1 = 2.5
    out = _two_stream(
        r_ext=(1.0, 0.0), r_int=(0.0, 0.0), terminated=(False, False), truncated=(True, False),
        valid=(True, False), v_ext=(1.0, 5.0, 7.0), v_int=(0.0, 0.0, 0.0),
    )  # fmt: skip
    assert out.extrinsic_advantage[0, 0].item() == 2.5
    # Intrinsic: A_I0 = 0 + 0.5 * (0 + 1 * 0) - 0 = 0; combined 2 * 2.5 + 0 = 5
    assert out.advantage[0, 0].item() == 5.0


def test_gae_lambda_mixes_both_streams_inside_an_episode():
    # No episode end, lambda 0.5, gamma 0.5 both, V = [0, 2, 4] both, r_E = [1, 1], r_I = [2, 0]:
    # deltas_E = [1 + 0.5 * 2 - 0, 1 + 0.5 * 4 - 2] = [2, 1]; A_E = [2 + 0.25 * 1, 1] = [2.25, 1]
    # deltas_I = [2 + 1 - 0, 0 + 2 - 2] = [3, 0];              A_I = [3 + 0.25 * 0, 0] = [3, 0]
    # A = 2 * A_E + A_I = [7.5, 2]
    out = _two_stream(
        r_ext=(1.0, 1.0), r_int=(2.0, 0.0), terminated=(False, False), truncated=(False, False),
        valid=(True, True), v_ext=(0.0, 2.0, 4.0), v_int=(0.0, 2.0, 4.0), lambda_=0.5,
    )  # fmt: skip
    assert out.extrinsic_advantage[:, 0].tolist() == [2.25, 1.0]
    assert out.intrinsic_advantage[:, 0].tolist() == [3.0, 0.0]
    assert out.advantage[:, 0].tolist() == [7.5, 2.0]


def test_advantage_is_linear_in_the_coefficients():
    g = torch.Generator().manual_seed(0)
    args = [torch.randn(5, 3, generator=g, dtype=torch.float64) for _ in range(2)]
    masks = [torch.rand(5, 3, generator=g) < p for p in (0.2, 0.1)]
    valid = ~torch.roll(masks[0] | masks[1], 1, 0)
    values = [torch.randn(6, 3, generator=g, dtype=torch.float64) for _ in range(2)]
    common = dict(extrinsic_discount=0.99, intrinsic_discount=0.9, lambda_=0.95)
    base = intrinsic_rewards.two_stream_advantages(
        *args, *masks, valid, *values, extrinsic_coef=1.0, intrinsic_coef=0.0, **common
    )
    mixed = intrinsic_rewards.two_stream_advantages(
        *args, *masks, valid, *values, extrinsic_coef=2.0, intrinsic_coef=3.0, **common
    )
    assert torch.allclose(base.advantage, base.extrinsic_advantage)  # intrinsic_coef 0: plain PPO's GAE
    assert torch.allclose(mixed.advantage, 2 * base.extrinsic_advantage + 3 * base.intrinsic_advantage)


def test_two_stream_advantages_reject_bad_input():
    ok = dict(r_ext=(1.0,), r_int=(1.0,), terminated=(False,), truncated=(False,), valid=(True,))
    with pytest.raises(ValueError, match="extrinsic_discount"):
        _two_stream(**ok, v_ext=(0.0, 0.0), v_int=(0.0, 0.0), extrinsic_discount=1.5)
    with pytest.raises(ValueError, match="v_ext must have shape"):
        _two_stream(**ok, v_ext=(0.0,), v_int=(0.0, 0.0))
    with pytest.raises(ValueError, match="dtype torch.bool"):
        intrinsic_rewards.two_stream_advantages(
            *[torch.zeros(1, 1)] * 5, torch.zeros(2, 1), torch.zeros(2, 1),
            extrinsic_discount=0.9, intrinsic_discount=0.9, lambda_=1.0, extrinsic_coef=1.0, intrinsic_coef=1.0,
        )  # fmt: skip


# ---- ICM ----


def test_icm_loss_and_reward_worked_example():
    predicted = torch.tensor([[1.0, 1.0]], requires_grad=True)
    phi = torch.tensor([[0.0, 3.0]], requires_grad=True)
    logits = torch.tensor([[0.0, 0.0]], requires_grad=True)
    out = intrinsic_rewards.icm_loss(predicted, phi, logits, torch.tensor([1]), beta=0.2, eta=0.1)
    # L_F = 0.5 * ((1 - 0)^2 + (1 - 3)^2) = 2.5; L_I = -log(1/2) = log 2 (uniform over two actions)
    assert out.extra.forward_error.item() == 2.5
    assert out.extra.inverse_loss.item() == pytest.approx(math.log(2))
    # r^i = eta * L_F = 0.1 * 2.5 = 0.25; loss = 0.8 * log 2 + 0.2 * 2.5
    assert out.extra.intrinsic_reward.item() == pytest.approx(0.25)
    assert out.loss.item() == pytest.approx(0.8 * math.log(2) + 0.5)
    out.loss.sum().backward()
    # The forward loss reaches both the prediction and the embedding of s_{t+1}:
    # d(0.2 * 0.5 * (p - phi)^2)/dp = 0.2 * (p - phi) = [0.2, -0.4]; d/dphi is its negative.
    assert predicted.grad[0].tolist() == pytest.approx([0.2, -0.4])
    assert phi.grad[0].tolist() == pytest.approx([-0.2, 0.4])
    assert not out.extra.intrinsic_reward.requires_grad


def test_icm_loss_rejects_bad_input():
    with pytest.raises(ValueError, match="beta"):
        intrinsic_rewards.icm_loss(
            torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 3), torch.zeros(1).long(), beta=2, eta=1
        )
    with pytest.raises(ValueError, match="a_t must have dtype"):
        intrinsic_rewards.icm_loss(
            torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 3), torch.zeros(1), beta=0.2, eta=1
        )
