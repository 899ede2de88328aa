"""Policy and value networks: actors, critics and shared actor-critics, MLP and Nature CNN.

Networks return NamedTuples of tensors; the policy's `torch.distributions` object is built from them
by `.distribution()`, which gives sampling, log-probabilities and entropy:

    output = network(observations)      # ActorOutput(pi_logits [B, A]) or ActorCriticOutput(..., value [B])
    dist = output.distribution()        # Categorical
    a_t = dist.sample(); log_prob_a_t = dist.log_prob(a_t); entropy_t = dist.entropy()

The greedy action (evaluation) is `pi_logits.argmax(-1)` for a categorical policy and `mean` for a
Gaussian one (see `deep_rl_zoo.greedy_actors.PolicyGreedyActor`).

Policy heads start with small weights (orthogonal, gain 0.01) so the initial policy is close to
uniform, and value heads with gain 1, as in the PPO paper's reference implementation; the Nature CNN
torsos start orthogonal with gain sqrt(2), as there (see `common.orthogonal_init_` for why it matters).
"""

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import distributions, nn

from deep_rl_zoo.networks import common


class ActorOutput(NamedTuple):
    pi_logits: torch.Tensor  # [B, A], unnormalised log-probabilities

    def distribution(self) -> distributions.Categorical:
        return distributions.Categorical(logits=self.pi_logits)


class CriticOutput(NamedTuple):
    value: torch.Tensor  # [B], V(s)


class ActorCriticOutput(NamedTuple):
    pi_logits: torch.Tensor  # [B, A]
    value: torch.Tensor  # [B]

    def distribution(self) -> distributions.Categorical:
        return distributions.Categorical(logits=self.pi_logits)


class GaussianActorOutput(NamedTuple):
    mean: torch.Tensor  # [B, D]
    log_std: torch.Tensor  # [B, D]

    def distribution(self) -> distributions.Independent:
        """A diagonal Gaussian; log_prob and entropy sum over the D action dimensions ([B])."""
        return distributions.Independent(distributions.Normal(self.mean, self.log_std.exp()), 1)


def _linear(in_features: int, out_features: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


POLICY_HEAD_GAIN = 0.01  # near-uniform initial policy
VALUE_HEAD_GAIN = 1.0
TORSO_GAIN = math.sqrt(2)  # ReLU layers


def _nature_cnn_torso(observation_shape: Sequence[int]) -> common.NatureCnnTorso:
    return common.orthogonal_init_(common.NatureCnnTorso(observation_shape), TORSO_GAIN)


class MlpActor(nn.Module):
    """Categorical policy for vector observations: MLP torso, one logit per action."""

    def __init__(self, state_dim: int, num_actions: int, hidden_sizes: Sequence[int] = (64, 64)):
        super().__init__()
        self.torso = common.mlp(state_dim, hidden_sizes, nn.Tanh)
        self.policy_head = _linear(hidden_sizes[-1], num_actions, POLICY_HEAD_GAIN)

    def forward(self, x: torch.Tensor) -> ActorOutput:
        return ActorOutput(pi_logits=self.policy_head(self.torso(x.float())))


class MlpCritic(nn.Module):
    """State-value network for vector observations."""

    def __init__(self, state_dim: int, hidden_sizes: Sequence[int] = (64, 64)):
        super().__init__()
        self.torso = common.mlp(state_dim, hidden_sizes, nn.Tanh)
        self.value_head = _linear(hidden_sizes[-1], 1, VALUE_HEAD_GAIN)

    def forward(self, x: torch.Tensor) -> CriticOutput:
        return CriticOutput(value=self.value_head(self.torso(x.float())).squeeze(-1))


class MlpActorCritic(nn.Module):
    """Policy and value heads on one shared MLP torso."""

    def __init__(self, state_dim: int, num_actions: int, hidden_sizes: Sequence[int] = (64, 64)):
        super().__init__()
        self.torso = common.mlp(state_dim, hidden_sizes, nn.Tanh)
        self.policy_head = _linear(hidden_sizes[-1], num_actions, POLICY_HEAD_GAIN)
        self.value_head = _linear(hidden_sizes[-1], 1, VALUE_HEAD_GAIN)

    def forward(self, x: torch.Tensor) -> ActorCriticOutput:
        features = self.torso(x.float())
        return ActorCriticOutput(
            pi_logits=self.policy_head(features), value=self.value_head(features).squeeze(-1)
        )


class NatureCnnActor(nn.Module):
    """Categorical policy on the Nature DQN torso (uint8 frames [B, C, H, W])."""

    def __init__(self, observation_shape: Sequence[int], num_actions: int):
        super().__init__()
        self.torso = _nature_cnn_torso(observation_shape)
        self.policy_head = _linear(self.torso.output_size, num_actions, POLICY_HEAD_GAIN)

    def forward(self, x: torch.Tensor) -> ActorOutput:
        return ActorOutput(pi_logits=self.policy_head(self.torso(x)))


class NatureCnnCritic(nn.Module):
    """State-value network on the Nature DQN torso."""

    def __init__(self, observation_shape: Sequence[int]):
        super().__init__()
        self.torso = _nature_cnn_torso(observation_shape)
        self.value_head = _linear(self.torso.output_size, 1, VALUE_HEAD_GAIN)

    def forward(self, x: torch.Tensor) -> CriticOutput:
        return CriticOutput(value=self.value_head(self.torso(x)).squeeze(-1))


class NatureCnnActorCritic(nn.Module):
    """Policy and value heads on one shared Nature DQN torso (the A3C/A2C/PPO Atari network)."""

    def __init__(self, observation_shape: Sequence[int], num_actions: int):
        super().__init__()
        self.torso = _nature_cnn_torso(observation_shape)
        self.policy_head = _linear(self.torso.output_size, num_actions, POLICY_HEAD_GAIN)
        self.value_head = _linear(self.torso.output_size, 1, VALUE_HEAD_GAIN)

    def forward(self, x: torch.Tensor) -> ActorCriticOutput:
        features = self.torso(x)
        return ActorCriticOutput(
            pi_logits=self.policy_head(features), value=self.value_head(features).squeeze(-1)
        )


class SeparateActorCritic(nn.Module):
    """An actor and a critic with nothing shared, behind the shared network's interface: returns
    `ActorCriticOutput`, so an agent need not know which of the two it was given."""

    def __init__(self, actor: nn.Module, critic: nn.Module):
        super().__init__()
        self.actor = actor
        self.critic = critic

    def forward(self, x: torch.Tensor) -> ActorCriticOutput:
        return ActorCriticOutput(pi_logits=self.actor(x).pi_logits, value=self.critic(x).value)


class GaussianMlpActor(nn.Module):
    """Diagonal Gaussian policy for continuous actions: state-dependent mean, learned state-independent
    log standard deviation (as in the PPO paper's MuJoCo experiments)."""

    def __init__(
        self,
        state_dim: int,
        action_dim: int,
        hidden_sizes: Sequence[int] = (64, 64),
        initial_std: float = 1.0,
    ):
        super().__init__()
        self.torso = common.mlp(state_dim, hidden_sizes, nn.Tanh)
        self.mean_head = _linear(hidden_sizes[-1], action_dim, POLICY_HEAD_GAIN)
        self.log_std = nn.Parameter(torch.full((action_dim,), math.log(initial_std)))

    def forward(self, x: torch.Tensor) -> GaussianActorOutput:
        mean = self.mean_head(self.torso(x.float()))
        return GaussianActorOutput(mean=mean, log_std=self.log_std.expand_as(mean))


def build_actor_network(
    observation_shape: Sequence[int], num_actions: int, hidden_sizes: Sequence[int] = (64, 64)
) -> nn.Module:
    """Nature CNN actor for [C, H, W] observations, MLP actor for vectors."""
    if common.is_image_observation(observation_shape):
        return NatureCnnActor(observation_shape, num_actions)
    return MlpActor(int(observation_shape[0]), num_actions, hidden_sizes)


def build_critic_network(
    observation_shape: Sequence[int], hidden_sizes: Sequence[int] = (64, 64)
) -> nn.Module:
    """Nature CNN critic for [C, H, W] observations, MLP critic for vectors."""
    if common.is_image_observation(observation_shape):
        return NatureCnnCritic(observation_shape)
    return MlpCritic(int(observation_shape[0]), hidden_sizes)


def build_actor_critic_network(
    observation_shape: Sequence[int],
    num_actions: int,
    hidden_sizes: Sequence[int] = (64, 64),
    shared_torso: bool = True,
) -> nn.Module:
    """An actor-critic returning `ActorCriticOutput`: Nature CNN for [C, H, W] observations, MLP for
    vectors; one torso for both heads, or (`shared_torso=False`) two separate networks."""
    if common.is_image_observation(observation_shape):
        if shared_torso:
            return NatureCnnActorCritic(observation_shape, num_actions)
        return SeparateActorCritic(
            NatureCnnActor(observation_shape, num_actions), NatureCnnCritic(observation_shape)
        )
    state_dim = int(observation_shape[0])
    if shared_torso:
        return MlpActorCritic(state_dim, num_actions, hidden_sizes)
    return SeparateActorCritic(
        MlpActor(state_dim, num_actions, hidden_sizes), MlpCritic(state_dim, hidden_sizes)
    )


class GaussianActorCriticOutput(NamedTuple):
    mean: torch.Tensor  # [B, D]
    log_std: torch.Tensor  # [B, D]
    value: torch.Tensor  # [B]

    def distribution(self) -> distributions.Independent:
        """A diagonal Gaussian; log_prob and entropy sum over the D action dimensions ([B])."""
        return distributions.Independent(distributions.Normal(self.mean, self.log_std.exp()), 1)


class GaussianActorCritic(nn.Module):
    """A Gaussian actor and a state-value critic with separate torsos (the PPO paper's MuJoCo setup)."""

    def __init__(self, actor: nn.Module, critic: nn.Module):
        super().__init__()
        self.actor = actor
        self.critic = critic

    def forward(self, x: torch.Tensor) -> GaussianActorCriticOutput:
        policy = self.actor(x)
        return GaussianActorCriticOutput(policy.mean, policy.log_std, self.critic(x).value)
