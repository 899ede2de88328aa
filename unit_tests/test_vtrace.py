"""V-trace: hand-computed clipping, the naive double loop of the paper's definition, and the on-policy
case, where it must equal the n-step bootstrapped return."""

import math

import pytest
import torch

from deep_rl_zoo import multistep
from deep_rl_zoo.vtrace import vtrace


def _column(*xs):
    return torch.tensor(xs, dtype=torch.float32)[:, None]  # [T, 1]


def test_one_step_clips_rho_in_the_target_and_in_the_advantage():
    # V(s_0) = 1, V(s_1) = 2, r = 1, gamma = 0.5, rho = pi / mu = 4 (log 4).
    values, r, discount = _column(1.0, 2.0), _column(1.0), _column(0.5)
    log_rho = _column(math.log(4.0))
    out = vtrace(values, r, discount, log_rho, rho_bar=1.0, c_bar=1.0, pg_rho_bar=1.0)
    # delta = min(1, 4) * (1 + 0.5 * 2 - 1) = 1, v_0 = 1 + 1 = 2
    assert out.vs[0, 0].item() == pytest.approx(2.0)
    # A_0 = min(1, 4) * (1 + 0.5 * v_1 - 1), with v_1 = V(s_1) = 2: 1
    assert out.pg_advantages[0, 0].item() == pytest.approx(1.0)
    # rho_bar = 2: delta = 2 * 1 = 2, v_0 = 3; pg_rho_bar = 3: A_0 = 3 * 1 = 3
    out = vtrace(values, r, discount, log_rho, rho_bar=2.0, c_bar=1.0, pg_rho_bar=3.0)
    assert out.vs[0, 0].item() == pytest.approx(3.0)
    assert out.pg_advantages[0, 0].item() == pytest.approx(3.0)
    assert out.clipped_rho[0, 0].item() == pytest.approx(2.0)


def test_c_bar_cuts_the_trace_and_small_rho_is_not_raised():
    # Two steps, gamma = 1, V = (0, 0, 0), r = (1, 1); rho_0 = 0.5, rho_1 = 4.
    values, r, discount = _column(0.0, 0.0, 0.0), _column(1.0, 1.0), _column(1.0, 1.0)
    log_rho = _column(math.log(0.5), math.log(4.0))
    out = vtrace(values, r, discount, log_rho, rho_bar=1.0, c_bar=1.0)
    # delta_1 = min(1, 4) * 1 = 1 -> v_1 = 1
    # delta_0 = min(1, 0.5) * 1 = 0.5, c_0 = min(1, 0.5) = 0.5 -> v_0 = 0.5 + 0.5 * (v_1 - V_1) = 1
    assert out.vs[:, 0].tolist() == pytest.approx([1.0, 1.0])
    # A_0 = min(1, 0.5) * (1 + v_1 - V_0) = 0.5 * 2 = 1; A_1 = min(1, 4) * (1 + V_2 - V_1) = 1
    assert out.pg_advantages[:, 0].tolist() == pytest.approx([1.0, 1.0])
    # c_bar = 0.25: c_0 = 0.25 -> v_0 = 0.5 + 0.25 * 1 = 0.75 (rho_bar untouched: delta_0 still 0.5)
    out = vtrace(values, r, discount, log_rho, rho_bar=1.0, c_bar=0.25)
    assert out.vs[0, 0].item() == pytest.approx(0.75)
    # lambda = 0.5 halves c_0: 0.5 * min(1, 0.5) = 0.25, the same v_0 = 0.75
    out = vtrace(values, r, discount, log_rho, rho_bar=1.0, c_bar=1.0, lambda_=0.5)
    assert out.vs[0, 0].item() == pytest.approx(0.75)


def test_termination_stops_the_trace():
    # s_1 is terminal: v_0 = V_0 + rho_0 * (r_0 - V_0), nothing of step 1 leaks in.
    values, r, discount = _column(1.0, 5.0, 7.0), _column(2.0, 3.0), _column(0.0, 0.9)
    out = vtrace(values, r, discount, torch.zeros(2, 1))
    # v_0 = 1 + (2 + 0 * 5 - 1) = 2
    assert out.vs[0, 0].item() == pytest.approx(2.0)
    # v_1 = 5 + (3 + 0.9 * 7 - 5) = 9.3
    assert out.vs[1, 0].item() == pytest.approx(9.3)


def _naive_vtrace(values, r, discount, log_rho, rho_bar, c_bar, pg_rho_bar, lambda_):
    """The paper's definition (equation 1), summed term by term, for each s and each sequence."""
    num_steps, batch = r.shape
    rho = log_rho.exp()
    vs = torch.zeros(num_steps, batch, dtype=torch.float64)
    for b in range(batch):
        for s in range(num_steps):
            total = values[s, b].item()
            weight = 1.0  # prod_{i<t} discount_i * c_i, from s on
            for t in range(s, num_steps):
                delta = min(rho_bar, rho[t, b].item()) * (
                    r[t, b].item() + discount[t, b].item() * values[t + 1, b].item() - values[t, b].item()
                )
                total += weight * delta
                weight *= discount[t, b].item() * lambda_ * min(c_bar, rho[t, b].item())
            vs[s, b] = total
    advantages = torch.zeros(num_steps, batch, dtype=torch.float64)
    for b in range(batch):
        for s in range(num_steps):
            v_next = vs[s + 1, b].item() if s + 1 < num_steps else values[num_steps, b].item()
            advantages[s, b] = min(pg_rho_bar, rho[s, b].item()) * (
                r[s, b].item() + discount[s, b].item() * v_next - values[s, b].item()
            )
    return vs, advantages


@pytest.mark.parametrize(
    ("rho_bar", "c_bar", "pg_rho_bar", "lambda_"), [(1.0, 1.0, 1.0, 1.0), (2.0, 0.5, 1.5, 0.9)]
)
def test_vectorised_equals_the_naive_double_sum(rho_bar, c_bar, pg_rho_bar, lambda_):
    generator = torch.Generator().manual_seed(0)
    num_steps, batch = 6, 3
    values = torch.randn(num_steps + 1, batch, generator=generator, dtype=torch.float64)
    r = torch.randn(num_steps, batch, generator=generator, dtype=torch.float64)
    discount = 0.9 * (torch.rand(num_steps, batch, generator=generator) > 0.2).double()  # some terminals
    log_rho = 0.8 * torch.randn(num_steps, batch, generator=generator, dtype=torch.float64)
    out = vtrace(
        values, r, discount, log_rho, rho_bar=rho_bar, c_bar=c_bar, pg_rho_bar=pg_rho_bar, lambda_=lambda_
    )
    vs, advantages = _naive_vtrace(values, r, discount, log_rho, rho_bar, c_bar, pg_rho_bar, lambda_)
    torch.testing.assert_close(out.vs, vs)
    torch.testing.assert_close(out.pg_advantages, advantages)


def test_on_policy_vtrace_is_the_n_step_bootstrapped_return():
    generator = torch.Generator().manual_seed(1)
    num_steps, batch = 5, 4
    values = torch.randn(num_steps + 1, batch, generator=generator)
    r = torch.randn(num_steps, batch, generator=generator)
    discount = 0.95 * (torch.rand(num_steps, batch, generator=generator) > 0.2).float()
    out = vtrace(values, r, discount, torch.zeros(num_steps, batch), rho_bar=1.0, c_bar=1.0, lambda_=1.0)
    # rho = c = 1, lambda = 1: v_t = sum_k (prod discounts) r + (prod discounts) V(s_T), the T - t step
    # return bootstrapped at the end of the unroll.
    expected = multistep.n_step_returns(r, discount, values, n=num_steps)
    torch.testing.assert_close(out.vs, expected)
    # ... and the advantage is the one-step target on top of it minus V(s_t): G_t - V(s_t).
    torch.testing.assert_close(out.pg_advantages, expected - values[:-1])


def test_no_gradient_flows_through_targets():
    values = torch.zeros(3, 1, requires_grad=True)
    out = vtrace(values, torch.ones(2, 1), torch.ones(2, 1), torch.zeros(2, 1))
    assert not out.vs.requires_grad and not out.pg_advantages.requires_grad


def test_bad_shapes_and_thresholds_raise():
    r, discount, log_rho = torch.zeros(2, 1), torch.zeros(2, 1), torch.zeros(2, 1)
    with pytest.raises(ValueError, match="values must have shape"):
        vtrace(torch.zeros(2, 1), r, discount, log_rho)
    with pytest.raises(ValueError, match="rank 2"):
        vtrace(torch.zeros(3, 1), r, discount, torch.zeros(2))
    with pytest.raises(ValueError, match="dtype"):
        vtrace(torch.zeros(3, 1), r, discount.double(), log_rho)
    with pytest.raises(ValueError, match="rho_bar must be positive"):
        vtrace(torch.zeros(3, 1), r, discount, log_rho, rho_bar=0.0)
    with pytest.raises(ValueError, match="lambda_"):
        vtrace(torch.zeros(3, 1), r, discount, log_rho, lambda_=1.5)
