"""Torsos shared by value and policy networks."""

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn


def mlp(input_size: int, hidden_sizes: Sequence[int], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Fully connected layers with an activation after each; output size is hidden_sizes[-1]."""
    layers: list[nn.Module] = []
    size = input_size
    for hidden in hidden_sizes:
        layers += [nn.Linear(size, hidden), activation()]
        size = hidden
    return nn.Sequential(*layers)


# The dtype `NatureCnnTorso` computes in under autocast, or None for float32. One setting per process,
# like torch's thread count: a training run sets it in its learner's process (`--bfloat16`, on by
# default where the device has it natively) and puts float32 back at its end, so actor processes keep
# float32, and evaluation scripts never set it.
_torso_autocast_dtype: torch.dtype | None = None


def set_torso_bfloat16(enabled: bool) -> None:
    """Makes every `NatureCnnTorso` of this process compute in bfloat16 (mixed precision) or float32.

    Under bfloat16 the convolutions and the 512-unit layer run in autocast; their weights, gradients
    and optimiser state stay float32, and the features leave the torso as float32, so heads, losses,
    log-probabilities and ratios keep full precision. Fast only where the hardware multiplies bfloat16
    natively (CPUs with avx512_bf16 or AMX, recent GPUs); elsewhere autocast only adds conversions.
    """
    global _torso_autocast_dtype
    _torso_autocast_dtype = torch.bfloat16 if enabled else None


def native_bfloat16(device: torch.device) -> bool:
    """Whether `device` multiplies bfloat16 natively (what `--bfloat16` needs to be faster, not slower)."""
    if device.type == "cuda":
        # NVIDIA GPUs multiply bfloat16 in hardware from compute capability 8 (Ampere) on; torch's
        # is_bf16_supported() also says yes on older ones, where it is emulated (and slow).
        native = torch.version.hip is not None or torch.cuda.get_device_capability(device)[0] >= 8
        return native and torch.cuda.is_bf16_supported()
    # torch's own CPU feature probes (the ones its oneDNN kernels dispatch on); private, hence getattr.
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)


class NatureCnnTorso(nn.Module):
    """The convolutional torso of Nature DQN (Mnih et al. 2015), 512 features out.

    Takes uint8 frames [B, C, H, W] in 0..255 and scales them to [0, 1] itself, so replay and actors
    move bytes, not floats. Computes exactly `fc(convs(x / 255))`, arranged for speed on a CPU
    (benchmarks/atari_learner_speed.py, one thread on an AVX2 EPYC: 32% less CPU per PPO
    minibatch step of 256, 34% per no-grad forward of 1,032 frames, 8% per DQN step of 32; the
    convolutions are most of a learner's time):
    - the frames go to channels_last (NHWC) while still bytes: oneDNN's convolutions run faster on
      that layout, and converting uint8 moves a quarter of the bytes of float32;
    - the 1/255 scaling is folded into the first convolution's weights (`conv(x, W / 255)`), which
      saves a pass over the whole float input;
    - the ReLUs work in place (a convolution's backward needs its input, not its output).
    The parameters keep their usual layout and names, so checkpoints and shared parameters are as before.
    With `set_torso_bfloat16(True)` (a run's `--bfloat16`) the same computation runs in bfloat16
    autocast and hands float32 features on: on an EPYC with avx512_bf16, 0.53-0.68x the float32 time
    of a learner step (benchmarks/README.md).
    """

    def __init__(self, input_shape: Sequence[int]):
        super().__init__()
        channels, height, width = input_shape
        self.convs = nn.Sequential(
            nn.Conv2d(channels, 32, kernel_size=8, stride=4),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, kernel_size=4, stride=2),
            nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, kernel_size=3, stride=1),
            nn.ReLU(inplace=True),
            nn.Flatten(),
        )
        with torch.no_grad():
            conv_size = self.convs(torch.zeros(1, channels, height, width)).shape[1]
        self.fc = nn.Sequential(nn.Linear(conv_size, 512), nn.ReLU(inplace=True))
        self.output_size = 512

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _torso_autocast_dtype is None:
            return self.fc(self.conv_features(x))
        with torch.autocast(x.device.type, dtype=_torso_autocast_dtype):
            features = self.fc(self.conv_features(x))
        return features.float()

    def conv_features(self, x: torch.Tensor) -> torch.Tensor:
        """The flattened output of the convolutions, `convs(x / 255)`, for uint8 (or 0..255) frames."""
        # Under --bfloat16 the bytes go straight to bfloat16 (exact for 0..255), skipping a float32 copy.
        x = x.contiguous(memory_format=torch.channels_last).to(_torso_autocast_dtype or torch.float32)
        first = self.convs[0]
        scaled = F.conv2d(x, first.weight * (1.0 / 255.0), first.bias, first.stride)
        return self.convs[1:](scaled)


def orthogonal_init_(module: nn.Module, gain: float) -> nn.Module:
    """Orthogonal weights scaled by `gain` and zero biases for every conv and linear layer in `module`.

    The A2C/PPO lineage (OpenAI baselines, Stable-Baselines3, CleanRL) starts its ReLU torsos this way
    with gain sqrt(2); PyTorch's default (uniform, std 1 / sqrt(3 fan_in)) is sqrt(6) times smaller per
    layer, so four layers leave the Nature CNN's features ~20x smaller (mean 0.008 against 0.16 on
    Pong screens): logits then hardly depend on the screen, and Adam's fixed-size steps on the heads
    barely move the policy.
    """
    for layer in module.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.orthogonal_(layer.weight, gain=gain)
            nn.init.zeros_(layer.bias)
    return module


def fan_in_truncated_normal_init_(module: nn.Module) -> nn.Module:
    """Weights from a normal of std 1 / sqrt(fan_in) cut at two of those stds, zero biases, for every conv
    and linear layer in `module`: Sonnet's default, which DeepMind's IMPALA code built its networks with.

    PyTorch's default (uniform, std 1 / sqrt(3 fan_in)) shrinks the signal by about sqrt(3) per layer; over
    the 15-layer ResNet a ball on a Pong screen then moves the 256 features by 0.05, against 0.5-0.8 from
    this start. Orthogonal gain sqrt(2) in every layer overshoots there instead (a norm of ~30), because
    each residual block adds its branch to what it passes on.
    """
    for layer in module.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            std = 1.0 / math.sqrt(layer.weight[0].numel())
            nn.init.trunc_normal_(layer.weight, std=std, a=-2 * std, b=2 * std)
            nn.init.zeros_(layer.bias)
    return module


def he_normal_init_(module: nn.Module) -> nn.Module:
    """He's initialisation (a normal of std sqrt(2 / fan_in)) and zero biases for every conv and linear
    layer in `module`, the output layer included: how CleanRL's discrete SAC starts its actor and critics
    on Atari (`sac.train` says why the zoo's SAC follows it there)."""
    for layer in module.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(layer.weight, mode="fan_in", nonlinearity="relu")
            nn.init.zeros_(layer.bias)
    return module


class LiveUnits:
    """The fraction of each ReLU layer's units in `module` that fire (output > 0) for at least one input
    of the latest batch the module saw with gradient enabled (the learner's loss pass, not its no-grad
    target passes nor the evaluation's). A unit is one channel at one position of a convolution's output,
    or one feature of a linear layer's.

    A layer whose units all stay at zero passes nothing on and gets no gradient back, so it never fires
    again: the network ignores its input from there on. A learner logs the smallest of the fractions to
    make that visible while a run trains (SAC's actors on Pong lost every unit of a convolution within
    200k env steps; docs/agents/sac.md). Recording keeps a reference to each layer's latest output and
    nothing more, so a learner step pays nothing; the fractions are computed when read.

    Args:
      module: the network whose `nn.ReLU` layers to watch.
      with_grad_only: record only passes with gradient enabled (a learner's); False records every pass
        (a one-off measure of a network under no_grad, as `sac.value_check` takes).
    """

    def __init__(self, module: nn.Module, with_grad_only: bool = True):
        self._outputs: dict[str, torch.Tensor] = {}
        self._with_grad_only = with_grad_only
        self._hooks = [
            layer.register_forward_hook(self._recorder(name))
            for name, layer in module.named_modules()
            if isinstance(layer, nn.ReLU)
        ]

    def _recorder(self, name: str):
        def record(layer: nn.Module, inputs, output: torch.Tensor) -> None:
            if torch.is_grad_enabled() or not self._with_grad_only:
                self._outputs[name] = output.detach()

        return record

    @property
    def num_layers(self) -> int:
        """How many ReLU layers `module` has (0: nothing to count)."""
        return len(self._hooks)

    def remove(self) -> None:
        """Stops recording (removes the hooks from the module)."""
        for hook in self._hooks:
            hook.remove()

    def fractions(self) -> dict[str, float]:
        """Layer name -> fraction of its units alive; empty before the first recorded batch."""
        return {name: (x > 0).flatten(1).any(0).float().mean().item() for name, x in self._outputs.items()}

    def smallest(self) -> float:
        """The smallest layer's fraction (NaN when nothing is recorded yet, or the module has no ReLU)."""
        return min(self.fractions().values(), default=float("nan"))


def is_image_observation(observation_shape: Sequence[int]) -> bool:
    """Atari-style observations are [C, H, W]; classic control ones are flat vectors."""
    return len(observation_shape) == 3


# Up to this many steps where some sequence starts an episode, `lstm_with_resets` calls the LSTM once
# per stretch between them; with more, it runs the masked loop. Measured on R2D2's CartPole learner
# (batches of 32 windows of 20 steps; benchmarks/r2d2_learner_speed.py --compare, load 33-36): with
# about 1, 5 and 15 such steps per batch, splitting cost 0.92x, 1.1x and 1.9x the loop.
MAX_RESETS_TO_SPLIT = 2


def lstm_with_resets(
    lstm: nn.LSTM,
    inputs: torch.Tensor,
    hidden_state: tuple[torch.Tensor, torch.Tensor],
    first: torch.Tensor,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A one-layer `lstm` over time-major `inputs` [T, B, F] from `hidden_state` (h, c) [1, B, H], with
    the state zeroed before every step where `first` [T, B] is True (an episode starts there).

    The same as stepping the LSTM one step at a time and zeroing the state where `first`, done in the
    cheaper of two ways. With at most `MAX_RESETS_TO_SPLIT` steps after step 0 where some sequence
    starts an episode (most replayed windows once episodes are long), one `lstm` call per stretch
    between them (a single call when there is none). With more (short episodes: splitting there costs
    up to one call per step), a loop over time of the LSTM's equations with the state masked,

        h, c = keep_t * h, keep_t * c                     keep_t = 0 where first[t], else 1
        i, f, g, o = x_t W_ih^T + b_ih + b_hh + h W_hh^T  (x W_ih^T for all steps in one product)
        c = sigmoid(f) c + sigmoid(i) tanh(g);  h = sigmoid(o) tanh(c).

    Returns:
      (outputs h_t [T, B, H], the state after the last step (h, c) each [1, B, H]).
    """
    if lstm.num_layers != 1 or lstm.bidirectional or lstm.batch_first or lstm.proj_size:
        raise ValueError("lstm_with_resets takes a one-layer, one-direction, time-major nn.LSTM")
    if first.shape != inputs.shape[:2]:
        raise ValueError(f"first {tuple(first.shape)} must be [T, B] of inputs {tuple(inputs.shape)}")
    keep = (~first).to(inputs.dtype).unsqueeze(-1)  # [T, B, 1]
    num_steps = inputs.shape[0]
    starts = first.any(dim=1).tolist()  # [T]: some sequence starts an episode at step t
    reset_times = [t for t in range(1, num_steps) if starts[t]]
    if len(reset_times) <= MAX_RESETS_TO_SPLIT:
        bounds = [0, *reset_times, num_steps]
        outputs = []
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            hidden_state = (hidden_state[0] * keep[start], hidden_state[1] * keep[start])
            output, hidden_state = lstm(inputs[start:end], hidden_state)
            outputs.append(output)
        return torch.cat(outputs) if len(outputs) > 1 else outputs[0], hidden_state
    bias = lstm.bias_ih_l0 + lstm.bias_hh_l0 if lstm.bias else None
    # unbind: one view per step whose backward stacks the steps' gradients. Indexing gates_x[t] instead
    # gave each step's gradient a zero-filled [T, B, 4H] copy to add up: that was a third of the
    # backward pass (the values are the same: x + 0 = x).
    gates_x = nn.functional.linear(inputs, lstm.weight_ih_l0, bias).unbind(0)  # T x [B, 4H]
    keep_t = keep.unbind(0)  # T x [B, 1]
    weight_hh = lstm.weight_hh_l0.t()
    h, c = hidden_state[0][0], hidden_state[1][0]  # [B, H]
    outputs = []
    for t in range(num_steps):
        if starts[t]:  # elsewhere keep_t[t] is all ones, and x * 1 = x exactly: skip the two products
            h, c = h * keep_t[t], c * keep_t[t]
        i, f, g, o = torch.addmm(gates_x[t], h, weight_hh).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outputs.append(h)
    return torch.stack(outputs), (h[None], c[None])
