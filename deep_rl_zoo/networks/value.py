"""Q-networks: an MLP for vector observations and the Nature CNN for Atari."""

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

from deep_rl_zoo.networks import common


class QNetworkOutput(NamedTuple):
    q_values: torch.Tensor  # [B, A]


class MlpQNetwork(nn.Module):
    """Q-network for vector observations: MLP torso and a linear head of one value per action."""

    def __init__(self, state_dim: int, num_actions: int, hidden_sizes: Sequence[int] = (128, 128)):
        super().__init__()
        self.torso = common.mlp(state_dim, hidden_sizes)
        self.head = nn.Linear(hidden_sizes[-1], num_actions)

    def forward(self, x: torch.Tensor) -> QNetworkOutput:
        return QNetworkOutput(q_values=self.head(self.torso(x.float())))


class NatureCnnQNetwork(nn.Module):
    """The Nature DQN network (Mnih et al. 2015): three convolutions, 512 units, one Q per action."""

    def __init__(self, observation_shape: Sequence[int], num_actions: int):
        super().__init__()
        self.torso = common.NatureCnnTorso(observation_shape)
        self.head = nn.Linear(self.torso.output_size, num_actions)

    def forward(self, x: torch.Tensor) -> QNetworkOutput:
        return QNetworkOutput(q_values=self.head(self.torso(x)))


def build_q_network(
    observation_shape: Sequence[int], num_actions: int, hidden_sizes: Sequence[int] = (128, 128)
) -> nn.Module:
    """Nature CNN for [C, H, W] observations, MLP for vectors."""
    if common.is_image_observation(observation_shape):
        return NatureCnnQNetwork(observation_shape, num_actions)
    return MlpQNetwork(int(observation_shape[0]), num_actions, hidden_sizes)
