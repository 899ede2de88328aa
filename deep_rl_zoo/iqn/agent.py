"""IQN (Dabney et al. 2018, "Implicit Quantile Networks for Distributional Reinforcement Learning",
https://arxiv.org/abs/1806.06923): the network maps a state and a fraction tau ~ U(0, 1) to the
tau-quantile of the return; it learns with the quantile Huber loss on sampled fractions.

Three sample counts, as in the paper: N fractions for the online quantiles, N' for the target ones,
and K for acting (Q = the mean of K sampled quantiles; also how the target picks its arg-max).
"""

import copy

import numpy as np
import torch

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import replay_q_agents, value_learning
from deep_rl_zoo.greedy_actors import epsilon_greedy_actions
from deep_rl_zoo.networks.value import IqnNetwork, QuantileNetworkOutput
from deep_rl_zoo.optimization import gradient_step
from deep_rl_zoo.schedules import LinearSchedule


class SampledTausQNetwork:
    """Makes an IQN network act like a Q-network: `q_values` is the mean of `num_taus` quantiles at
    fresh fractions drawn from `generator`. Lets `greedy_action` and `EpsilonGreedyActor` drive IQN."""

    def __init__(self, network: IqnNetwork, num_taus: int, generator: torch.Generator):
        self.network = network
        self.num_taus = num_taus
        self.generator = generator

    def __call__(self, x: torch.Tensor) -> QuantileNetworkOutput:
        return self.network(x, sample_taus(x.shape[0], self.num_taus, self.generator, x.device))

    def eval(self) -> "SampledTausQNetwork":
        self.network.eval()
        return self


def sample_taus(
    batch_size: int, num_taus: int, generator: torch.Generator, device: torch.device
) -> torch.Tensor:
    """Fractions tau ~ U(0, 1), [batch_size, num_taus], drawn on the CPU generator (reproducible on
    any device) and moved to `device`."""
    return torch.rand(batch_size, num_taus, generator=generator).to(device)


class Iqn(replay_q_agents.ReplayQActing):
    """An IQN agent that acts and learns in the same process (replay, n-step transitions, target
    network and learning cadence as in DQN)."""

    agent_name = "IQN"

    def __init__(
        self,
        *,
        network: IqnNetwork,
        optimizer: torch.optim.Optimizer,
        replay: replay_lib.UniformReplay,
        transition_accumulator: replay_lib.TransitionAccumulator,
        exploration_epsilon: LinearSchedule,
        num_actions: int,
        num_online_taus: int,
        num_target_taus: int,
        num_acting_taus: int,
        min_replay_size: int,
        learn_interval: int,
        batch_size: int,
        target_network_update_period: int,
        max_grad_norm: float,
        rng: np.random.Generator,
        tau_generator: torch.Generator,
        device: torch.device,
        frame_store: replay_lib.FrameStackStore | None = None,
        huber_delta: float | None = 1.0,
    ):
        """
        Args:
          network: online IQN network.
          replay: stores `replay_lib.Transition`s (of frame handles when `frame_store` is given).
          exploration_epsilon: epsilon as a function of env steps.
          num_online_taus: N, fractions sampled per example for the online quantiles.
          num_target_taus: N', fractions sampled per example for the target quantiles.
          num_acting_taus: K, fractions whose mean is the Q-value when acting and when the target
            network picks a*.
          min_replay_size: transitions stored before learning starts.
          learn_interval: env steps between two gradient steps.
          target_network_update_period: gradient steps between two target-network copies.
          max_grad_norm: global gradient-norm clip; 0 disables.
          rng: exploration and replay-independent randomness.
          tau_generator: CPU generator of every sampled fraction (acting and learning).
          frame_store: for Atari, stores each frame once; observations in the replay are its handles.
          huber_delta: kappa of the quantile Huber loss, None for the plain quantile loss.
        """
        if batch_size > replay.capacity:
            raise ValueError(f"batch_size {batch_size} is larger than the replay capacity {replay.capacity}")
        self._network = network
        self._target_network = copy.deepcopy(network).requires_grad_(False)
        self._acting_network = SampledTausQNetwork(network, num_acting_taus, tau_generator)
        self._optimizer = optimizer
        self._replay = replay
        self._writer = replay_lib.TransitionWriter(replay, transition_accumulator, frame_store)
        self._exploration_epsilon = exploration_epsilon
        self._num_actions = num_actions
        self._num_online_taus = num_online_taus
        self._num_target_taus = num_target_taus
        self._num_acting_taus = num_acting_taus
        self._min_replay_size = max(min_replay_size, batch_size)
        self._learn_interval = learn_interval
        self._batch_size = batch_size
        self._target_network_update_period = target_network_update_period
        self._max_grad_norm = max_grad_norm
        self._huber_delta = huber_delta
        self._rng = rng
        self._tau_generator = tau_generator
        self._device = device
        self._env_steps = 0
        self._learner_steps = 0
        self._last_loss = float("nan")
        self._last_grad_norm = float("nan")

    def _choose_actions(self, observations: np.ndarray, env_steps: int) -> np.ndarray:
        return epsilon_greedy_actions(
            self._acting_network,
            observations,
            self._exploration_epsilon(env_steps),
            self._num_actions,
            self._rng,
            self._device,
        )

    @property
    def epsilon(self) -> float:
        return self._exploration_epsilon(self._env_steps)

    def _learn(self) -> None:
        batch = self._writer.to_tensors(self._replay.sample(self._batch_size), self._device)
        s_tm1, s_t = batch.s_tm1, batch.s_t
        size = s_tm1.shape[0]
        taus_tm1 = sample_taus(size, self._num_online_taus, self._tau_generator, self._device)
        dist_q_tm1 = self._network(s_tm1, taus_tm1).q_dist
        with torch.no_grad():
            taus_select = sample_taus(size, self._num_acting_taus, self._tau_generator, self._device)
            taus_t = sample_taus(size, self._num_target_taus, self._tau_generator, self._device)
            dist_q_t_selector = self._target_network(s_t, taus_select).q_dist
            dist_q_t = self._target_network(s_t, taus_t).q_dist
        output = value_learning.quantile_q_learning(
            dist_q_tm1,
            taus_tm1,
            batch.a_tm1,
            batch.r_t,
            batch.discount_t,
            dist_q_t_selector,
            dist_q_t,
            huber_delta=self._huber_delta,
        )
        loss = output.loss.mean()
        self._last_loss, self._last_grad_norm = gradient_step(
            loss, self._optimizer, self._network.parameters(), self._max_grad_norm, self._learner_steps + 1
        )
        self._learner_steps += 1
        if self._learner_steps % self._target_network_update_period == 0:
            self._target_network.load_state_dict(self._network.state_dict())

    @property
    def statistics(self) -> dict[str, float]:
        return {
            "loss": self._last_loss,
            "grad_norm": self._last_grad_norm,
            "epsilon": self.epsilon,
            "learner_steps": self._learner_steps,
            "replay_size": self._replay.size,
        }

    def state_dict(self) -> dict:
        return {
            "network": self._network.state_dict(),
            "target_network": self._target_network.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "env_steps": self._env_steps,
            "learner_steps": self._learner_steps,
            "rng": self._rng.bit_generator.state,
            "replay_rng": self._replay.rng.bit_generator.state,
            "tau_generator": self._tau_generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._target_network.load_state_dict(state["target_network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        self._rng.bit_generator.state = state["rng"]
        self._replay.rng.bit_generator.state = state["replay_rng"]
        self._tau_generator.set_state(state["tau_generator"])
