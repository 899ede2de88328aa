"""Tests of the categorical (C51 / Rainbow) losses of value_learning: worked examples, a naive loop
version of the projection (Bellemare et al. 2017, Algorithm 1), and the usual properties."""

import math

import numpy as np
import pytest
import torch

from deep_rl_zoo import value_learning

ATOMS = torch.tensor([0.0, 1.0, 2.0])  # dz = 1


def test_projection_worked_example():
    # 0.5 sits half-way between atoms 0 and 1: 0.2 -> 0.1 + 0.1.
    # 2.5 is clipped to 2: 0.5 -> atom 2.  -1 is clipped to 0: 0.3 -> atom 0.
    # atom 0: 0.1 + 0.3 = 0.4; atom 1: 0.1; atom 2: 0.5.
    z_p = torch.tensor([[0.5, 2.5, -1.0]])
    probs = torch.tensor([[0.2, 0.5, 0.3]])
    out = value_learning.categorical_projection(z_p, probs, ATOMS)
    torch.testing.assert_close(out, torch.tensor([[0.4, 0.1, 0.5]]))


def _naive_projection(z_p: np.ndarray, probs: np.ndarray, z_q: np.ndarray) -> np.ndarray:
    """Algorithm 1 of the paper, one atom at a time."""
    v_min, v_max, dz = z_q[0], z_q[-1], z_q[1] - z_q[0]
    out = np.zeros((z_p.shape[0], z_q.shape[0]))
    for b in range(z_p.shape[0]):
        for i in range(z_p.shape[1]):
            position = (min(max(z_p[b, i], v_min), v_max) - v_min) / dz
            lower, upper = math.floor(position), math.ceil(position)
            if lower == upper:  # exactly on an atom
                out[b, lower] += probs[b, i]
            else:
                out[b, lower] += probs[b, i] * (upper - position)
                out[b, upper] += probs[b, i] * (position - lower)
    return out


def test_projection_equals_the_naive_loop():
    generator = torch.Generator().manual_seed(0)
    z_q = torch.linspace(-10.0, 10.0, 11)
    z_p = torch.randn(6, 7, generator=generator) * 8  # some atoms fall outside [-10, 10]
    z_p[0, :3] = torch.tensor([-10.0, 0.0, 4.0])  # and some exactly on support points
    probs = torch.softmax(torch.randn(6, 7, generator=generator), dim=1)
    out = value_learning.categorical_projection(z_p, probs, z_q)
    expected = _naive_projection(z_p.double().numpy(), probs.double().numpy(), z_q.double().numpy())
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-6)
    torch.testing.assert_close(out.sum(dim=1), torch.ones(6))  # mass is conserved


def _worked_inputs():
    # One transition, 2 actions, atoms 0, 1, 2.
    # At s_t, action 0 is uniform (mean 1); action 1 has probs 1/4, 1/4, 1/2 (mean 0.25 + 1 = 1.25).
    logits_q_t = torch.log(torch.tensor([[[1 / 3, 1 / 3, 1 / 3], [0.25, 0.25, 0.5]]]))
    logits_q_tm1 = torch.zeros(1, 2, 3, requires_grad=True)  # uniform prediction for both actions
    return dict(
        atoms_tm1=ATOMS,
        logits_q_tm1=logits_q_tm1,
        a_tm1=torch.tensor([1]),
        r_t=torch.tensor([0.5]),
        discount_t=torch.tensor([0.5]),
        atoms_t=ATOMS,
        logits_q_t=logits_q_t,
    )


def test_categorical_qlearning_worked_example():
    inputs = _worked_inputs()
    output = value_learning.categorical_dist_qlearning(**inputs)
    # Greedy at s_t: action 1 (1.25 > 1). Target atoms 0.5 + 0.5 * [0, 1, 2] = [0.5, 1.0, 1.5] with
    # probs [1/4, 1/4, 1/2]: 0.5 -> 1/8 + 1/8, 1.0 -> 1/4 on atom 1, 1.5 -> 1/4 + 1/4.
    # target = [1/8, 1/8 + 1/4 + 1/4, 1/4] = [0.125, 0.625, 0.25].
    torch.testing.assert_close(output.extra.target, torch.tensor([[0.125, 0.625, 0.25]]))
    # Prediction uniform: cross-entropy = -sum target * log(1/3) = log 3.
    torch.testing.assert_close(output.loss, torch.tensor([math.log(3.0)]))
    # KL = log 3 - H(target), H = -(0.125 log 0.125 + 0.625 log 0.625 + 0.25 log 0.25).
    entropy = -(0.125 * math.log(0.125) + 0.625 * math.log(0.625) + 0.25 * math.log(0.25))
    torch.testing.assert_close(output.extra.kl, torch.tensor([math.log(3.0) - entropy]))


def test_double_categorical_qlearning_lets_the_selector_choose():
    inputs = _worked_inputs()
    # The online network prefers action 0, so the target network's uniform distribution of action 0
    # is used: atoms [0.5, 1.0, 1.5] with 1/3 each -> [1/6, 1/6 + 1/3 + 1/6, 1/6].
    output = value_learning.categorical_dist_double_qlearning(
        **inputs, q_t_selector=torch.tensor([[2.0, 1.0]])
    )
    torch.testing.assert_close(output.extra.target, torch.tensor([[1 / 6, 2 / 3, 1 / 6]]))
    # With the selector agreeing with the target network, both losses coincide.
    agreeing = value_learning.categorical_dist_double_qlearning(
        **inputs, q_t_selector=torch.tensor([[1.0, 1.25]])
    )
    plain = value_learning.categorical_dist_qlearning(**inputs)
    torch.testing.assert_close(agreeing.loss, plain.loss)


def _naive_categorical_loss(atoms, logits_q_tm1, a_tm1, r_t, discount_t, logits_q_t, q_t_selector=None):
    losses = []
    for b in range(logits_q_tm1.shape[0]):
        probs_t = torch.softmax(logits_q_t[b], dim=1)  # [A, K]
        means = q_t_selector[b] if q_t_selector is not None else (probs_t * atoms).sum(dim=1)
        best = int(torch.argmax(means))
        z = (r_t[b] + discount_t[b] * atoms).numpy()[None]
        target = _naive_projection(z, probs_t[best].numpy()[None], atoms.numpy())[0]
        log_probs = torch.log_softmax(logits_q_tm1[b, a_tm1[b]], dim=0).detach().numpy()
        losses.append(-(target * log_probs).sum())
    return np.array(losses)


@pytest.mark.parametrize("double", [False, True])
def test_batched_loss_equals_the_naive_loop(double):
    generator = torch.Generator().manual_seed(1)
    batch, actions, atoms = 5, 3, torch.linspace(-5.0, 5.0, 11)
    logits_q_tm1 = torch.randn(batch, actions, 11, generator=generator)
    logits_q_t = torch.randn(batch, actions, 11, generator=generator)
    a_tm1 = torch.randint(0, actions, (batch,), generator=generator)
    r_t = torch.randn(batch, generator=generator) * 3
    discount_t = torch.tensor([0.99, 0.0, 0.9, 0.99, 0.5])
    selector = torch.randn(batch, actions, generator=generator) if double else None
    if double:
        output = value_learning.categorical_dist_double_qlearning(
            atoms, logits_q_tm1, a_tm1, r_t, discount_t, atoms, logits_q_t, selector
        )
    else:
        output = value_learning.categorical_dist_qlearning(
            atoms, logits_q_tm1, a_tm1, r_t, discount_t, atoms, logits_q_t
        )
    expected = _naive_categorical_loss(atoms, logits_q_tm1, a_tm1, r_t, discount_t, logits_q_t, selector)
    np.testing.assert_allclose(output.loss.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_gradients_reach_the_prediction_but_not_the_target():
    inputs = _worked_inputs()
    inputs["logits_q_t"] = inputs["logits_q_t"].clone().requires_grad_(True)
    selector = torch.tensor([[2.0, 1.0]], requires_grad=True)
    value_learning.categorical_dist_double_qlearning(**inputs, q_t_selector=selector).loss.sum().backward()
    assert inputs["logits_q_tm1"].grad is not None
    assert inputs["logits_q_tm1"].grad[0, 0].abs().sum() == 0  # only the action taken is trained
    assert inputs["logits_q_t"].grad is None and selector.grad is None


def test_termination_and_truncation_give_different_targets():
    inputs = _worked_inputs()
    terminated = value_learning.categorical_dist_qlearning(**{**inputs, "discount_t": torch.tensor([0.0])})
    # Terminal: all mass on r = 0.5, half on atom 0 and half on atom 1.
    torch.testing.assert_close(terminated.extra.target, torch.tensor([[0.5, 0.5, 0.0]]))
    truncated = value_learning.categorical_dist_qlearning(**inputs)  # still bootstraps
    assert not torch.allclose(terminated.extra.target, truncated.extra.target)


@pytest.mark.parametrize(
    "name, bad",
    [
        ("logits_q_tm1", torch.zeros(1, 2)),  # rank 2 instead of 3
        ("a_tm1", torch.tensor([1.0])),  # float actions
        ("r_t", torch.zeros(2)),  # batch of 2 against 1
        ("atoms_t", torch.zeros(4)),  # 4 atoms against 3 logits
        ("discount_t", torch.zeros(1, dtype=torch.float64)),
    ],
)
def test_wrong_rank_dtype_or_size_raises(name, bad):
    inputs = _worked_inputs()
    inputs[name] = bad
    with pytest.raises(ValueError):
        value_learning.categorical_dist_qlearning(**inputs)


def test_projection_rejects_an_uneven_support():
    with pytest.raises(ValueError, match="evenly spaced"):
        value_learning.categorical_projection(
            torch.zeros(1, 3), torch.ones(1, 3) / 3, torch.tensor([0.0, 1.0, 3.0])
        )


def _float64_projection(z_p: np.ndarray, probs: np.ndarray, z_q: np.ndarray) -> np.ndarray:
    """The projection in float64 on the very same support points (the float32 support's values), each
    atom split by the width of its own interval."""
    out = np.zeros((z_p.shape[0], z_q.shape[0]))
    for b in range(z_p.shape[0]):
        for i in range(z_p.shape[1]):
            x = min(max(z_p[b, i], z_q[0]), z_q[-1])
            j = min(int(np.searchsorted(z_q, x, side="right")) - 1, z_q.shape[0] - 2)
            upper_share = (x - z_q[j]) / (z_q[j + 1] - z_q[j])
            out[b, j] += probs[b, i] * (1.0 - upper_share)
            out[b, j + 1] += probs[b, i] * upper_share
    return out


def test_projection_on_the_atari_support_matches_float64():
    # C51 / Rainbow's Atari support: 51 atoms on [-10, 10]. In float32 its gaps are not all equal
    # (0.39999962 to 0.40000057), so a projection that divides by the first gap alone puts an atom lying
    # exactly on support point j a hair away from it and leaks up to 3.4e-5 of its mass into j + 1.
    z_q = torch.linspace(-10.0, 10.0, 51)
    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(4, 51, generator=generator), dim=1)
    # Row 0: the support itself (r = 0, discount 1): the projection must be the identity.
    # Rows 1-3: r + discount * z for typical Atari targets (clipped rewards, discount 0.99 or terminal).
    r = torch.tensor([0.0, 1.0, -1.0, 1.0]).unsqueeze(1)
    discount = torch.tensor([1.0, 0.99, 0.99, 0.0]).unsqueeze(1)
    z_p = r + discount * z_q.unsqueeze(0)
    out = value_learning.categorical_projection(z_p, probs, z_q)
    np.testing.assert_array_less(np.abs(out[0].numpy() - probs[0].numpy()), 1e-6)
    expected = _float64_projection(z_p.double().numpy(), probs.double().numpy(), z_q.double().numpy())
    np.testing.assert_array_less(np.abs(out.double().numpy() - expected), 1e-6)
