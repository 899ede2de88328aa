"""Torsos shared by value and policy networks."""

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


class NatureCnnTorso(nn.Module):
    """The convolutional torso of Nature DQN (Mnih et al. 2015), 512 features out.

    Takes uint8 frames [B, C, H, W] in 0..255 and scales them to [0, 1] itself, so replay and actors
    move bytes, not floats. Computes exactly `fc(convs(x / 255))`, arranged for speed on a CPU
    (benchmarks/atari_learner_speed.py, one thread on this machine's AVX2 EPYC: 32% less CPU per PPO
    minibatch step of 256, 34% per no-grad forward of 1,032 frames, 8% per DQN step of 32; the
    convolutions are most of a learner's time):
    - the frames go to channels_last (NHWC) while still bytes: oneDNN's convolutions run faster on
      that layout, and converting uint8 moves a quarter of the bytes of float32;
    - the 1/255 scaling is folded into the first convolution's weights (`conv(x, W / 255)`), which
      saves a pass over the whole float input;
    - the ReLUs work in place (a convolution's backward needs its input, not its output).
    The parameters keep their usual layout and names, so checkpoints and shared parameters are as before.
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
        return self.fc(self.conv_features(x))

    def conv_features(self, x: torch.Tensor) -> torch.Tensor:
        """The flattened output of the convolutions, `convs(x / 255)`, for uint8 (or 0..255) frames."""
        x = x.contiguous(memory_format=torch.channels_last).float()
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


def is_image_observation(observation_shape: Sequence[int]) -> bool:
    """Atari-style observations are [C, H, W]; classic control ones are flat vectors."""
    return len(observation_shape) == 3
