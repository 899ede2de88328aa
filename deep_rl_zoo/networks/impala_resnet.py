"""IMPALA's networks: the paper's two torsos for Atari frames (the 15-layer ResNet and the shallow
two-convolution one), and the actor-critic around them (MLP torso on vector observations), with an
optional LSTM core.

Paper: Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
Actor-Learner Architectures" (https://arxiv.org/abs/1802.01561), figure 3: "small architecture" (left)
and "large architecture" (right). The paper's LSTM also reads the previous action and reward; ours
reads the torso's features only.

The actor-critic works on time-major sequences, so that the learner can run a whole unroll through the
LSTM and an actor one step at a time with the same module:

    output, core_state = network(x [T, B, ...], first [T, B], core_state)
    output.pi_logits [T, B, A], output.value [T, B]

`first[t, b]` resets the core state to zeros before step t (a new episode); `core_state` is the state
before step 0: `(h, c)` each [B, H] with an LSTM, `()` without one.
"""

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import distributions, nn

from deep_rl_zoo.networks import common
from deep_rl_zoo.networks.policy import POLICY_HEAD_GAIN, TORSO_GAIN, VALUE_HEAD_GAIN


class _ResidualBlock(nn.Module):
    """x + conv(relu(conv(relu(x)))), both convolutions 3x3 keeping the shape."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


class _FrameTorso(nn.Module):
    """`convs` (ending in a flatten) then a fully connected layer with a ReLU, on uint8 frames
    [B, C, H, W] in 0..255 that it scales to [0, 1] itself."""

    def __init__(self, convs: nn.Sequential, input_shape: Sequence[int], output_size: int):
        super().__init__()
        self.convs = convs
        with torch.no_grad():
            conv_size = self.convs(torch.zeros(1, *input_shape)).shape[1]
        self.fc = nn.Sequential(nn.Linear(conv_size, output_size), nn.ReLU())
        self.output_size = output_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.convs(x.float() / 255.0))


class ImpalaResNetTorso(_FrameTorso):
    """Three stacks of [3x3 conv, 3x3 max-pool stride 2, 2 residual blocks] with 16, 32, 32 channels,
    then ReLU and a 256-unit fully connected layer: 15 convolutions in all (1 + 2 x 2 per stack).

    Starts as the paper's own code did (Sonnet's default, `common.fan_in_truncated_normal_init_`): from
    PyTorch's default a ball on a Pong screen moved the features ten times less (0.05 against 0.5-0.8),
    the same symptom that kept the shallow torso at random play.
    """

    def __init__(
        self, input_shape: Sequence[int], channels: Sequence[int] = (16, 32, 32), output_size: int = 256
    ):
        in_channels = input_shape[0]
        layers: list[nn.Module] = []
        for out_channels in channels:
            layers += [
                nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
                nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
                _ResidualBlock(out_channels),
                _ResidualBlock(out_channels),
            ]
            in_channels = out_channels
        layers += [nn.ReLU(), nn.Flatten()]
        super().__init__(nn.Sequential(*layers), input_shape, output_size)
        common.fan_in_truncated_normal_init_(self)


class ImpalaShallowTorso(_FrameTorso):
    """The paper's small architecture: 16 8x8 filters with stride 4, 32 4x4 with stride 2 (each with a
    ReLU), then a 256-unit fully connected layer with a ReLU. On a CPU it costs about a twentieth of the
    ResNet's time per frame (forward and backward).

    Starts orthogonal with gain sqrt(2) (`common.orthogonal_init_`), as the A2C/PPO torsos do. With
    PyTorch's default initialisation its features on Pong screens hardly varied from one screen to the
    next (std 6e-4 over 300 screens), and after the first 250k env steps of training they did not vary
    at all: the torso had stopped seeing the screen, and IMPALA stayed at random play.
    """

    def __init__(self, input_shape: Sequence[int], output_size: int = 256):
        convs = nn.Sequential(
            nn.Conv2d(input_shape[0], 16, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Flatten(),
        )
        super().__init__(convs, input_shape, output_size)
        common.orthogonal_init_(self, TORSO_GAIN)


IMAGE_TORSOS = {"deep": ImpalaResNetTorso, "shallow": ImpalaShallowTorso}


class _MlpTorso(nn.Module):
    def __init__(self, state_dim: int, hidden_sizes: Sequence[int]):
        super().__init__()
        self.layers = common.mlp(state_dim, hidden_sizes, nn.Tanh)
        self.output_size = hidden_sizes[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x.float())


class ImpalaOutput(NamedTuple):
    pi_logits: torch.Tensor  # [T, B, A]
    value: torch.Tensor  # [T, B]

    def distribution(self) -> distributions.Categorical:
        return distributions.Categorical(logits=self.pi_logits)


CoreState = tuple[torch.Tensor, ...]  # (h, c) each [B, H], or () without an LSTM


class ImpalaActorCritic(nn.Module):
    """Torso -> optional LSTM -> policy logits and state value, over time-major sequences."""

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        hidden_sizes: Sequence[int] = (64, 64),
        lstm_size: int = 0,
        image_torso: str = "deep",
    ):
        """
        Args:
          observation_shape: [C, H, W] uint8 frames (`image_torso`) or [D] vectors (MLP torso).
          hidden_sizes: the MLP torso's layers (vector observations only).
          lstm_size: units of the LSTM core; 0 for none (feed-forward).
          image_torso: "deep" (the ResNet) or "shallow" (two convolutions), for frames only.
        """
        super().__init__()
        if common.is_image_observation(observation_shape):
            self.torso: nn.Module = IMAGE_TORSOS[image_torso](observation_shape)
        else:
            self.torso = _MlpTorso(int(observation_shape[0]), hidden_sizes)
        features = self.torso.output_size
        self.lstm_size = lstm_size
        self.core = nn.LSTMCell(features, lstm_size) if lstm_size > 0 else None
        if self.core is not None:
            features = lstm_size
        self.policy_head = nn.Linear(features, num_actions)
        self.value_head = nn.Linear(features, 1)
        for head, gain in ((self.policy_head, POLICY_HEAD_GAIN), (self.value_head, VALUE_HEAD_GAIN)):
            nn.init.orthogonal_(head.weight, gain=gain)
            nn.init.zeros_(head.bias)

    def initial_state(self, batch_size: int, device: torch.device | None = None) -> CoreState:
        if self.core is None:
            return ()
        zeros = torch.zeros(batch_size, self.lstm_size, device=device)
        return (zeros, zeros.clone())

    def forward(
        self, x: torch.Tensor, first: torch.Tensor, core_state: CoreState
    ) -> tuple[ImpalaOutput, CoreState]:
        """
        Args:
          x: observations [T, B, ...].
          first: bool [T, B], step t starts an episode (the core state is zeroed before it).
          core_state: the core state before step 0.
        """
        num_steps, batch = x.shape[:2]
        features = self.torso(x.flatten(0, 1)).reshape(num_steps, batch, -1)
        if self.core is not None:
            h, c = core_state
            keep = (~first).float().unsqueeze(-1)  # [T, B, 1]
            outputs = []
            for t in range(num_steps):
                h, c = self.core(features[t], (h * keep[t], c * keep[t]))
                outputs.append(h)
            features, core_state = torch.stack(outputs), (h, c)
        output = ImpalaOutput(
            pi_logits=self.policy_head(features), value=self.value_head(features).squeeze(-1)
        )
        return output, core_state
