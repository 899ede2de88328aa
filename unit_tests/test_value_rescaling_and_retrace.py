"""R2D2/NGU/Agent57 targets: value rescaling h and its inverse, sequence priorities, transformed n-step
and (transformed) Retrace returns. Hand-computed examples first, then properties."""

import pytest
import torch

from deep_rl_zoo import multistep, value_learning
from deep_rl_zoo.value_learning import signed_hyperbolic as h
from deep_rl_zoo.value_learning import signed_parabolic as h_inv


def _t(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_signed_hyperbolic_by_hand():
    x = torch.tensor([0.0, 3.0, -8.0])
    # h(3) = (sqrt(4) - 1) + 0.001 * 3 = 1.003;  h(-8) = -(sqrt(9) - 1) - 0.008 = -2.008
    torch.testing.assert_close(h(x, eps=1e-3), torch.tensor([0.0, 1.003, -2.008]))


def test_signed_parabolic_by_hand():
    # the inverse of the example above: h^-1(1.003) = 3, h^-1(-2.008) = -8
    torch.testing.assert_close(
        h_inv(torch.tensor([0.0, 1.003, -2.008]), eps=1e-3), torch.tensor([0.0, 3.0, -8.0])
    )


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 0.5])
def test_rescaling_pair_are_exact_inverses_over_many_scales(eps):
    x = torch.cat(
        [-torch.logspace(-3, 4, 50, dtype=torch.float64), torch.logspace(-3, 4, 50, dtype=torch.float64)]
    )
    torch.testing.assert_close(h_inv(h(x, eps), eps), x, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(h(h_inv(x, eps), eps), x, rtol=1e-9, atol=1e-9)


def test_rescaling_rejects_non_positive_eps():
    with pytest.raises(ValueError, match="eps"):
        h(torch.zeros(1), eps=0.0)


def test_sequence_priorities_mix_max_and_mean():
    abs_td = _t([1.0], [3.0], [2.0])
    # 0.9 * max(1, 3, 2) + 0.1 * mean(1, 3, 2) = 2.7 + 0.2 = 2.9
    torch.testing.assert_close(
        value_learning.sequence_priorities(abs_td, torch.ones_like(abs_td)), torch.tensor([2.9])
    )


def test_sequence_priorities_ignore_masked_steps():
    abs_td = _t([5.0], [1.0], [2.0])  # the 5 is in the burn-in
    mask = _t([0.0], [1.0], [1.0])
    # 0.9 * max(1, 2) + 0.1 * mean(1, 2) = 1.8 + 0.15 = 1.95
    torch.testing.assert_close(value_learning.sequence_priorities(abs_td, mask), torch.tensor([1.95]))


def test_sequence_priorities_reject_an_all_masked_sequence():
    with pytest.raises(ValueError, match="at least one step"):
        value_learning.sequence_priorities(_t([1.0]), _t([0.0]))


def test_transformed_n_step_returns_by_hand():
    r = _t([1.0], [2.0])
    discount = _t([0.5], [0.5])
    valid = torch.ones(2, 1, dtype=torch.bool)
    values = h(_t([0.0], [0.0], [8.0]))  # the network's rescaled outputs; only values[2] is a bootstrap here
    y = multistep.transformed_n_step_returns(r, discount, valid, values, n=2)
    # y[0] = h(1 + 0.5 * 2 + 0.25 * 8) = h(4);  y[1] = h(2 + 0.5 * 8) = h(6)  (the window ends at o_2)
    torch.testing.assert_close(y, h(_t([4.0], [6.0])))


def test_transformed_n_step_returns_stop_at_a_termination_and_bootstrap_at_a_cut():
    r = _t([1.0], [2.0])
    values = h(_t([0.0], [3.0], [8.0]))
    terminated = multistep.transformed_n_step_returns(
        r, _t([0.5], [0.0]), torch.ones(2, 1, dtype=torch.bool), values, n=2
    )
    # o_2 is terminal: y[0] = h(1 + 0.5 * 2) = h(2), y[1] = h(2)
    torch.testing.assert_close(terminated, h(_t([2.0], [2.0])))
    cut = multistep.transformed_n_step_returns(
        r, _t([0.5], [0.5]), torch.tensor([[True], [False]]), values, n=2
    )
    # o_2 starts a new episode (o_1 was cut by a time limit): y[0] = h(1 + 0.5 * h^-1(values[1])) = h(2.5)
    torch.testing.assert_close(cut[0], h(torch.tensor([2.5])))


def _retrace_example(mu_a1=0.25, lambda_=1.0, valid=None):
    # s_0 --a_0--> s_1 --a_1=1--> s_2, rewards 1 and 1, discounts 0.5 and 0.5.
    q = torch.tensor([[[0.0, 0.0]], [[2.0, 4.0]], [[10.0, 0.0]]])  # [T + 1, B, A]
    pi = torch.tensor([[[0.5, 0.5]], [[0.5, 0.5]], [[1.0, 0.0]]])
    a = torch.tensor([[0], [1]])
    mu_a = torch.tensor([[1.0], [mu_a1]])
    return multistep.retrace_returns(_t([1.0], [1.0]), _t([0.5], [0.5]), q, a, pi, mu_a, lambda_, valid)


def test_retrace_by_hand():
    # v[1] = 0.5 * 2 + 0.5 * 4 = 3, v[2] = 10, q_a[1] = 4, c[1] = 1 * min(1, 0.5 / 0.25) = 1
    # G[1] = 1 + 0.5 * 10 = 6;  G[0] = 1 + 0.5 * (3 + 1 * (6 - 4)) = 3.5
    torch.testing.assert_close(_retrace_example(), _t([3.5], [6.0]))


def test_retrace_truncates_the_importance_weight():
    # mu(a_1) = 1: c[1] = min(1, 0.5 / 1) = 0.5;  G[0] = 1 + 0.5 * (3 + 0.5 * (6 - 4)) = 3
    torch.testing.assert_close(_retrace_example(mu_a1=1.0)[0], torch.tensor([3.0]))


def test_retrace_with_lambda_zero_is_expected_sarsa():
    # G[0] = 1 + 0.5 * v[1] = 2.5
    torch.testing.assert_close(_retrace_example(lambda_=0.0)[0], torch.tensor([2.5]))


def test_retrace_cuts_the_trace_where_the_next_step_starts_a_new_episode():
    # valid[1] False: s_2 belongs to another episode, so G[0] = 1 + 0.5 * v[1] = 2.5 (s_1 was cut)
    valid = torch.tensor([[True], [False]])
    torch.testing.assert_close(_retrace_example(valid=valid)[0], torch.tensor([2.5]))


def test_retrace_on_policy_with_lambda_one_is_the_discounted_return():
    generator = torch.Generator().manual_seed(0)
    num_steps, batch, num_actions = 6, 3, 4
    q = torch.randn(num_steps + 1, batch, num_actions, generator=generator, dtype=torch.float64)
    a = torch.randint(num_actions, (num_steps, batch), generator=generator)
    pi = torch.nn.functional.one_hot(
        torch.cat([a, a[-1:]]), num_actions
    ).double()  # greedy on the taken actions
    r = torch.randn(num_steps, batch, generator=generator, dtype=torch.float64)
    discount = torch.full((num_steps, batch), 0.9, dtype=torch.float64)
    g = multistep.retrace_returns(r, discount, q, a, pi, torch.ones_like(r), 1.0)
    bootstrap = (pi[-1] * q[-1]).sum(-1)
    torch.testing.assert_close(g, multistep.discounted_returns(r, discount, bootstrap))


def test_retrace_equals_its_sum_form():
    # Munos et al. 2016, eq. (3): G[t] = q_a[t] + sum_{s>=t} (prod_{i<s} d_i) (prod_{t<i<=s} c_i) delta_s
    generator = torch.Generator().manual_seed(1)
    num_steps, batch, num_actions, lambda_ = 5, 2, 3, 0.8
    q = torch.randn(num_steps + 1, batch, num_actions, generator=generator, dtype=torch.float64)
    pi = torch.softmax(
        torch.randn(num_steps + 1, batch, num_actions, generator=generator, dtype=torch.float64), -1
    )
    a = torch.randint(num_actions, (num_steps, batch), generator=generator)
    mu_a = torch.rand(num_steps, batch, generator=generator, dtype=torch.float64) * 0.9 + 0.1
    r = torch.randn(num_steps, batch, generator=generator, dtype=torch.float64)
    discount = torch.tensor([0.9, 0.9, 0.0, 0.9, 0.9], dtype=torch.float64)[:, None].expand(num_steps, batch)
    g = multistep.retrace_returns(r, discount, q, a, pi, mu_a, lambda_)
    v = (pi * q).sum(-1)
    q_a = q[:-1].gather(-1, a[..., None])[..., 0]
    c = lambda_ * torch.clamp(pi[:-1].gather(-1, a[..., None])[..., 0] / mu_a, max=1.0)
    expected = torch.zeros_like(r)
    for b in range(batch):
        for t in range(num_steps):
            total, weight = q_a[t, b], 1.0
            for s in range(t, num_steps):
                if s > t:
                    weight = weight * discount[s - 1, b] * c[s, b]
                total = total + weight * (r[s, b] + discount[s, b] * v[s + 1, b] - q_a[s, b])
            expected[t, b] = total
    torch.testing.assert_close(g, expected)


def test_transformed_retrace_runs_retrace_in_the_real_scale():
    q_real = torch.tensor([[[0.0, 0.0]], [[2.0, 4.0]], [[10.0, 0.0]]])
    pi = torch.tensor([[[0.5, 0.5]], [[0.5, 0.5]], [[1.0, 0.0]]])
    args = (_t([1.0], [1.0]), _t([0.5], [0.5]))
    a, mu_a = torch.tensor([[0], [1]]), torch.tensor([[1.0], [0.25]])
    g_h = multistep.transformed_retrace_returns(*args, h(q_real), a, pi, mu_a, 1.0)
    # the same example as test_retrace_by_hand, in h-space: h(3.5) and h(6)
    torch.testing.assert_close(g_h, h(_t([3.5], [6.0])), rtol=1e-5, atol=1e-5)


def test_retrace_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\[T \+ 1, B, A\]"):
        multistep.retrace_returns(
            _t([1.0]),
            _t([0.5]),
            torch.zeros(1, 1, 2),
            torch.zeros(1, 1, dtype=torch.int64),
            torch.zeros(1, 1, 2),
            _t([1.0]),
            1.0,
        )
