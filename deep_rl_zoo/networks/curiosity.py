"""Networks of curiosity-driven exploration, shared by PPO-RND and PPO-ICM (and later NGU / Agent57):
RND's fixed random target and trained predictor, ICM's embedding, inverse and forward models, and the
actor-critic with two value heads (extrinsic and intrinsic) that RND's PPO learns.

Atari observations are uint8 frame stacks [C, 84, 84]; vectors are classic-control states.

- RND (Burda et al. 2018, https://arxiv.org/abs/1810.12894, appendix A.4): target and predictor read
  the newest frame only, [1, 84, 84], normalised per pixel by running statistics and clipped to
  [-5, 5]; three convolutions (32 8x8/4, 64 4x4/2, 64 3x3/1) with leaky ReLUs, then a linear layer to
  512 features for the target, and two more 512-unit ReLU layers before it for the predictor (the
  predictor is deeper than the target, as in the paper). On vectors, the same shape with MLPs.
  Kept: orthogonal initialisation with gain sqrt(2) (the paper's code), the target never trained.
- ICM (Pathak et al. 2017, https://arxiv.org/abs/1705.05363, section 3): embedding phi = four
  convolutions (32 3x3, stride 2, padding 1) with ELUs, flattened; inverse model = phi(s_t), phi(s_t+1)
  -> 256 ReLU -> logits over actions; forward model = phi(s_t), one-hot a_t -> 256 ReLU -> phi. The
  paper's frames are 42x42 (288 features): PPO-ICM averages each 2x2 block of the zoo's 84x84 stacks,
  the area resize, so its ICM reads the paper's size (and costs a quarter of the full-size embedding:
  1,152 features, what it read before) while the policy keeps 84x84. On vectors, an MLP embedding with
  ELUs.
- Two value heads (RND section 2.3). Changed: on Atari the policy network is the Nature CNN torso every
  PPO agent of the zoo uses, not the paper's larger one with extra fully connected layers.
"""

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import distributions, nn

from deep_rl_zoo.networks import common
from deep_rl_zoo.networks.policy import MlpActor
from deep_rl_zoo.normalizers import ObservationNormalizer

RND_INPUT_CLIP = 5.0  # Burda et al.: normalised observations clipped to [-5, 5]


# ----------------------------------------------------------------------------------------------------
# RND


def _rnd_convolutions() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 32, kernel_size=8, stride=4),
        nn.LeakyReLU(),
        nn.Conv2d(32, 64, kernel_size=4, stride=2),
        nn.LeakyReLU(),
        nn.Conv2d(64, 64, kernel_size=3, stride=1),
        nn.LeakyReLU(),
        nn.Flatten(),
    )


class RandomNetworkDistillation(nn.Module):
    """Normaliser, fixed random target f and trained predictor f_hat: `forward(s) -> (f_hat(s), f(s))`.

    The normaliser's statistics are buffers (saved with the module); only the learner updates them,
    with `update_statistics`.
    """

    def __init__(
        self, observation_shape: Sequence[int], hidden_sizes: Sequence[int] = (64, 64), feature_size: int = 64
    ):
        super().__init__()
        self.is_image = common.is_image_observation(observation_shape)
        if self.is_image:
            _, height, width = observation_shape
            input_shape: tuple[int, ...] = (1, height, width)  # the newest frame only
            with torch.no_grad():
                conv_size = _rnd_convolutions()(torch.zeros(1, *input_shape)).shape[1]
            feature_size = 512
            self.target = nn.Sequential(_rnd_convolutions(), nn.Linear(conv_size, feature_size))
            self.predictor = nn.Sequential(
                _rnd_convolutions(),
                nn.Linear(conv_size, 512),
                nn.ReLU(),
                nn.Linear(512, 512),
                nn.ReLU(),
                nn.Linear(512, feature_size),
            )
        else:
            input_shape = (int(observation_shape[0]),)
            size = input_shape[0]
            self.target = nn.Sequential(
                common.mlp(size, hidden_sizes, nn.LeakyReLU), nn.Linear(hidden_sizes[-1], feature_size)
            )
            self.predictor = nn.Sequential(
                common.mlp(size, hidden_sizes, nn.LeakyReLU),
                nn.Linear(hidden_sizes[-1], hidden_sizes[-1]),
                nn.ReLU(),
                nn.Linear(hidden_sizes[-1], feature_size),
            )
        common.orthogonal_init_(self.target, math.sqrt(2))
        common.orthogonal_init_(self.predictor, math.sqrt(2))
        self.target.requires_grad_(False)
        self.normalizer = ObservationNormalizer(input_shape, clip=RND_INPUT_CLIP)

    def _input(self, observation: torch.Tensor) -> torch.Tensor:
        return observation[:, -1:] if self.is_image else observation  # [B, 1, H, W]: the newest frame

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """f_hat(x) with gradient and f(x) without, [B, F] each, for observations [B, ...]."""
        x = self.normalizer(self._input(observation))
        with torch.no_grad():
            target = self.target(x)
        return self.predictor(x), target

    def update_statistics(self, observation: torch.Tensor) -> None:
        self.normalizer.update(self._input(observation))

    def trainable_parameters(self) -> list[nn.Parameter]:
        return list(self.predictor.parameters())


# ----------------------------------------------------------------------------------------------------
# ICM


class IcmOutput(NamedTuple):
    phi_tp1: torch.Tensor  # [B, F], phi(s_{t+1})
    predicted_phi_tp1: torch.Tensor  # [B, F], forward model's phi_hat(s_{t+1})
    inverse_logits: torch.Tensor  # [B, A], inverse model's logits of a_t


class IntrinsicCuriosityModule(nn.Module):
    """Embedding phi, inverse model and forward model: `forward(s_t, a_t, s_tp1) -> IcmOutput`."""

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        hidden_sizes: Sequence[int] = (64, 64),
        model_hidden_size: int = 256,
        image_downsample: int = 1,
    ):
        """`image_downsample`: average each k x k block of pixels before the convolutions (PPO-ICM: 2, the
        paper's 42x42 frames from the zoo's 84x84, 288 features; NGU's embedding: 1)."""
        super().__init__()
        self.num_actions = num_actions
        self.is_image = common.is_image_observation(observation_shape)
        if self.is_image:
            channels, height, width = observation_shape
            layers: list[nn.Module] = [nn.AvgPool2d(image_downsample)] if image_downsample > 1 else []
            for index in range(4):
                # In-place ELUs: their backward reads their output, so nothing else needs to be kept.
                conv = nn.Conv2d(channels if index == 0 else 32, 32, 3, stride=2, padding=1)
                layers += [conv, nn.ELU(inplace=True)]
            self.embedding = nn.Sequential(*layers, nn.Flatten())
            with torch.no_grad():
                feature_size = self.embedding(torch.zeros(1, channels, height, width)).shape[1]
        else:
            self.embedding = common.mlp(int(observation_shape[0]), hidden_sizes, nn.ELU)
            feature_size = hidden_sizes[-1]
        self.feature_size = feature_size
        self.inverse_model = nn.Sequential(
            nn.Linear(2 * feature_size, model_hidden_size),
            nn.ReLU(),
            nn.Linear(model_hidden_size, num_actions),
        )
        self.forward_model = nn.Sequential(
            nn.Linear(feature_size + num_actions, model_hidden_size),
            nn.ReLU(),
            nn.Linear(model_hidden_size, feature_size),
        )

    def embed(self, observation: torch.Tensor) -> torch.Tensor:
        if not self.is_image:
            return self.embedding(observation.float())
        # Frames go to channels_last (NHWC) while still bytes, as in `common.NatureCnnTorso`: oneDNN's
        # convolutions run faster on that layout (benchmarks/recurrent_learner_breakdown.py).
        x = observation.contiguous(memory_format=torch.channels_last)
        return self.embedding(x.float() / 255.0)

    def forward(self, s_t: torch.Tensor, a_t: torch.Tensor, s_tp1: torch.Tensor) -> IcmOutput:
        phi_t, phi_tp1 = self.embed(s_t), self.embed(s_tp1)
        one_hot = F.one_hot(a_t, self.num_actions).to(phi_t.dtype)
        return IcmOutput(
            phi_tp1=phi_tp1,
            predicted_phi_tp1=self.forward_model(torch.cat([phi_t, one_hot], dim=-1)),
            inverse_logits=self.inverse_model(torch.cat([phi_t, phi_tp1], dim=-1)),
        )


# ----------------------------------------------------------------------------------------------------
# Actor-critic with two value heads


class TwoValueOutput(NamedTuple):
    pi_logits: torch.Tensor  # [B, A]
    extrinsic_value: torch.Tensor  # [B], V_E(s)
    intrinsic_value: torch.Tensor  # [B], V_I(s)

    def distribution(self) -> distributions.Categorical:
        return distributions.Categorical(logits=self.pi_logits)


def _head(in_features: int, out_features: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


class MlpTwoValueActorCritic(nn.Module):
    """A categorical MLP actor and an MLP critic with two value heads on one critic torso. `actor` alone
    is what the actors need (`networks.numpy_policy` mirrors it)."""

    def __init__(self, state_dim: int, num_actions: int, hidden_sizes: Sequence[int] = (64, 64)):
        super().__init__()
        self.actor = MlpActor(state_dim, num_actions, hidden_sizes)
        self.critic_torso = common.mlp(state_dim, hidden_sizes, nn.Tanh)
        self.extrinsic_value_head = _head(hidden_sizes[-1], 1, 1.0)
        self.intrinsic_value_head = _head(hidden_sizes[-1], 1, 1.0)

    def forward(self, x: torch.Tensor) -> TwoValueOutput:
        features = self.critic_torso(x.float())
        return TwoValueOutput(
            pi_logits=self.actor(x).pi_logits,
            extrinsic_value=self.extrinsic_value_head(features).squeeze(-1),
            intrinsic_value=self.intrinsic_value_head(features).squeeze(-1),
        )


class NatureCnnTwoValueActorCritic(nn.Module):
    """Policy and two value heads on one shared Nature DQN torso (uint8 frames [B, C, H, W]), the torso
    orthogonal with gain sqrt(2) as PPO's (`common.orthogonal_init_` says why)."""

    def __init__(self, observation_shape: Sequence[int], num_actions: int):
        super().__init__()
        self.torso = common.orthogonal_init_(common.NatureCnnTorso(observation_shape), math.sqrt(2))
        self.policy_head = _head(self.torso.output_size, num_actions, 0.01)
        self.extrinsic_value_head = _head(self.torso.output_size, 1, 1.0)
        self.intrinsic_value_head = _head(self.torso.output_size, 1, 1.0)

    def forward(self, x: torch.Tensor) -> TwoValueOutput:
        features = self.torso(x)
        return TwoValueOutput(
            pi_logits=self.policy_head(features),
            extrinsic_value=self.extrinsic_value_head(features).squeeze(-1),
            intrinsic_value=self.intrinsic_value_head(features).squeeze(-1),
        )


def build_two_value_actor_critic(
    observation_shape: Sequence[int], num_actions: int, hidden_sizes: Sequence[int] = (64, 64)
) -> nn.Module:
    if common.is_image_observation(observation_shape):
        return NatureCnnTwoValueActorCritic(observation_shape, num_actions)
    return MlpTwoValueActorCritic(int(observation_shape[0]), num_actions, hidden_sizes)
