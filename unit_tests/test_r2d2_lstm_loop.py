"""The masked LSTM loop of `networks.common.lstm_with_resets` (R2D2's learner, short episodes) was made
cheaper without changing a bit of what it computes: these tests run the loop as it was before (kept here,
`_previous_loop`) and the current one on the same hand-made inputs and ask for equal tensors
(`torch.equal`, not a tolerance), outputs, final state and every gradient alike. That the loop is the LSTM
with its state zeroed at episode starts is `test_lstm_with_resets.py`'s subject."""

import torch
from torch import nn

from deep_rl_zoo.networks import common


def _previous_loop(lstm, inputs, hidden_state, first):
    """The loop before the change: every step indexed gates_x[t] (each step's gradient then came back
    as a zero-filled [T, B, 4H] tensor to add up) and multiplied the state by keep[t] even where it was
    all ones."""
    keep = (~first).to(inputs.dtype).unsqueeze(-1)
    bias = lstm.bias_ih_l0 + lstm.bias_hh_l0
    gates_x = nn.functional.linear(inputs, lstm.weight_ih_l0, bias)
    weight_hh = lstm.weight_hh_l0.t()
    h, c = hidden_state[0][0], hidden_state[1][0]
    outputs = []
    for t in range(inputs.shape[0]):
        h, c = h * keep[t], c * keep[t]
        i, f, g, o = torch.addmm(gates_x[t], h, weight_hh).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outputs.append(h)
    return torch.stack(outputs), (h[None], c[None])


def _case(first_steps):
    """An LSTM of 3 inputs and 4 units over 8 steps of 3 sequences from a nonzero stored state;
    `first_steps` lists (t, b) where sequence b starts an episode."""
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4)
    x = torch.randn(8, 3, 3)
    first = torch.zeros(8, 3, dtype=torch.bool)
    for t, b in first_steps:
        first[t, b] = True
    state = (torch.randn(1, 3, 4), torch.randn(1, 3, 4))
    return lstm, x, state, first


def _run(function, lstm, x, state, first):
    x = x.clone().requires_grad_(True)
    output, (h, c) = function(lstm, x, state, first)
    # Weights 1, 2, 3, ... on the outputs, and the final state counted too, so every path carries gradient.
    weights = torch.arange(1.0, output.numel() + 1.0).view_as(output)
    loss = (output * weights).sum() + 0.5 * h.sum() - c.sum()
    grads = torch.autograd.grad(loss, [x, *lstm.parameters()])
    return output.detach(), h.detach(), c.detach(), grads


def _assert_bitwise_equal(first_steps):
    lstm, x, state, first = _case(first_steps)
    # More than MAX_RESETS_TO_SPLIT steps after step 0 with a start: the masked loop runs.
    assert len({t for t, _ in first_steps if t > 0}) > common.MAX_RESETS_TO_SPLIT
    before = _run(_previous_loop, lstm, x, state, first)
    now = _run(common.lstm_with_resets, lstm, x, state, first)
    for old, new in zip(before[:3], now[:3], strict=True):
        assert torch.equal(old, new)
    for old, new in zip(before[3], now[3], strict=True):
        assert torch.equal(old, new)


def test_masked_loop_is_bitwise_the_previous_one_with_a_start_at_step_0():
    # Starts at t = 0 (sequence 1: its stored state is dropped), 2, 5 and 7; steps 1, 3, 4, 6 have none
    # and skip the state products now.
    _assert_bitwise_equal([(0, 1), (2, 0), (5, 0), (5, 2), (7, 1)])


def test_masked_loop_is_bitwise_the_previous_one_without_a_start_at_step_0():
    # No start at t = 0: all three sequences run on from their stored state; starts at t = 1, 4 and 6.
    _assert_bitwise_equal([(1, 2), (4, 0), (6, 1)])
