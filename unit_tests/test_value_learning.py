"""Q-learning losses against hand-computed values, and their properties."""

import pytest
import torch

from deep_rl_zoo import value_learning


def _batch():
    q_tm1 = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    a_tm1 = torch.tensor([1, 0])
    r_t = torch.tensor([1.0, -1.0])
    discount_t = torch.tensor([0.9, 0.0])
    q_t = torch.tensor([[1.0, 2.0], [5.0, 0.0]])
    return q_tm1, a_tm1, r_t, discount_t, q_t


def test_qlearning_target_and_td_error_by_hand():
    output = value_learning.qlearning(*_batch(), huber_delta=None)
    # example 0: 1 + 0.9 * max(1, 2) = 2.8; td = 2.8 - q_tm1[0, 1] = 2.8 - 2 = 0.8; loss = 0.8^2 / 2 = 0.32
    # example 1: terminal, -1 + 0 * 5 = -1; td = -1 - q_tm1[1, 0] = -1 - 3 = -4; loss = 16 / 2 = 8
    torch.testing.assert_close(output.extra.target, torch.tensor([2.8, -1.0]))
    torch.testing.assert_close(output.extra.td_error, torch.tensor([0.8, -4.0]))
    torch.testing.assert_close(output.loss, torch.tensor([0.32, 8.0]))


def test_huber_loss_is_linear_beyond_delta():
    output = value_learning.qlearning(*_batch(), huber_delta=1.0)
    # |0.8| <= 1: 0.8^2 / 2 = 0.32;  |-4| > 1: 1 * (4 - 1/2) = 3.5
    torch.testing.assert_close(output.loss, torch.tensor([0.32, 3.5]))


def test_double_qlearning_selects_with_online_and_evaluates_with_target():
    q_tm1, a_tm1, r_t, discount_t, q_t_value = _batch()
    q_t_selector = torch.tensor([[9.0, 0.0], [0.0, 9.0]])  # picks action 0, then action 1
    output = value_learning.double_qlearning(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, None)
    # example 0: 1 + 0.9 * q_t_value[0, 0] = 1 + 0.9 * 1 = 1.9 (plain Q-learning would use max = 2)
    torch.testing.assert_close(output.extra.target, torch.tensor([1.9, -1.0]))


def test_gradients_reach_q_tm1_but_not_the_target_network():
    q_tm1, a_tm1, r_t, discount_t, q_t = _batch()
    q_tm1.requires_grad_(True)
    q_t.requires_grad_(True)
    value_learning.qlearning(q_tm1, a_tm1, r_t, discount_t, q_t).loss.sum().backward()
    assert q_t.grad is None
    # only the taken actions get a gradient: d(0.5 td^2)/dq = -td for |td| <= 1, -sign(td) beyond
    torch.testing.assert_close(q_tm1.grad, torch.tensor([[0.0, -0.8], [1.0, 0.0]]))


def test_termination_and_truncation_give_different_targets():
    q_tm1, a_tm1, r_t, _, q_t = _batch()
    terminated = value_learning.qlearning(q_tm1, a_tm1, r_t, torch.tensor([0.0, 0.0]), q_t).extra.target
    truncated = value_learning.qlearning(q_tm1, a_tm1, r_t, torch.tensor([0.9, 0.9]), q_t).extra.target
    # a truncated step still bootstraps: 1 + 0.9 * 2 = 2.8 instead of 1
    assert terminated[0] == 1.0 and truncated[0] == pytest.approx(2.8)


@pytest.mark.parametrize(
    "index, bad, message",
    [
        (0, torch.ones(2), "q_tm1 must have rank 2"),
        (1, torch.tensor([1.0, 0.0]), "a_tm1 must have dtype torch.int64"),
        (2, torch.ones(3), "leading dimensions differ"),
        (3, torch.ones(2, 1), "discount_t must have rank 1"),
    ],
)
def test_wrong_rank_dtype_or_batch_raises(index, bad, message):
    args = list(_batch())
    args[index] = bad
    with pytest.raises(ValueError, match=message):
        value_learning.qlearning(*args)
