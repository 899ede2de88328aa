"""`networks.common.lstm_with_resets` against the reference: nn.LSTM stepped one step at a time with the
state zeroed before every `first` step, on hand-made sequences with episode starts at known steps."""

import pytest
import torch
from torch import nn

from deep_rl_zoo.networks import common
from deep_rl_zoo.networks.common import lstm_with_resets


def _reference(lstm, x, state, first):
    """One nn.LSTM call per step, the state multiplied by 0 before a first step and by 1 otherwise."""
    outputs = []
    for t in range(x.shape[0]):
        keep = (~first[t]).float()[None, :, None]
        state = (state[0] * keep, state[1] * keep)
        output, state = lstm(x[t : t + 1], state)
        outputs.append(output)
    return torch.cat(outputs), state


def _case(split=False):
    """Sequence 0: episode starts at t = 2 and t = 5; 1: at t = 0 only (stored state ignored); 2: none
    (runs on from the stored state); 3: at t = 6, the last step. Three steps after 0 have a start: more
    than MAX_RESETS_TO_SPLIT, so the masked loop runs. With `split`, sequence 3 starts at t = 5 instead:
    two such steps, so one LSTM call per stretch [0, 2), [2, 5), [5, 7)."""
    assert common.MAX_RESETS_TO_SPLIT == 2
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 5)
    x = torch.randn(7, 4, 3, requires_grad=True)
    first = torch.zeros(7, 4, dtype=torch.bool)
    first[2, 0] = first[5, 0] = first[0, 1] = True
    first[5 if split else 6, 3] = True
    state = (torch.randn(1, 4, 5), torch.randn(1, 4, 5))  # nonzero, so a missed reset would show
    return lstm, x, state, first


@pytest.mark.parametrize("split", [False, True], ids=["masked loop", "split calls"])
def test_resets_inside_sequences_equal_the_step_by_step_reference_with_gradients(split):
    lstm, x, state, first = _case(split)
    expected, expected_state = _reference(lstm, x, state, first)
    got, got_state = lstm_with_resets(lstm, x, state, first)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_state, expected_state, rtol=1e-5, atol=1e-6)
    # Gradients with respect to the inputs and every LSTM parameter match too.
    loss_weights = torch.randn_like(expected)
    expected_grads = torch.autograd.grad((expected * loss_weights).sum(), [x, *lstm.parameters()])
    got_grads = torch.autograd.grad((got * loss_weights).sum(), [x, *lstm.parameters()])
    for e, g in zip(expected_grads, got_grads, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    # Sequence 0's outputs from t = 5 on depend only on x[5:, 0]: no gradient reaches x[:5, 0] from them.
    (grad_x,) = torch.autograd.grad(lstm_with_resets(lstm, x, state, first)[0][5:, 0].sum(), x)
    assert grad_x[:5, 0].abs().sum().item() == 0.0 and grad_x[5:, 0].abs().sum().item() > 0.0


def test_a_reset_at_step_0_only_is_one_call_that_ignores_the_stored_state():
    lstm, x, state, first = _case()
    first[:] = False
    first[0, 1] = True
    got, _ = lstm_with_resets(lstm, x, state, first)
    expected, _ = _reference(lstm, x, state, first)
    torch.testing.assert_close(got, expected)
    fresh, _ = lstm(x[:, 1:2], (torch.zeros(1, 1, 5), torch.zeros(1, 1, 5)))
    torch.testing.assert_close(got[:, 1:2], fresh)


def test_bad_input_raises():
    lstm, x, state, first = _case()
    with pytest.raises(ValueError, match="first"):
        lstm_with_resets(lstm, x, state, first[:, :2])
    with pytest.raises(ValueError, match="one-layer"):
        lstm_with_resets(nn.LSTM(3, 5, num_layers=2), x, state, first)
