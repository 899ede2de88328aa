"""Torsos shared by value and policy networks."""

from collections.abc import Sequence

import torch
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
    move bytes, not floats.
    """

    def __init__(self, input_shape: Sequence[int]):
        super().__init__()
        channels, height, width = input_shape
        self.convs = nn.Sequential(
            nn.Conv2d(channels, 32, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            conv_size = self.convs(torch.zeros(1, channels, height, width)).shape[1]
        self.fc = nn.Sequential(nn.Linear(conv_size, 512), nn.ReLU())
        self.output_size = 512

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.convs(x.float() / 255.0))


def is_image_observation(observation_shape: Sequence[int]) -> bool:
    """Atari-style observations are [C, H, W]; classic control ones are flat vectors."""
    return len(observation_shape) == 3
