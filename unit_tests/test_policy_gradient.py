"""Tests of deep_rl_zoo/policy_gradient.py: hand-computed values, gradient directions, shape checks."""

import math

import pytest
import torch
from torch import distributions

from deep_rl_zoo import policy_gradient


def _t(*xs, grad=False):
    return torch.tensor(xs, dtype=torch.float32, requires_grad=grad)


class TestPolicyGradientLoss:
    def test_values(self):
        # -log_prob * advantage: -(-1) * 2 = 2; -(-0.5) * -4 = -2
        out = policy_gradient.policy_gradient_loss(_t(-1.0, -0.5), _t(2.0, -4.0))
        assert out.loss.tolist() == [2.0, -2.0]

    def test_gradient_raises_probability_of_positive_advantage_action(self):
        # Two actions, uniform policy; action 0 had advantage +1. One gradient step on the loss must
        # make action 0 more likely.
        logits = torch.zeros(1, 2, requires_grad=True)
        dist = distributions.Categorical(logits=logits)
        out = policy_gradient.policy_gradient_loss(dist.log_prob(torch.tensor([0])), _t(1.0))
        out.loss.sum().backward()
        # d/dlogits of -log softmax(l)[0] = softmax(l) - onehot(0) = [0.5 - 1, 0.5] = [-0.5, 0.5]
        assert logits.grad.tolist() == [[-0.5, 0.5]]
        new_probs = torch.softmax(logits.detach() - 0.1 * logits.grad, dim=1)
        assert new_probs[0, 0] > 0.5

    def test_negative_advantage_lowers_probability(self):
        logits = torch.zeros(1, 2, requires_grad=True)
        log_prob = distributions.Categorical(logits=logits).log_prob(torch.tensor([0]))
        policy_gradient.policy_gradient_loss(log_prob, _t(-1.0)).loss.sum().backward()
        assert torch.softmax(logits.detach() - 0.1 * logits.grad, dim=1)[0, 0] < 0.5

    def test_no_gradient_reaches_advantage(self):
        advantage = _t(1.0, 2.0, grad=True)
        out = policy_gradient.policy_gradient_loss(_t(-1.0, -2.0, grad=True), advantage)
        out.loss.sum().backward()
        assert advantage.grad is None

    def test_shape_mismatch_raises(self):
        with pytest.raises(ValueError, match="leading dimensions differ"):
            policy_gradient.policy_gradient_loss(_t(-1.0, -2.0), _t(1.0))

    def test_wrong_rank_raises(self):
        with pytest.raises(ValueError, match="rank 1"):
            policy_gradient.policy_gradient_loss(torch.zeros(2, 1), _t(1.0, 2.0))

    def test_mixed_dtype_raises(self):
        with pytest.raises(ValueError, match="dtype"):
            policy_gradient.policy_gradient_loss(_t(-1.0), torch.ones(1, dtype=torch.float64))


class TestEntropyLoss:
    def test_values(self):
        # uniform over 2 actions: H = log 2, loss = -log 2
        dist = distributions.Categorical(logits=torch.zeros(1, 2))
        out = policy_gradient.entropy_loss(dist.entropy())
        assert out.loss.item() == pytest.approx(-math.log(2))

    def test_gradient_pushes_towards_uniform(self):
        logits = torch.tensor([[1.0, 0.0]], requires_grad=True)
        policy_gradient.entropy_loss(distributions.Categorical(logits=logits).entropy()).loss.sum().backward()
        # minimising -H lowers the larger logit and raises the smaller one
        assert logits.grad[0, 0] > 0 > logits.grad[0, 1]

    def test_integer_input_raises(self):
        with pytest.raises(ValueError, match="floating"):
            policy_gradient.entropy_loss(torch.ones(2, dtype=torch.int64))


class TestValueLoss:
    def test_values(self):
        # 0.5 * (3 - 1)^2 = 2; 0.5 * (0 - 1)^2 = 0.5
        out = policy_gradient.value_loss(_t(1.0, 1.0), _t(3.0, 0.0))
        assert out.loss.tolist() == [2.0, 0.5]
        assert out.extra.td_error.tolist() == [2.0, -1.0]

    def test_gradient_moves_value_towards_target(self):
        v = _t(1.0, grad=True)
        policy_gradient.value_loss(v, _t(3.0)).loss.sum().backward()
        # d/dv 0.5 * (3 - v)^2 = -(3 - 1) = -2: a descent step raises v
        assert v.grad.tolist() == [-2.0]

    def test_no_gradient_reaches_target(self):
        target = _t(3.0, grad=True)
        policy_gradient.value_loss(_t(1.0, grad=True), target).loss.sum().backward()
        assert target.grad is None


class TestClippedSurrogate:
    def test_values_inside_and_outside_the_clip(self):
        # epsilon 0.2, advantages +1:
        # ratio 1     -> -min(1, 1) = -1
        # ratio e^0.5 -> -min(1.65, 1.2) = -1.2 (clipped)
        log_prob = _t(0.0, 0.5)
        out = policy_gradient.clipped_surrogate_pg_loss(log_prob, _t(0.0, 0.0), _t(1.0, 1.0), epsilon=0.2)
        assert out.loss.tolist() == pytest.approx([-1.0, -1.2])
        assert out.extra.clipped.tolist() == [False, True]

    def test_negative_advantage_uses_lower_clip(self):
        # ratio e^-0.5 = 0.61, advantage -2: -min(0.61 * -2, 0.8 * -2) = -min(-1.21, -1.6) = 1.6
        out = policy_gradient.clipped_surrogate_pg_loss(_t(-0.5), _t(0.0), _t(-2.0), epsilon=0.2)
        assert out.loss.item() == pytest.approx(1.6)

    def test_gradient_direction_and_stop_when_clipped(self):
        log_prob = _t(0.0, 0.5, grad=True)
        out = policy_gradient.clipped_surrogate_pg_loss(log_prob, _t(0.0, 0.0), _t(1.0, 1.0), epsilon=0.2)
        out.loss.sum().backward()
        # unclipped: d/dlogp -(exp(logp) * 1) = -1 at logp = 0 (descent raises logp); clipped: 0
        assert log_prob.grad.tolist() == [-1.0, 0.0]

    def test_equals_policy_gradient_at_ratio_one(self):
        # at pi = pi_old the surrogate's gradient is the policy gradient's: grad ratio = grad log pi
        lp1, lp2 = _t(-0.3, -1.2, grad=True), _t(-0.3, -1.2, grad=True)
        adv = _t(2.0, -1.0)
        policy_gradient.clipped_surrogate_pg_loss(lp1, lp1.detach(), adv, 0.1).loss.sum().backward()
        policy_gradient.policy_gradient_loss(lp2, adv).loss.sum().backward()
        torch.testing.assert_close(lp1.grad, lp2.grad)

    def test_approx_kl_is_zero_at_same_policy(self):
        out = policy_gradient.clipped_surrogate_pg_loss(_t(-0.7), _t(-0.7), _t(1.0), 0.2)
        assert out.extra.approx_kl.item() == 0.0

    def test_bad_epsilon_raises(self):
        with pytest.raises(ValueError, match="epsilon"):
            policy_gradient.clipped_surrogate_pg_loss(_t(0.0), _t(0.0), _t(1.0), 0.0)


class TestClippedValueLoss:
    def test_values(self):
        # old 0, target 2, epsilon 0.5: v = 1 -> clipped 0.5: 0.5 * max((2-1)^2, (2-0.5)^2) = 1.125
        out = policy_gradient.clipped_value_loss(_t(1.0), _t(0.0), _t(2.0), epsilon=0.5)
        assert out.loss.item() == pytest.approx(1.125)

    def test_inside_clip_equals_value_loss(self):
        out = policy_gradient.clipped_value_loss(_t(0.2), _t(0.0), _t(2.0), epsilon=0.5)
        assert out.loss.item() == pytest.approx(policy_gradient.value_loss(_t(0.2), _t(2.0)).loss.item())
