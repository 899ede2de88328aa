"""Q-networks: an MLP for vector observations and the Nature CNN for Atari."""

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from deep_rl_zoo.networks import common


def torso_and_width(observation_shape: Sequence[int], hidden_sizes: Sequence[int]) -> tuple[nn.Module, int]:
    """A Q-network's torso, the Nature CNN on frames or an MLP on vectors, and its output width."""
    if common.is_image_observation(observation_shape):
        torso = common.NatureCnnTorso(observation_shape)
        return torso, torso.output_size
    return common.mlp(int(observation_shape[0]), hidden_sizes), hidden_sizes[-1]


def zero_lstm_state(
    lstm: nn.LSTM, batch_size: int, device: torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The all-zero state (h, c), each [1, B, H], of `lstm` at an episode's start."""
    zeros = torch.zeros(1, batch_size, lstm.hidden_size, device=device)
    return zeros, zeros.clone()


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
        self.torso, size = torso_and_width(observation_shape, hidden_sizes)
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
        self.torso, size = torso_and_width(observation_shape, hidden_sizes)
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
    """DRQN network (Hausknecht & Stone 2015): torso, one LSTM layer, optional ReLU layers, a linear Q head.

    On Atari the torso is the Nature CNN including its 512-unit layer, and the LSTM (512 units) sits
    on top of it (the paper put the LSTM in place of that layer; keeping it is what R2D2 does).
    `head_hidden_sizes` puts ReLU layers between the LSTM and the Q head, as R2D2's head does: the
    LSTM's outputs lie in (-1, 1), and a linear head alone must read Q-values of tens (CartPole) from
    them (58% of the outputs were measured beyond |0.95| there). Empty (the paper's linear head) by
    default, so networks saved before this option load unchanged.
    Inputs are time-major: [T, B, ...].
    """

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        hidden_sizes: Sequence[int] = (128,),
        lstm_size: int = 128,
        head_hidden_sizes: Sequence[int] = (),
    ):
        super().__init__()
        self._image = common.is_image_observation(observation_shape)
        self.torso, size = torso_and_width(observation_shape, hidden_sizes)
        self.lstm = nn.LSTM(size, lstm_size)
        self.post_lstm = common.mlp(lstm_size, head_hidden_sizes)  # empty Sequential: identity
        self.head = nn.Linear(head_hidden_sizes[-1] if head_hidden_sizes else lstm_size, num_actions)

    def initial_state(
        self, batch_size: int, device: torch.device | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The all-zero LSTM state of an episode's start, (h, c) each [1, B, H]."""
        return zero_lstm_state(self.lstm, batch_size, device)

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
            outputs, hidden_state = common.lstm_with_resets(self.lstm, features, hidden_state, first)
        return RecurrentQNetworkOutput(q_values=self.head(self.post_lstm(outputs)), hidden_state=hidden_state)


@dataclasses.dataclass(frozen=True)
class RecurrentQInput:
    """What R2D2's, NGU's and Agent57's recurrent Q-network reads at each step, time-major [T, B, ...].
    Slices like a tensor (along time and batch), so `drqn.agent.unroll` and `r2d2.agent.sequence_q_values`
    handle it as an observation."""

    observation: torch.Tensor  # [T, B, ...] o_t
    previous_action: torch.Tensor  # [T, B] int64 a_{t-1} (0 at an episode's start)
    previous_reward: torch.Tensor  # [T, B] float r_t (NGU: the extrinsic r^e_t), received on arriving in o_t
    policy_index: torch.Tensor | None = None  # [T, B] int64 j (NGU, Agent57)
    previous_intrinsic_reward: torch.Tensor | None = None  # [T, B] float r^i_t, the novelty of o_t (NGU)

    def __getitem__(self, index) -> "RecurrentQInput":
        return RecurrentQInput(
            *(
                None if (value := getattr(self, f.name)) is None else value[index]
                for f in dataclasses.fields(self)
            )
        )

    @property
    def shape(self) -> torch.Size:
        return self.observation.shape


class RecurrentQNetwork(nn.Module):
    """R2D2's recurrent Q-network (Kapturowski et al. 2019), shared with NGU and Agent57: torso (MLP, or
    the Nature CNN on Atari), then an LSTM over the torso's features with the one-hot previous action and
    the previous reward, then ReLU layers and a linear Q head. With `num_policies` > 0 (NGU, Badia et al.
    2020) the LSTM also reads the one-hot policy index j and the previous intrinsic reward.

    LSTM input, in this order: [features, one-hot j (NGU), one-hot a_{t-1}, r_t, r^i_t (NGU)].
    Inputs are `RecurrentQInput`s; `first` [T, B] zeroes the state before an episode's first step.
    """

    def __init__(
        self,
        observation_shape: Sequence[int],
        num_actions: int,
        hidden_sizes: Sequence[int] = (128,),
        lstm_size: int = 128,
        head_hidden_sizes: Sequence[int] = (128,),
        num_policies: int = 0,
    ):
        super().__init__()
        self.num_actions = num_actions
        self.num_policies = num_policies
        self._image = common.is_image_observation(observation_shape)
        self.torso, size = torso_and_width(observation_shape, hidden_sizes)
        policy_inputs = num_policies + 1 if num_policies else 0  # one-hot j and r^i
        self.lstm = nn.LSTM(size + num_actions + 1 + policy_inputs, lstm_size)
        self.post_lstm = common.mlp(lstm_size, head_hidden_sizes)
        self.head = nn.Linear(head_hidden_sizes[-1] if head_hidden_sizes else lstm_size, num_actions)

    def initial_state(
        self, batch_size: int, device: torch.device | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The all-zero LSTM state of an episode's start, (h, c) each [1, B, H]."""
        return zero_lstm_state(self.lstm, batch_size, device)

    def forward(
        self,
        x: RecurrentQInput,
        hidden_state: tuple[torch.Tensor, torch.Tensor],
        first: torch.Tensor | None = None,
    ) -> RecurrentQNetworkOutput:
        if (x.policy_index is None) != (self.num_policies == 0):
            raise ValueError(
                f"a network of {self.num_policies} policies needs a policy index exactly when it has policies"
            )
        num_steps, batch_size = x.observation.shape[:2]
        observation = x.observation.flatten(0, 1)
        features = self.torso(observation if self._image else observation.float())
        features = features.view(num_steps, batch_size, -1)
        parts = [features]
        if self.num_policies:
            parts.append(F.one_hot(x.policy_index, self.num_policies).to(features.dtype))
        parts += [
            F.one_hot(x.previous_action, self.num_actions).to(features.dtype),
            x.previous_reward.to(features.dtype)[..., None],
        ]
        if self.num_policies:
            parts.append(x.previous_intrinsic_reward.to(features.dtype)[..., None])
        inputs = torch.cat(parts, dim=-1)
        if first is None:
            outputs, hidden_state = self.lstm(inputs, hidden_state)
        else:
            outputs, hidden_state = common.lstm_with_resets(self.lstm, inputs, hidden_state, first)
        return RecurrentQNetworkOutput(self.head(self.post_lstm(outputs)), hidden_state)


# --- Dueling, noisy and categorical (C51 / Rainbow) networks -------------------------------------------


class CategoricalQNetworkOutput(NamedTuple):
    q_values: torch.Tensor  # [B, A]: mean of each action's distribution, for acting
    q_logits: torch.Tensor  # [B, A, K]: logits of the probabilities of the atoms


class NoisyLinear(nn.Module):
    """Linear layer with factorised Gaussian parameter noise.

    Paper: Fortunato et al. 2017, "Noisy Networks for Exploration" (https://arxiv.org/abs/1706.10295).

        y = (mu_w + sigma_w * eps_w) x + mu_b + sigma_b * eps_b,
        eps_w = f(eps_out) f(eps_in)^T, eps_b = f(eps_out), f(x) = sign(x) sqrt(|x|),

    with eps_in [in], eps_out [out] standard normal, redrawn by `reset_noise()` (the noise stays fixed
    between calls, so acting and learning see the same perturbed network until the agent redraws it).
    In `eval()` mode the layer uses its mean weights mu only.
    """

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        bound = in_features**-0.5
        sigma = sigma0 * bound  # the paper's initialisation for factorised noise
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma))
        self.register_buffer("eps_in", torch.zeros(in_features))
        self.register_buffer("eps_out", torch.zeros(out_features))
        self.reset_noise()

    @torch.no_grad()
    def reset_noise(self) -> None:
        scale = lambda x: x.sign() * x.abs().sqrt()  # noqa: E731
        self.eps_in.copy_(scale(torch.randn(self.in_features, device=self.eps_in.device)))
        self.eps_out.copy_(scale(torch.randn(self.out_features, device=self.eps_out.device)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return nn.functional.linear(x, self.weight_mu, self.bias_mu)
        weight = self.weight_mu + self.weight_sigma * torch.outer(self.eps_out, self.eps_in)
        bias = self.bias_mu + self.bias_sigma * self.eps_out
        return nn.functional.linear(x, weight, bias)


def reset_noise(network: nn.Module) -> None:
    """Redraws the noise of every `NoisyLinear` in `network`."""
    for module in network.modules():
        if isinstance(module, NoisyLinear):
            module.reset_noise()


class DuelingHead(nn.Module):
    """Dueling value and advantage streams (Wang et al. 2016, "Dueling Network Architectures for Deep
    Reinforcement Learning", https://arxiv.org/abs/1511.06581), one hidden layer each.

        out[a] = V + A[a] - mean_a' A[a'],   per atom when num_atoms > 1.

    Returns [B, A] when num_atoms is 1, else [B, A, num_atoms] (logits, for a categorical network).
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_actions: int,
        num_atoms: int = 1,
        noisy_sigma0: float | None = None,
    ):
        """`noisy_sigma0`: None for ordinary linear layers, else `NoisyLinear`s with this sigma0."""
        super().__init__()
        layer = nn.Linear
        if noisy_sigma0 is not None:
            layer = lambda n_in, n_out: NoisyLinear(n_in, n_out, noisy_sigma0)  # noqa: E731
        self.num_actions, self.num_atoms = num_actions, num_atoms
        self.value = nn.Sequential(layer(input_size, hidden_size), nn.ReLU(), layer(hidden_size, num_atoms))
        self.advantage = nn.Sequential(
            layer(input_size, hidden_size), nn.ReLU(), layer(hidden_size, num_actions * num_atoms)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value = self.value(x).view(-1, 1, self.num_atoms)
        advantage = self.advantage(x).view(-1, self.num_actions, self.num_atoms)
        out = value + advantage - advantage.mean(dim=1, keepdim=True)
        return out.squeeze(2) if self.num_atoms == 1 else out


class CategoricalQNetwork(nn.Module):
    """A C51 / Rainbow network: a torso, then logits over fixed atoms for every action.

    Build it with `build_c51_network` (linear head, C51) or `build_rainbow_network` (dueling noisy head).
    The atoms are a buffer, so they travel with `.to(device)` and the state dict.
    """

    def __init__(self, torso: nn.Module, head: nn.Module, num_actions: int, atoms: torch.Tensor):
        super().__init__()
        self.torso = torso
        self.head = head
        self.num_actions = num_actions
        self.register_buffer("atoms", atoms.detach().clone().float())

    def forward(self, x: torch.Tensor) -> CategoricalQNetworkOutput:
        x = x if x.dim() == 4 else x.float()  # uint8 frames are scaled by the CNN torso itself
        logits = self.head(self.torso(x)).view(-1, self.num_actions, self.atoms.shape[0])
        q_values = (torch.softmax(logits, dim=2) * self.atoms).sum(dim=2)
        return CategoricalQNetworkOutput(q_values=q_values, q_logits=logits)


def _torso(observation_shape: Sequence[int], hidden_sizes: Sequence[int]) -> tuple[nn.Module, int]:
    """The Nature CNN (with its 512-unit layer) or the MLP torso, and its output size."""
    if common.is_image_observation(observation_shape):
        torso = common.NatureCnnTorso(observation_shape)
        return torso, torso.output_size
    return common.mlp(int(observation_shape[0]), hidden_sizes), int(hidden_sizes[-1])


def build_c51_network(
    observation_shape: Sequence[int],
    num_actions: int,
    atoms: torch.Tensor,
    hidden_sizes: Sequence[int] = (128, 128),
) -> CategoricalQNetwork:
    """C51 (Bellemare et al. 2017): the DQN network with A * K outputs (Nature CNN or MLP torso)."""
    torso, size = _torso(observation_shape, hidden_sizes)
    return CategoricalQNetwork(torso, nn.Linear(size, num_actions * atoms.shape[0]), num_actions, atoms)


def build_rainbow_network(
    observation_shape: Sequence[int],
    num_actions: int,
    atoms: torch.Tensor,
    hidden_sizes: Sequence[int] = (128, 128),
    noisy_sigma0: float = 0.5,
) -> CategoricalQNetwork:
    """Rainbow (Hessel et al. 2017): dueling noisy streams over atoms.

    Atari: the Nature CNN's convolutions, then value and advantage streams of 512 noisy units each (as
    in the paper). Vectors: an MLP of `hidden_sizes[:-1]`, then streams of `hidden_sizes[-1]` units.
    """
    if common.is_image_observation(observation_shape):
        cnn = common.NatureCnnTorso(observation_shape)
        cnn.fc = nn.Identity()  # the streams' own 512-unit noisy layers replace it
        torso = cnn
        size, hidden = cnn.convs(torch.zeros(1, *observation_shape)).shape[1], 512
    else:
        size = int(observation_shape[0]) if len(hidden_sizes) == 1 else int(hidden_sizes[-2])
        torso = common.mlp(int(observation_shape[0]), hidden_sizes[:-1])
        hidden = int(hidden_sizes[-1])
    head = DuelingHead(size, hidden, num_actions, atoms.shape[0], noisy_sigma0=noisy_sigma0)
    return CategoricalQNetwork(torso, head, num_actions, atoms)
