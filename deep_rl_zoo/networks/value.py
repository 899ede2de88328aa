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


# ----------------------------------------------------------------------------------------------------
# Quantile networks (QR-DQN, IQN) and the recurrent Q-network of DRQN.


class QuantileNetworkOutput(NamedTuple):
    q_values: torch.Tensor  # [B, A], mean over the quantiles
    q_dist: torch.Tensor  # [B, N, A], one value per quantile fraction and action


class _QuantileHead(nn.Module):
    def __init__(self, input_size: int, num_actions: int, num_quantiles: int):
        super().__init__()
        self.num_actions, self.num_quantiles = num_actions, num_quantiles
        self.linear = nn.Linear(input_size, num_quantiles * num_actions)

    def forward(self, features: torch.Tensor) -> QuantileNetworkOutput:
        q_dist = self.linear(features).view(-1, self.num_quantiles, self.num_actions)
        return QuantileNetworkOutput(q_values=q_dist.mean(dim=1), q_dist=q_dist)


class QrQNetwork(nn.Module):
    """QR-DQN network (Dabney et al. 2017): DQN's torso, N quantile values per action.

    The fractions are fixed (the midpoints (2i + 1) / 2N), so they are not an input.
    """

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        num_quantiles: int,
        hidden_sizes: Sequence[int] = (128, 128),
    ):
        super().__init__()
        if common.is_image_observation(observation_shape):
            self.torso = common.NatureCnnTorso(observation_shape)
            size = self.torso.output_size
        else:
            self.torso = common.mlp(int(observation_shape[0]), hidden_sizes)
            size = hidden_sizes[-1]
        self.head = _QuantileHead(size, num_actions, num_quantiles)
        self._image = common.is_image_observation(observation_shape)

    def forward(self, x: torch.Tensor) -> QuantileNetworkOutput:
        return self.head(self.torso(x if self._image else x.float()))


class IqnNetwork(nn.Module):
    """IQN network (Dabney et al. 2018): torso features times a cosine embedding of each fraction tau.

        psi(x)   = torso(x)                                   [B, D]
        phi(tau) = ReLU(Linear(cos(pi * i * tau), i = 1..E))   [B, N, D]
        Z_tau(x) = head(psi(x) * phi(tau))                    [B, N, A]

    The fractions are an input, so the caller decides how many to sample (online, target, acting).
    """

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        hidden_sizes: Sequence[int] = (128, 128),
        embedding_size: int = 64,
    ):
        super().__init__()
        self._image = common.is_image_observation(observation_shape)
        if self._image:
            self.torso = common.NatureCnnTorso(observation_shape)
            size = self.torso.output_size
        else:
            self.torso = common.mlp(int(observation_shape[0]), hidden_sizes)
            size = hidden_sizes[-1]
        self.register_buffer(
            "cosine_frequencies", torch.arange(1, embedding_size + 1, dtype=torch.float32) * torch.pi
        )
        self.tau_embedding = nn.Sequential(nn.Linear(embedding_size, size), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(size, size), nn.ReLU(), nn.Linear(size, num_actions))

    def forward(self, x: torch.Tensor, taus: torch.Tensor) -> QuantileNetworkOutput:
        """Quantile values of `x` [B, ...] at fractions `taus` [B, N]."""
        if taus.dim() != 2 or taus.shape[0] != x.shape[0]:
            raise ValueError(f"taus must be [B={x.shape[0]}, N], got {tuple(taus.shape)}")
        features = self.torso(x if self._image else x.float())  # [B, D]
        embedding = self.tau_embedding(torch.cos(taus.unsqueeze(2) * self.cosine_frequencies))  # [B, N, D]
        q_dist = self.head(features.unsqueeze(1) * embedding)  # [B, N, A]
        return QuantileNetworkOutput(q_values=q_dist.mean(dim=1), q_dist=q_dist)


class RecurrentQNetworkOutput(NamedTuple):
    q_values: torch.Tensor  # [T, B, A]
    hidden_state: tuple[torch.Tensor, torch.Tensor]  # LSTM (h, c), each [1, B, H]


class DrqnNetwork(nn.Module):
    """DRQN network (Hausknecht & Stone 2015): torso, one LSTM layer, a linear Q head.

    On Atari the torso is the Nature CNN including its 512-unit layer, and the LSTM (512 units) sits
    on top of it (the paper put the LSTM in place of that layer; keeping it is what R2D2 does).
    Inputs are time-major: [T, B, ...].
    """

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        hidden_sizes: Sequence[int] = (128,),
        lstm_size: int = 128,
    ):
        super().__init__()
        self._image = common.is_image_observation(observation_shape)
        if self._image:
            self.torso = common.NatureCnnTorso(observation_shape)
            size = self.torso.output_size
        else:
            self.torso = common.mlp(int(observation_shape[0]), hidden_sizes)
            size = hidden_sizes[-1]
        self.lstm = nn.LSTM(size, lstm_size)
        self.head = nn.Linear(lstm_size, num_actions)

    def initial_state(
        self, batch_size: int, device: torch.device | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The all-zero LSTM state of an episode's start, (h, c) each [1, B, H]."""
        zeros = torch.zeros(1, batch_size, self.lstm.hidden_size, device=device)
        return zeros, zeros.clone()

    def forward(
        self,
        x: torch.Tensor,
        hidden_state: tuple[torch.Tensor, torch.Tensor],
        first: torch.Tensor | None = None,
    ) -> RecurrentQNetworkOutput:
        """Q-values of the sequences `x` [T, B, ...] starting from `hidden_state`.

        `first` [T, B] bool marks steps that start an episode: the LSTM state is zeroed before them,
        so a sequence crossing an episode boundary is unrolled as it was acted.
        """
        num_steps, batch_size = x.shape[:2]
        x = x.flatten(0, 1)
        features = self.torso(x if self._image else x.float()).view(num_steps, batch_size, -1)
        if first is None:
            outputs, hidden_state = self.lstm(features, hidden_state)
        else:
            keep = (~first).to(features.dtype).unsqueeze(-1)  # [T, B, 1]
            steps = []
            for t in range(num_steps):
                hidden_state = (hidden_state[0] * keep[t], hidden_state[1] * keep[t])
                output, hidden_state = self.lstm(features[t : t + 1], hidden_state)
                steps.append(output)
            outputs = torch.cat(steps)
        return RecurrentQNetworkOutput(q_values=self.head(outputs), hidden_state=hidden_state)
