"""The Nature CNN torso's fast path (channels_last, 1/255 folded into the first convolution, in-place
ReLUs) computes exactly `fc(convs(x / 255))` and keeps the parameters' names and layout; `LiveUnits` counts the
ReLU units that still fire."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from deep_rl_zoo import process_setup
from deep_rl_zoo.config import RunConfig
from deep_rl_zoo.networks import common

torch.set_num_threads(1)


def _reference(torso: common.NatureCnnTorso, frames: torch.Tensor) -> torch.Tensor:
    """The textbook computation, layer by layer, NCHW, out-of-place."""
    x = frames.float() / 255.0
    for index in (0, 2, 4):
        x = torch.relu(torso.convs[index](x))
    return torch.relu(torso.fc[0](x.flatten(1)))


def test_hand_made_weights_give_the_hand_computed_features():
    # Frames [1, 36, 36]: 8x8 stride 4 -> 8x8, 4x4 stride 2 -> 3x3, 3x3 -> 1x1, so 64 conv features.
    torso = common.NatureCnnTorso((1, 36, 36))
    with torch.no_grad():
        torso.convs[0].weight.fill_(1 / 64)  # each position: 64 taps of 255 / 255 = 1 -> 64 / 64 = 1.0
        torso.convs[0].bias.fill_(-0.5)  # 1.0 - 0.5 = 0.5
        torso.convs[2].weight.fill_(1 / 512)  # 32 channels x 16 taps of 0.5 -> 512 * 0.5 / 512 = 0.5
        torso.convs[2].bias.zero_()
        torso.convs[4].weight.fill_(1 / 1024)  # 64 channels x 9 taps of 0.5 -> 576 * 0.5 / 1024 = 0.28125
        torso.convs[4].bias.zero_()
        torso.fc[0].weight.fill_(1 / 64)  # 64 features of 0.28125 -> 0.28125, then + bias
        torso.fc[0].bias.copy_(torch.linspace(-0.5, 0.5, 512))
    white = torch.full((1, 1, 36, 36), 255, dtype=torch.uint8)
    conv_features = torso.conv_features(white)
    torch.testing.assert_close(conv_features, torch.full((1, 64), 0.28125))
    expected = torch.relu(0.28125 + torch.linspace(-0.5, 0.5, 512)).unsqueeze(0)  # ReLU cuts the low biases
    torch.testing.assert_close(torso(white), expected)
    black = torch.zeros_like(white)  # conv1: 0 - 0.5 -> ReLU -> 0, so every later feature is 0 too
    torch.testing.assert_close(torso.conv_features(black), torch.zeros(1, 64))


def test_matches_the_textbook_computation_in_value_and_gradient():
    torch.manual_seed(0)
    torso = common.orthogonal_init_(common.NatureCnnTorso((4, 84, 84)), 2**0.5)
    frames = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    kept = frames.clone()
    fast = torso(frames)
    fast_grads = torch.autograd.grad(fast.square().sum(), list(torso.parameters()))
    slow = _reference(torso, frames)
    slow_grads = torch.autograd.grad(slow.square().sum(), list(torso.parameters()))
    # Only float32 rounding differs (x * (W / 255) against (x / 255) * W): relative ~1e-6.
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
    for a, b in zip(fast_grads, slow_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert torch.equal(frames, kept)  # the in-place ReLUs never touch the caller's frames


def test_parameters_keep_their_names_and_layout():
    torso = common.NatureCnnTorso((4, 84, 84))
    assert list(torso.state_dict()) == [
        "convs.0.weight", "convs.0.bias", "convs.2.weight", "convs.2.bias",
        "convs.4.weight", "convs.4.bias", "fc.0.weight", "fc.0.bias",
    ]  # fmt: skip
    # Plain contiguous (NCHW) weights: checkpoints and the actors' shared parameter copies are as before.
    assert all(p.is_contiguous() for p in torso.parameters())
    torso(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).sum().backward()
    assert all(p.grad.is_contiguous() for p in torso.parameters())
    assert isinstance(torso.convs[1], nn.ReLU) and torso.convs[1].inplace


@pytest.fixture
def bfloat16_torsos():
    """Turns `--bfloat16`'s process-wide setting on for one test and always back off."""
    common.set_torso_bfloat16(True)
    yield
    common.set_torso_bfloat16(False)


def _bfloat16_reference(torso: common.NatureCnnTorso, frames: torch.Tensor) -> torch.Tensor:
    """What mixed precision must compute: every layer's inputs, weights and outputs rounded to
    bfloat16 (the 1/255 folded into conv1's weights before rounding), features back to float32."""
    x = frames.contiguous(memory_format=torch.channels_last).to(torch.bfloat16)
    weights = [torso.convs[0].weight * (1.0 / 255.0), torso.convs[2].weight, torso.convs[4].weight]
    for layer, weight in zip((torso.convs[0], torso.convs[2], torso.convs[4]), weights, strict=True):
        x = torch.relu(F.conv2d(x, weight.bfloat16(), layer.bias.bfloat16(), layer.stride))
    fc = torso.fc[0]
    return torch.relu(F.linear(x.flatten(1), fc.weight.bfloat16(), fc.bias.bfloat16())).float()


def test_bfloat16_torso_computes_each_layer_in_bfloat16_and_hands_float32_on(bfloat16_torsos):
    torch.manual_seed(0)
    torso = common.orthogonal_init_(common.NatureCnnTorso((4, 84, 84)), 2**0.5)
    frames = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    features = torso(frames)
    assert features.dtype == torch.float32  # heads, losses and log-probabilities stay float32
    common.set_torso_bfloat16(False)
    exact = torso(frames)
    error = (features - exact).abs().max() / exact.abs().max()
    assert 1e-4 < error < 3e-2  # really bfloat16 (8-bit mantissa: ~0.4% per rounding), and no worse
    # It is the layer-by-layer bfloat16 computation (bit for bit here; a CPU without native bfloat16
    # runs other kernels, whose accumulation order may flip a last bit), far closer than float32 is.
    off_reference = (features - _bfloat16_reference(torso, frames)).abs().mean()
    assert off_reference < 0.1 * (features - exact).abs().mean()


def test_bfloat16_torso_keeps_float32_weights_and_gradients_close_to_exact(bfloat16_torsos):
    torch.manual_seed(1)
    torso = common.orthogonal_init_(common.NatureCnnTorso((4, 84, 84)), 2**0.5)
    frames = torch.randint(0, 256, (8, 4, 84, 84), dtype=torch.uint8)
    mixed_grads = torch.autograd.grad(torso(frames).square().sum(), list(torso.parameters()))
    common.set_torso_bfloat16(False)
    exact_grads = torch.autograd.grad(torso(frames).square().sum(), list(torso.parameters()))
    assert all(p.dtype == torch.float32 for p in torso.parameters())  # the optimiser's master weights
    for mixed, exact in zip(mixed_grads, exact_grads, strict=True):
        assert mixed.dtype == torch.float32
        cosine = F.cosine_similarity(mixed.flatten(), exact.flatten(), dim=0)
        assert cosine > 0.99, cosine  # each gradient points where the exact one does


def test_off_by_default_and_bit_identical_to_float32_when_turned_off():
    torch.manual_seed(2)
    torso = common.NatureCnnTorso((4, 84, 84))
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    before = torso(frames)
    common.set_torso_bfloat16(True)
    common.set_torso_bfloat16(False)
    assert torch.equal(torso(frames), before)
    torch.testing.assert_close(before, _reference(torso, frames), rtol=1e-5, atol=1e-5)


def test_bfloat16_flag_sets_this_process_torsos_and_warns_where_it_would_be_slower(monkeypatch, capsys):
    torch.manual_seed(3)
    torso = common.NatureCnnTorso((4, 84, 84))
    frames = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    exact = torso(frames)
    monkeypatch.setattr(common, "native_bfloat16", lambda device: False)
    try:
        process_setup.set_learner_precision(RunConfig(bfloat16=True), torch.device("cpu"))
        assert not torch.equal(torso(frames), exact)
        assert "no native bfloat16: expect it to be slower" in capsys.readouterr().out
        process_setup.set_learner_precision(RunConfig(), torch.device("cpu"))  # a run without the flag
        assert torch.equal(torso(frames), exact)
        assert capsys.readouterr().out == ""
    finally:
        common.set_torso_bfloat16(False)


@pytest.mark.parametrize(
    ("flag", "environment", "native", "saved", "expected"),
    [
        (None, "Pong", True, None, True),  # unset: bfloat16 where the device multiplies it natively
        (None, "Pong", False, None, False),  # ... float32 where it does not
        (None, "CartPole-v1", True, None, False),  # only the Atari torso reads it: float32 recorded
        (False, "Pong", True, None, False),  # --nobfloat16 wins over the device
        (None, "Pong", True, {"bfloat16": False}, False),  # a resumed run keeps its own precision
        (None, "Pong", False, {"bfloat16": True}, True),  # ... even on a device without native bfloat16
        (None, "Pong", True, {"learning_rate": 1.0}, True),  # a checkpoint from before the flag: decide
        (True, "Pong", True, {"bfloat16": False}, True),  # a flag given now wins over the checkpoint
    ],
)
def test_unset_bfloat16_is_decided_once_and_written_into_the_config(
    monkeypatch, flag, environment, native, saved, expected
):
    monkeypatch.setattr(common, "native_bfloat16", lambda device: native)
    config = RunConfig(environment_name=environment, bfloat16=flag)
    process_setup.set_learner_precision(config, torch.device("cpu"), saved)
    assert config.bfloat16 is expected  # what config.txt and the checkpoints then record
    assert common._torso_autocast_dtype == (torch.bfloat16 if expected else None)


def test_bfloat16_resumed_on_a_device_without_it_warns(monkeypatch, capsys):
    monkeypatch.setattr(common, "native_bfloat16", lambda device: False)
    process_setup.set_learner_precision(RunConfig(), torch.device("cpu"), {"bfloat16": True})
    assert "no native bfloat16: expect it to be slower" in capsys.readouterr().out
    process_setup.set_learner_precision(RunConfig(), torch.device("cpu"), {"bfloat16": False})
    assert capsys.readouterr().out == ""


def test_native_bfloat16_on_cuda_needs_an_ampere_or_later_gpu(monkeypatch):
    # torch's is_bf16_supported() says yes on older GPUs too, where bfloat16 is emulated: slower.
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    monkeypatch.setattr(torch.version, "hip", None)
    for capability, native in (((7, 5), False), ((8, 0), True), ((9, 0), True)):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=capability: c)
        assert common.native_bfloat16(torch.device("cuda")) is native, capability


def test_live_units_count_each_unit_that_fires_on_some_input_of_the_latest_batch_with_gradient():
    layer = nn.Linear(1, 3)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0], [-1.0], [0.0]]))
        layer.bias.copy_(torch.tensor([0.0, 0.0, -1.0]))
    net = nn.Sequential(layer, nn.ReLU(), nn.Linear(3, 2), nn.ReLU())
    with torch.no_grad():
        net[2].weight.fill_(1.0)
        net[2].bias.copy_(torch.tensor([0.0, -100.0]))
    live = common.LiveUnits(net)
    assert math.isnan(live.smallest())  # nothing recorded yet
    net(torch.tensor([[2.0], [3.0]]))
    # x = 2, 3: unit 0 fires (x > 0), unit 1 never (-x), unit 2 never (-1): 1 of 3; the second layer's
    # unit 0 sums 2 or 3 and fires, unit 1 (bias -100) never: 1 of 2.
    assert live.fractions() == {"1": pytest.approx(1 / 3), "3": 0.5}
    net(torch.tensor([[2.0], [-3.0]]))  # x = -3 brings unit 1 in (3 > 0): 2 of 3
    assert live.fractions()["1"] == pytest.approx(2 / 3)
    with torch.no_grad():
        net(torch.tensor([[-1.0]]))  # a no-grad pass (a target, an evaluation) is not the learner's batch
    assert live.fractions()["1"] == pytest.approx(2 / 3) and live.smallest() == 0.5


def test_live_units_see_a_dead_convolution_of_the_nature_torso():
    torso = common.NatureCnnTorso((4, 84, 84))
    live = common.LiveUnits(torso)
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    torso(frames)
    assert set(live.fractions()) == {"convs.1", "convs.3", "convs.5", "fc.1"}
    assert live.smallest() > 0.2  # a fresh torso: most units fire on some of three random screens
    with torch.no_grad():
        torso.convs[4].bias.fill_(-1e6)  # the third convolution can no longer fire
    torso(frames)
    assert live.fractions()["convs.5"] == 0.0 and live.smallest() == 0.0
    live.remove()
    with torch.no_grad():
        torso.convs[4].bias.zero_()  # alive again, but no longer recorded: the dead batch's fractions stay
    torso(frames)
    assert live.fractions()["convs.5"] == 0.0
