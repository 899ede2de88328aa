"""Running observation and reward normalisation whose statistics live in the learner.

Why not gymnasium's `NormalizeObservation` / `NormalizeReward` wrappers: they keep their statistics
inside each environment instance. With one environment per actor process, every actor would then
normalise with its own, diverging statistics, and the learner (which evaluates, checkpoints and
resumes) could not see any of them. Here the learner alone updates the statistics from the unrolls it
receives:

- observation statistics are buffers of an `nn.Module` placed in front of the network
  (`NormalizedNetwork`), so they reach the actors with every parameter publication and are saved in
  the checkpoint with the network's `state_dict`;
- reward statistics (of the discounted return, per actor stream) are used by the learner only and
  saved through `RewardScaler.state_dict`.

The arithmetic (the parallel mean/variance update) is gymnasium's own
`gymnasium.wrappers.utils.update_mean_var_count_from_moments`.
"""

import numpy as np
import torch
from gymnasium.wrappers.utils import update_mean_var_count_from_moments
from torch import nn


class ObservationNormalizer(nn.Module):
    """y = clip((x - mean) / sqrt(var + epsilon), -clip, clip), with running mean and variance.

    The statistics are float64 buffers (so they travel with the module's `state_dict`); only
    `update` changes them, and only the learner calls it.
    """

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, epsilon: float = 1e-8):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))  # as gymnasium: no 0-division
        self.clip = clip
        self.epsilon = epsilon

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scaled = (x.double() - self.mean) / torch.sqrt(self.var + self.epsilon)
        return scaled.clamp(-self.clip, self.clip).float()

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Adds a batch of observations [N, *shape] to the statistics."""
        x = x.double().reshape(-1, *self.mean.shape)
        mean, var, count = update_mean_var_count_from_moments(
            self.mean.cpu().numpy(),
            self.var.cpu().numpy(),
            float(self.count),
            x.mean(0).cpu().numpy(),
            x.var(0, unbiased=False).cpu().numpy(),
            x.shape[0],
        )
        self.mean.copy_(torch.as_tensor(mean))
        self.var.copy_(torch.as_tensor(var))
        self.count.fill_(float(count))


class NormalizedNetwork(nn.Module):
    """`network(normalizer(x))`: the module the learner trains, publishes, checkpoints and evaluates."""

    def __init__(self, network: nn.Module, normalizer: nn.Module | None = None):
        super().__init__()
        self.normalizer = normalizer if normalizer is not None else nn.Identity()
        self.network = network

    def forward(self, x: torch.Tensor):
        return self.network(self.normalizer(x))


class RewardScaler:
    """Divides rewards by the running standard deviation of the discounted return (not re-centred).

    This is the reward scaling of PPO's reference implementation (`VecNormalize`): each stream
    (actor) keeps its own discounted return G <- gamma * G + r, reset at episode ends, and all streams
    feed one running variance.
    """

    def __init__(self, num_streams: int, discount: float, clip: float = 10.0, epsilon: float = 1e-8):
        self._discount = discount
        self._clip = clip
        self._epsilon = epsilon
        self._returns = np.zeros(num_streams)
        self._var = 1.0
        self._mean = 0.0
        self._count = 1e-4

    def scale(self, stream: int, r_t: np.ndarray, episode_end_t: np.ndarray) -> np.ndarray:
        """Updates the statistics with one stream's consecutive rewards [T] and returns them scaled.

        Args:
          stream: which actor the rewards come from (their order within a stream matters).
          r_t: rewards in time order, [T].
          episode_end_t: True where the episode ended on arriving with that reward, [T].
        """
        returns = np.empty(len(r_t))
        g = self._returns[stream]
        for t, (r, end) in enumerate(zip(r_t, episode_end_t, strict=True)):
            g = self._discount * g + r
            returns[t] = g
            if end:
                g = 0.0
        self._returns[stream] = g
        self._mean, self._var, self._count = update_mean_var_count_from_moments(
            self._mean, self._var, self._count, returns.mean(), returns.var(), len(returns)
        )
        return np.clip(r_t / np.sqrt(self._var + self._epsilon), -self._clip, self._clip)

    def state_dict(self) -> dict:
        return {
            "returns": torch.as_tensor(self._returns),
            "mean": float(self._mean),
            "var": float(self._var),
            "count": float(self._count),
        }

    def load_state_dict(self, state: dict) -> None:
        self._returns = state["returns"].numpy().astype(np.float64)
        self._mean, self._var, self._count = state["mean"], state["var"], state["count"]
