"""Quantile losses of QR-DQN and IQN: hand-computed values, a naive loop, and input checks."""

import pytest
import torch

from deep_rl_zoo import value_learning


def test_quantile_midpoints_are_the_centres_of_n_equal_bins():
    # (2i + 1) / (2 * 4) for i = 0..3
    assert value_learning.quantile_midpoints(4).tolist() == [0.125, 0.375, 0.625, 0.875]


def test_quantile_huber_loss_by_hand():
    dist_src = torch.tensor([[0.0, 2.0]])
    tau_src = torch.tensor([[0.25, 0.75]])
    dist_target = torch.tensor([[3.0]])
    # u_0 = 3 - 0 = 3: |0.25 - 0| * huber(3) = 0.25 * (3 - 0.5) = 0.625
    # u_1 = 3 - 2 = 1: |0.75 - 0| * huber(1) = 0.75 * 0.5 = 0.375;  sum = 1.0
    loss = value_learning.quantile_huber_loss(dist_src, tau_src, dist_target, huber_delta=1.0)
    assert loss.tolist() == [1.0]
    # Plain quantile loss: 0.25 * |3| + 0.75 * |1| = 1.5
    loss = value_learning.quantile_huber_loss(dist_src, tau_src, dist_target, huber_delta=None)
    assert loss.tolist() == [1.5]


def test_quantile_huber_loss_weights_negative_errors_by_one_minus_tau():
    # u = 0 - 2 = -2 < 0: |0.25 - 1| * huber(-2) = 0.75 * 1.5 = 1.125, divided by kappa = 1
    loss = value_learning.quantile_huber_loss(
        torch.tensor([[2.0]]), torch.tensor([[0.25]]), torch.tensor([[0.0]])
    )
    assert loss.tolist() == [1.125]
    # kappa = 2: huber_2(-2) = 0.5 * 4 = 2, / 2 = 1, times 0.75 = 0.75
    loss = value_learning.quantile_huber_loss(
        torch.tensor([[2.0]]), torch.tensor([[0.25]]), torch.tensor([[0.0]]), huber_delta=2.0
    )
    assert loss.tolist() == [0.75]


def test_quantile_q_learning_by_hand():
    # One example, N = 2 quantiles, A = 2 actions; dist[i, a].
    dist_q_tm1 = torch.tensor([[[0.0, 5.0], [2.0, 5.0]]])  # action 0 has quantiles [0, 2]
    tau = torch.tensor([[0.25, 0.75]])
    dist_q_t = torch.tensor([[[2.0, 0.0], [2.0, 2.0]]])  # means: action 0 -> 2, action 1 -> 1, a* = 0
    output = value_learning.quantile_q_learning(
        dist_q_tm1, tau, torch.tensor([0]), torch.tensor([1.0]), torch.tensor([0.5]), dist_q_t, dist_q_t
    )
    # target_j = 1 + 0.5 * 2 = 2 for both j
    assert output.extra.target.tolist() == [[2.0, 2.0]]
    # quantile 0: u = 2 - 0 = 2, 0.25 * huber(2) = 0.25 * 1.5 = 0.375; quantile 1: u = 0 -> 0
    assert output.loss.tolist() == [0.375]


def test_selector_and_target_may_have_different_sample_counts():
    # IQN: the selector (K = 3 samples) picks a*, the target (M = 1 sample) supplies the values.
    selector = torch.tensor([[[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]])  # action 1 is better
    dist_q_t = torch.tensor([[[10.0, 4.0]]])  # would pick action 0 on its own
    output = value_learning.quantile_q_learning(
        torch.zeros(1, 2, 2),
        torch.tensor([[0.5, 0.5]]),
        torch.tensor([0]),
        torch.tensor([0.0]),
        torch.tensor([1.0]),
        selector,
        dist_q_t,
    )
    assert output.extra.target.tolist() == [[4.0]]  # 0 + 1 * dist_q_t[a* = 1]


def _naive_quantile_q_learning(dist_q_tm1, tau, a_tm1, r_t, discount_t, selector, dist_q_t, kappa):
    losses = []
    for b in range(dist_q_tm1.shape[0]):
        means = [
            sum(selector[b, k, a].item() for k in range(selector.shape[1])) for a in range(selector.shape[2])
        ]
        best = max(range(len(means)), key=lambda a: means[a])
        total = 0.0
        for i in range(dist_q_tm1.shape[1]):
            for j in range(dist_q_t.shape[1]):
                u = (
                    r_t[b].item()
                    + discount_t[b].item() * dist_q_t[b, j, best].item()
                    - dist_q_tm1[b, i, a_tm1[b]].item()
                )
                huber = 0.5 * u * u if abs(u) <= kappa else kappa * (abs(u) - 0.5 * kappa)
                total += abs(tau[b, i].item() - (1.0 if u < 0 else 0.0)) * huber / kappa / dist_q_t.shape[1]
        losses.append(total)
    return torch.tensor(losses)


def test_vectorised_equals_naive_loop():
    g = torch.Generator().manual_seed(0)
    batch, n, k, m, actions = 5, 4, 3, 6, 3
    dist_q_tm1 = torch.randn(batch, n, actions, generator=g) * 3
    tau = torch.rand(batch, n, generator=g)
    a_tm1 = torch.randint(actions, (batch,), generator=g)
    r_t = torch.randn(batch, generator=g)
    discount_t = torch.tensor([0.9, 0.0, 0.9, 0.5, 1.0])
    selector = torch.randn(batch, k, actions, generator=g)
    dist_q_t = torch.randn(batch, m, actions, generator=g) * 3
    output = value_learning.quantile_q_learning(
        dist_q_tm1, tau, a_tm1, r_t, discount_t, selector, dist_q_t, huber_delta=1.5
    )
    expected = _naive_quantile_q_learning(dist_q_tm1, tau, a_tm1, r_t, discount_t, selector, dist_q_t, 1.5)
    torch.testing.assert_close(output.loss, expected, rtol=1e-5, atol=1e-5)


def test_gradients_reach_the_online_quantiles_only():
    dist_q_tm1 = torch.randn(2, 3, 2, requires_grad=True)
    dist_q_t = torch.randn(2, 3, 2, requires_grad=True)
    output = value_learning.quantile_q_learning(
        dist_q_tm1, torch.rand(2, 3), torch.tensor([0, 1]), torch.ones(2), torch.ones(2), dist_q_t, dist_q_t
    )
    output.loss.sum().backward()
    assert dist_q_tm1.grad is not None and dist_q_tm1.grad.abs().sum() > 0
    assert dist_q_t.grad is None


def test_termination_stops_the_bootstrap_but_truncation_does_not():
    dist = torch.ones(1, 2, 2)
    tau = torch.tensor([[0.25, 0.75]])
    args = (dist, tau, torch.tensor([0]), torch.tensor([1.0]))
    terminated = value_learning.quantile_q_learning(*args, torch.tensor([0.0]), dist * 5, dist * 5)
    truncated = value_learning.quantile_q_learning(*args, torch.tensor([0.9]), dist * 5, dist * 5)
    assert terminated.extra.target.tolist() == [[1.0, 1.0]]  # r only
    torch.testing.assert_close(truncated.extra.target, torch.tensor([[5.5, 5.5]]))  # 1 + 0.9 * 5


def test_minimising_the_quantile_loss_finds_the_quantile():
    # Samples 0..99: the 0.25-quantile is about 25. Gradient descent on one parameter must land there.
    samples = torch.arange(100, dtype=torch.float32).unsqueeze(0)
    theta = torch.zeros(1, 1, requires_grad=True)
    optimizer = torch.optim.SGD([theta], lr=20.0)
    for _ in range(300):
        optimizer.zero_grad()
        value_learning.quantile_huber_loss(theta, torch.tensor([[0.25]]), samples).sum().backward()
        optimizer.step()
    assert 23.0 <= theta.item() <= 27.0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"dist_q_tm1": torch.zeros(2, 2)}, "dist_q_tm1 must have rank 3"),
        ({"a_tm1": torch.zeros(2)}, "a_tm1 must have dtype torch.int64"),
        ({"tau_q_tm1": torch.zeros(3, 2)}, "leading dimensions differ"),
        ({"dist_q_t": torch.zeros(2, 4, 3)}, "action dimensions differ"),
    ],
)
def test_wrong_rank_dtype_or_shape_raises(change, message):
    args = {
        "dist_q_tm1": torch.zeros(2, 2, 2),
        "tau_q_tm1": torch.zeros(2, 2),
        "a_tm1": torch.zeros(2, dtype=torch.int64),
        "r_t": torch.zeros(2),
        "discount_t": torch.zeros(2),
        "dist_q_t_selector": torch.zeros(2, 4, 2),
        "dist_q_t": torch.zeros(2, 4, 2),
    }
    args.update(change)
    with pytest.raises(ValueError, match=message):
        value_learning.quantile_q_learning(**args)


def test_quantile_huber_loss_rejects_mismatched_fractions():
    with pytest.raises(ValueError, match="tau_src"):
        value_learning.quantile_huber_loss(torch.zeros(2, 3), torch.zeros(2, 2), torch.zeros(2, 4))
