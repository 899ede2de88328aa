"""Evaluation actors: act (almost) greedily with a network shared with, or loaded for, the learner."""

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from deep_rl_zoo.networks import numpy_policy
from deep_rl_zoo.types_ import TimeStep


class EpsilonGreedyActor:
    """Takes arg-max Q actions, or a uniformly random one with probability `epsilon`.

    The network is used as given (often the very module the learner trains), in inference mode, so
    evaluation always sees the latest parameters without copying them.
    """

    def __init__(
        self,
        network: nn.Module,
        num_actions: int,
        epsilon: float,
        rng: np.random.Generator,
        device: torch.device,
        agent_name: str,
    ):
        self.agent_name = agent_name
        self._network = network
        self._num_actions = num_actions
        self._epsilon = epsilon
        self._rng = rng
        self._device = device

    def step(self, timestep: TimeStep) -> int:
        return epsilon_greedy_action(
            self._network, timestep.observation, self._epsilon, self._num_actions, self._rng, self._device
        )

    def step_batch(self, timesteps: Sequence[TimeStep]) -> np.ndarray:
        """Actions [N] for one timestep of each of N envs, with one batched forward."""
        observations = np.stack([timestep.observation for timestep in timesteps])
        return epsilon_greedy_actions(
            self._network, observations, self._epsilon, self._num_actions, self._rng, self._device
        )

    def reset(self) -> None:
        pass

    @property
    def statistics(self) -> dict[str, float]:
        return {"epsilon": self._epsilon}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


@torch.inference_mode()
def greedy_action(network: nn.Module, observation: np.ndarray, device: torch.device) -> int:
    """arg-max_a Q(observation, a) for one observation."""
    x = torch.as_tensor(observation, device=device).unsqueeze(0)
    return int(network(x).q_values.argmax(dim=1).item())


def epsilon_greedy_action(
    network: nn.Module,
    observation: np.ndarray,
    epsilon: float,
    num_actions: int,
    rng: np.random.Generator,
    device: torch.device,
) -> int:
    """A uniformly random action with probability `epsilon`, else the greedy one.

    The coin is tossed first, so a random action costs no network forward pass.
    """
    if rng.random() < epsilon:
        return int(rng.integers(num_actions))
    return greedy_action(network, observation, device)


class PolicyGreedyActor:
    """Acts with a policy network: its most probable action (arg-max of the logits, or the Gaussian's
    mean), or a sample from the policy when `sample_actions` is set.

    Like `EpsilonGreedyActor`, it uses the network it is given as is, so evaluation during training
    sees the learner's latest parameters.
    """

    def __init__(
        self, network: nn.Module, device: torch.device, agent_name: str, sample_actions: bool = False
    ):
        self.agent_name = agent_name
        self._network = network
        self._device = device
        self._sample_actions = sample_actions
        # Greedy actions of a small MLP policy come from its numpy mirror (~10x faster per observation);
        # it reads the same parameters, so the learner's updates show through.
        self._numpy_policy = None if sample_actions else numpy_policy.policy_forward(network)

    def step(self, timestep: TimeStep) -> int | np.ndarray:
        if self._numpy_policy is not None:
            output = self._numpy_policy(timestep.observation)
            return int(output.argmax()) if isinstance(output, np.ndarray) else output[0]
        return self._torch_step(timestep)

    @torch.inference_mode()
    def _torch_step(self, timestep: TimeStep) -> int | np.ndarray:
        output = self._network(torch.as_tensor(timestep.observation, device=self._device).unsqueeze(0))
        if self._sample_actions:
            action = output.distribution().sample()[0]
        elif hasattr(output, "pi_logits"):
            action = output.pi_logits[0].argmax()
        else:  # a Gaussian policy: its mode is its mean
            action = output.mean[0]
        return int(action.item()) if action.dim() == 0 else action.cpu().numpy()

    def reset(self) -> None:
        pass

    @property
    def statistics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


@torch.inference_mode()
def greedy_actions(network: nn.Module, observations: np.ndarray, device: torch.device) -> np.ndarray:
    """int64 [N]: arg-max_a Q(observation_i, a) for a batch [N, ...] of observations, in one forward."""
    x = torch.as_tensor(observations, device=device)
    return network(x).q_values.argmax(dim=1).cpu().numpy().astype(np.int64)


def epsilon_greedy_actions(
    network: nn.Module,
    observations: np.ndarray,
    epsilon: float,
    num_actions: int,
    rng: np.random.Generator,
    device: torch.device,
) -> np.ndarray:
    """`epsilon_greedy_action` for a batch [N, ...] of observations (one env each), one forward for all
    the envs that do not explore. With N = 1 it draws from `rng` exactly as `epsilon_greedy_action`."""
    num_envs = len(observations)
    explore = rng.random(num_envs) < epsilon
    actions = np.empty(num_envs, dtype=np.int64)
    if explore.any():
        actions[explore] = rng.integers(num_actions, size=int(explore.sum()))
    if not explore.all():
        actions[~explore] = greedy_actions(network, observations[~explore], device)
    return actions
