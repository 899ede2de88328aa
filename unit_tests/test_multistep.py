"""Tests of deep_rl_zoo/multistep.py: worked examples, naive-loop references and the termination /
truncation contract."""

import pytest
import torch

from deep_rl_zoo import multistep


def _column(*xs):
    """[T] numbers -> a [T, 1] float64 tensor (one sequence)."""
    return torch.tensor(xs, dtype=torch.float64).unsqueeze(1)


def _random_unroll(num_steps=7, batch=3, seed=0, gamma=0.9):
    g = torch.Generator().manual_seed(seed)
    r_t = torch.randn(num_steps, batch, generator=g, dtype=torch.float64)
    terminal = torch.rand(num_steps, batch, generator=g, dtype=torch.float64) < 0.2
    discount_t = torch.where(terminal, 0.0, gamma).to(torch.float64)
    values = torch.randn(num_steps + 1, batch, generator=g, dtype=torch.float64)
    return r_t, discount_t, values


# ---- naive references: one explicit sum per (t, b) ----


def _naive_n_step(r_t, discount_t, values, n):
    num_steps, batch = r_t.shape
    out = torch.zeros_like(r_t)
    for b in range(batch):
        for t in range(num_steps):
            total, scale = 0.0, 1.0
            stop = min(t + n, num_steps)
            for k in range(t, stop):
                total += scale * r_t[k, b].item()
                scale *= discount_t[k, b].item()
            out[t, b] = total + scale * values[stop, b].item()
    return out


def _naive_lambda_returns(r_t, discount_t, values, lambda_):
    """Forward view: (1 - lambda) * sum_n lambda^(n-1) G^(n), with the tail weight on the longest return."""
    num_steps, batch = r_t.shape
    out = torch.zeros_like(r_t)
    for t in range(num_steps):
        longest = num_steps - t
        g_n = [_naive_n_step(r_t, discount_t, values, n)[t] for n in range(1, longest + 1)]
        total = sum((1 - lambda_) * lambda_ ** (n - 1) * g_n[n - 1] for n in range(1, longest))
        out[t] = total + lambda_ ** (longest - 1) * g_n[longest - 1]
    return out


def _naive_gae(r_t, discount_t, values, lambda_):
    num_steps, batch = r_t.shape
    out = torch.zeros_like(r_t)
    for b in range(batch):
        for t in range(num_steps):
            total, scale = 0.0, 1.0
            for k in range(t, num_steps):
                delta = r_t[k, b] + discount_t[k, b] * values[k + 1, b] - values[k, b]
                total += scale * delta.item()
                scale *= lambda_ * discount_t[k, b].item()
            out[t, b] = total
    return out


class TestDiscountedReturns:
    def test_worked_example(self):
        # rewards 1, 2, 3, gamma 0.5, bootstrap 8:
        # G2 = 3 + 0.5 * 8 = 7; G1 = 2 + 0.5 * 7 = 5.5; G0 = 1 + 0.5 * 5.5 = 3.75
        returns = multistep.discounted_returns(
            _column(1, 2, 3), _column(0.5, 0.5, 0.5), torch.tensor([8.0], dtype=torch.float64)
        )
        assert returns[:, 0].tolist() == [3.75, 5.5, 7.0]

    def test_termination_ignores_bootstrap(self):
        # discount 0 after the last reward: G2 = 3 + 0 * 8 = 3; G1 = 2 + 0.5 * 3 = 3.5; G0 = 1 + 0.5 * 3.5
        returns = multistep.discounted_returns(
            _column(1, 2, 3), _column(0.5, 0.5, 0.0), torch.tensor([8.0], dtype=torch.float64)
        )
        assert returns[:, 0].tolist() == [2.75, 3.5, 3.0]

    def test_termination_inside_unroll_cuts_the_sum(self):
        # episode ends after reward 2: G1 = 2; G0 = 1 + 1 * 2 = 3; G2 = 3 + 1 * 10 = 13
        returns = multistep.discounted_returns(
            _column(1, 2, 3), _column(1.0, 0.0, 1.0), torch.tensor([10.0], dtype=torch.float64)
        )
        assert returns[:, 0].tolist() == [3.0, 2.0, 13.0]

    def test_equals_lambda_one(self):
        r_t, discount_t, values = _random_unroll()
        expected = multistep.lambda_returns(r_t, discount_t, values, 1.0)
        torch.testing.assert_close(multistep.discounted_returns(r_t, discount_t, values[-1]), expected)

    def test_bad_bootstrap_shape_raises(self):
        with pytest.raises(ValueError, match="bootstrap_value"):
            multistep.discounted_returns(_column(1, 2), _column(1, 1), torch.zeros(2, dtype=torch.float64))


class TestNStepReturns:
    def test_worked_example(self):
        # rewards 1, 2, 3, gamma 0.5, values V(s_1..s_3) = 4, 6, 8, n = 2:
        # G0 = 1 + 0.5 * 2 + 0.25 * V(s_2) = 1 + 1 + 1.5 = 3.5
        # G1 = 2 + 0.5 * 3 + 0.25 * V(s_3) = 2 + 1.5 + 2 = 5.5
        # G2 = 3 + 0.5 * V(s_3) = 7 (window cut by the end of the unroll)
        returns = multistep.n_step_returns(_column(1, 2, 3), _column(0.5, 0.5, 0.5), _column(0, 4, 6, 8), n=2)
        assert returns[:, 0].tolist() == [3.5, 5.5, 7.0]

    @pytest.mark.parametrize("n", [1, 2, 3, 7, 20])
    def test_matches_naive_loop(self, n):
        r_t, discount_t, values = _random_unroll()
        torch.testing.assert_close(
            multistep.n_step_returns(r_t, discount_t, values, n), _naive_n_step(r_t, discount_t, values, n)
        )

    def test_one_step_is_td_target(self):
        r_t, discount_t, values = _random_unroll()
        torch.testing.assert_close(
            multistep.n_step_returns(r_t, discount_t, values, 1), r_t + discount_t * values[1:]
        )

    def test_n_zero_raises(self):
        with pytest.raises(ValueError, match="n must be"):
            multistep.n_step_returns(_column(1), _column(1), _column(0, 0), n=0)


class TestLambdaReturns:
    def test_worked_example(self):
        # rewards 1, 2, gamma 1, values V(s_1) = 4, V(s_2) = 6, lambda 0.5:
        # G1 = 2 + 1 * 6 = 8; G0 = 1 + 1 * (0.5 * 4 + 0.5 * 8) = 7
        returns = multistep.lambda_returns(_column(1, 2), _column(1.0, 1.0), _column(0, 4, 6), 0.5)
        assert returns[:, 0].tolist() == [7.0, 8.0]

    @pytest.mark.parametrize("lambda_", [0.0, 0.3, 0.95, 1.0])
    def test_matches_naive_forward_view(self, lambda_):
        r_t, discount_t, values = _random_unroll(num_steps=5)
        torch.testing.assert_close(
            multistep.lambda_returns(r_t, discount_t, values, lambda_),
            _naive_lambda_returns(r_t, discount_t, values, lambda_),
        )

    def test_lambda_one_is_monte_carlo_return(self):
        # A whole terminated episode: rewards 1, 1, 1, gamma 0.5 -> G0 = 1 + 0.5 + 0.25 = 1.75
        # whatever the values are.
        returns = multistep.lambda_returns(_column(1, 1, 1), _column(0.5, 0.5, 0.0), _column(9, 9, 9, 9), 1.0)
        assert returns[:, 0].tolist() == [1.75, 1.5, 1.0]

    def test_lambda_zero_is_one_step_target(self):
        r_t, discount_t, values = _random_unroll()
        torch.testing.assert_close(
            multistep.lambda_returns(r_t, discount_t, values, 0.0), r_t + discount_t * values[1:]
        )

    def test_lambda_out_of_range_raises(self):
        with pytest.raises(ValueError, match="lambda_"):
            multistep.lambda_returns(_column(1), _column(1), _column(0, 0), 1.5)


class TestGeneralizedAdvantageEstimation:
    def test_worked_example(self):
        # rewards 1, 2, gamma 1, lambda 0.5, values V(s_0..s_2) = 3, 4, 6:
        # delta1 = 2 + 6 - 4 = 4;  delta0 = 1 + 4 - 3 = 2
        # A1 = 4;  A0 = 2 + 1 * 0.5 * 4 = 4
        advantages = multistep.generalized_advantage_estimation(
            _column(1, 2), _column(1.0, 1.0), 0.5, _column(3, 4, 6)
        )
        assert advantages[:, 0].tolist() == [4.0, 4.0]

    @pytest.mark.parametrize("lambda_", [0.0, 0.5, 0.95, 1.0])
    def test_matches_naive_loop(self, lambda_):
        r_t, discount_t, values = _random_unroll()
        torch.testing.assert_close(
            multistep.generalized_advantage_estimation(r_t, discount_t, lambda_, values),
            _naive_gae(r_t, discount_t, values, lambda_),
        )

    @pytest.mark.parametrize("lambda_", [0.0, 0.7, 1.0])
    def test_advantage_plus_value_is_lambda_return(self, lambda_):
        r_t, discount_t, values = _random_unroll()
        torch.testing.assert_close(
            multistep.generalized_advantage_estimation(r_t, discount_t, lambda_, values) + values[:-1],
            multistep.lambda_returns(r_t, discount_t, values, lambda_),
        )

    def test_lambda_one_is_monte_carlo_return_minus_value(self):
        # terminated episode, rewards 1, 1, gamma 1: returns 2, 1; values 0.5, 0.25 -> A = 1.5, 0.75
        advantages = multistep.generalized_advantage_estimation(
            _column(1, 1), _column(1.0, 0.0), 1.0, _column(0.5, 0.25, 100)
        )
        assert advantages[:, 0].tolist() == [1.5, 0.75]

    def test_truncation_bootstraps_and_termination_does_not(self):
        # one step, reward 1, V(s_0) = 0, V(s_1) = 10, gamma 0.9:
        # truncated: A = 1 + 0.9 * 10 - 0 = 10; terminated: A = 1 + 0 * 10 - 0 = 1
        truncated = multistep.generalized_advantage_estimation(_column(1), _column(0.9), 0.95, _column(0, 10))
        terminated = multistep.generalized_advantage_estimation(
            _column(1), _column(0.0), 0.95, _column(0, 10)
        )
        assert truncated.item() == pytest.approx(10.0)
        assert terminated.item() == 1.0

    def test_carries_no_gradient(self):
        values = _column(3, 4, 6).requires_grad_()
        advantages = multistep.generalized_advantage_estimation(_column(1, 2), _column(1.0, 1.0), 0.5, values)
        assert not advantages.requires_grad

    def test_wrong_values_length_raises(self):
        with pytest.raises(ValueError, match=r"\[T \+ 1, B\]"):
            multistep.generalized_advantage_estimation(_column(1, 2), _column(1, 1), 0.5, _column(3, 4))

    def test_wrong_rank_raises(self):
        with pytest.raises(ValueError, match="rank 2"):
            multistep.generalized_advantage_estimation(
                torch.ones(2, dtype=torch.float64), _column(1, 1), 0.5, _column(3, 4, 5)
            )

    def test_mixed_dtypes_raise(self):
        with pytest.raises(ValueError, match="dtype"):
            multistep.generalized_advantage_estimation(
                _column(1, 2).float(), _column(1, 1), 0.5, _column(3, 4, 5)
            )

    def test_integer_rewards_raise(self):
        with pytest.raises(ValueError):
            multistep.discounted_returns(
                torch.ones(2, 1, dtype=torch.int64), torch.ones(2, 1, dtype=torch.int64), torch.zeros(1)
            )
