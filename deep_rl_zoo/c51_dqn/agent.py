"""C51 (Bellemare, Dabney & Munos 2017, "A Distributional Perspective on Reinforcement Learning",
https://arxiv.org/abs/1707.06887): DQN that learns, for each action, a categorical distribution of the
return on fixed atoms, trained by cross-entropy against the projected distributional Bellman target."""

import copy

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import replay_q_agents, value_learning
from deep_rl_zoo.greedy_actors import epsilon_greedy_actions
from deep_rl_zoo.optimization import gradient_step
from deep_rl_zoo.schedules import LinearSchedule


class C51Dqn(replay_q_agents.ReplayQActing):
    """A C51 agent that acts and learns in the same process.

    Acting (epsilon-greedy on the distributions' means), uniform replay and target-network refreshes
    are DQN's; the loss is `value_learning.categorical_dist_qlearning`.
    """

    agent_name = "C51"

    def __init__(
        self,
        *,
        network: nn.Module,
        optimizer: torch.optim.Optimizer,
        replay: replay_lib.UniformReplay,
        transition_accumulator: replay_lib.TransitionAccumulator,
        exploration_epsilon: LinearSchedule,
        num_actions: int,
        min_replay_size: int,
        learn_interval: int,
        batch_size: int,
        target_network_update_period: int,
        max_grad_norm: float,
        rng: np.random.Generator,
        device: torch.device,
        frame_store: replay_lib.FrameStackStore | None = None,
    ):
        """
        Args:
          network: online categorical network, returns `CategoricalQNetworkOutput`; its `atoms`
            buffer [K] is the support of the distributions.
          replay: stores `replay_lib.Transition`s (of frame handles when `frame_store` is given).
          exploration_epsilon: epsilon as a function of env steps.
          min_replay_size: transitions stored before learning starts.
          learn_interval: env steps between two gradient steps.
          target_network_update_period: gradient steps between two target-network copies.
          max_grad_norm: global gradient-norm clip; 0 disables.
          frame_store: for Atari, stores each frame once; observations in the replay are its handles.
        """
        if batch_size > replay.capacity:
            raise ValueError(f"batch_size {batch_size} is larger than the replay capacity {replay.capacity}")
        self._network = network
        self._target_network = copy.deepcopy(network).requires_grad_(False)
        self._optimizer = optimizer
        self._replay = replay
        self._writer = replay_lib.TransitionWriter(replay, transition_accumulator, frame_store)
        self._exploration_epsilon = exploration_epsilon
        self._num_actions = num_actions
        self._min_replay_size = max(min_replay_size, batch_size)
        self._learn_interval = learn_interval
        self._batch_size = batch_size
        self._target_network_update_period = target_network_update_period
        self._max_grad_norm = max_grad_norm
        self._rng = rng
        self._device = device
        self._env_steps = 0
        self._learner_steps = 0
        self._last_loss = float("nan")
        self._last_grad_norm = float("nan")

    def _choose_actions(self, observations: np.ndarray, env_steps: int) -> np.ndarray:
        return epsilon_greedy_actions(
            self._network,
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
        logits_q_tm1 = self._network(batch.s_tm1).q_logits
        with torch.no_grad():
            logits_q_t = self._target_network(batch.s_t).q_logits
        output = value_learning.categorical_dist_qlearning(
            self._network.atoms,
            logits_q_tm1,
            batch.a_tm1,
            batch.r_t,
            batch.discount_t,
            self._target_network.atoms,
            logits_q_t,
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
        }

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._target_network.load_state_dict(state["target_network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        self._rng.bit_generator.state = state["rng"]
        self._replay.rng.bit_generator.state = state["replay_rng"]
