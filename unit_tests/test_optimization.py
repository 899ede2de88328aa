"""The one gradient step every agent takes: finite-loss check before any change, clip, step, norm."""

import pytest
import torch
from torch import nn

from deep_rl_zoo import optimization
from deep_rl_zoo.errors import NonFiniteLossError


def _sgd_on(*values):
    parameters = [nn.Parameter(torch.tensor(v, dtype=torch.float32)) for v in values]
    return parameters, torch.optim.SGD(parameters, lr=1.0)


def test_step_reports_the_loss_and_the_unclipped_norm_and_clips_the_update():
    (w,), optimizer = _sgd_on([0.0, 0.0])
    # loss = 3 w0 + 4 w1: gradient (3, 4), norm sqrt(9 + 16) = 5; clipped to norm 1: (0.6, 0.8).
    loss = (w * torch.tensor([3.0, 4.0])).sum() + 2.0
    step = optimization.gradient_step(loss, optimizer, [w], max_grad_norm=1.0, learner_step=1)
    assert step == (2.0, pytest.approx(5.0))
    assert w.detach().tolist() == pytest.approx([-0.6, -0.8])  # w - lr * clipped gradient


def test_no_clipping_still_reports_the_norm():
    (w,), optimizer = _sgd_on([0.0, 0.0])
    loss = (w * torch.tensor([3.0, 4.0])).sum()
    step = optimization.gradient_step(loss, optimizer, [w], max_grad_norm=0.0, learner_step=1)
    assert step.grad_norm == pytest.approx(5.0)
    assert w.detach().tolist() == pytest.approx([-3.0, -4.0])  # the whole gradient


def test_a_non_finite_loss_names_the_step_and_leaves_the_parameters_alone():
    (w,), optimizer = _sgd_on([1.0, 2.0])
    loss = (w * torch.tensor([float("nan"), 1.0])).sum()
    with pytest.raises(NonFiniteLossError, match="learner step 7"):
        optimization.gradient_step(loss, optimizer, [w], max_grad_norm=1.0, learner_step=7)
    assert w.detach().tolist() == [1.0, 2.0] and w.grad is None  # no backward, no step


def test_groups_are_clipped_each_on_its_own_and_the_norm_is_over_all():
    (a, b), optimizer = _sgd_on([0.0], [0.0])
    a.grad, b.grad = torch.tensor([3.0]), torch.tensor([0.5])  # accumulated elsewhere
    step = optimization.apply_gradients(1.5, optimizer, [[a], [b]], max_grad_norm=1.0, learner_step=1)
    # a's gradient 3 is clipped to 1; b's 0.5 is under the limit. Norm before clipping: sqrt(9 + 0.25).
    assert a.item() == pytest.approx(-1.0) and b.item() == pytest.approx(-0.5)
    assert step == (1.5, pytest.approx(9.25**0.5))


def test_apply_gradients_refuses_a_non_finite_loss_value():
    (w,), optimizer = _sgd_on([1.0])
    w.grad = torch.tensor([1.0])
    with pytest.raises(NonFiniteLossError, match="learner step 3"):
        optimization.apply_gradients(float("inf"), optimizer, [w], 1.0, learner_step=3)
    assert w.item() == 1.0


def test_adam_is_the_fused_implementation():
    optimizer = optimization.adam([nn.Parameter(torch.zeros(2))], learning_rate=1e-3, eps=1e-5)
    assert optimizer.defaults["fused"] is True and optimizer.defaults["eps"] == 1e-5
