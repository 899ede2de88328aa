"""Rainbow (Hessel et al. 2017, "Rainbow: Combining Improvements in Deep Reinforcement Learning",
https://arxiv.org/abs/1710.02298): C51's distributional loss with double selection, n-step returns,
prioritized replay, and a dueling network whose noisy layers do all the exploration (no epsilon)."""

import copy

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import replay_q_agents, value_learning
from deep_rl_zoo.greedy_actors import greedy_action, greedy_actions
from deep_rl_zoo.networks.value import reset_noise
from deep_rl_zoo.optimization import gradient_step
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.types_ import TimeStep


class Rainbow(replay_q_agents.ReplayQActing):
    """A Rainbow agent that acts and learns in the same process.

    Acts greedily with respect to the noisy online network. Its noise is redrawn before every gradient
    step (and acting keeps that noise until the next one), so the behaviour changes as often as the
    weights; during the warm-up it is redrawn every `learn_interval` env steps. Every `learn_interval` env steps
    it draws a prioritized batch of n-step transitions, minimises the importance-weighted
    cross-entropy of `value_learning.categorical_dist_double_qlearning`, and sets the batch's
    priorities to the KL divergence between target and prediction (as in the paper).
    """

    agent_name = "Rainbow"

    def __init__(
        self,
        *,
        network: nn.Module,
        optimizer: torch.optim.Optimizer,
        replay: replay_lib.PrioritizedReplay,
        transition_accumulator: replay_lib.TransitionAccumulator,
        importance_sampling_exponent: LinearSchedule,
        priority_epsilon: float,
        min_replay_size: int,
        learn_interval: int,
        batch_size: int,
        target_network_update_period: int,
        max_grad_norm: float,
        device: torch.device,
        frame_store: replay_lib.FrameStackStore | None = None,
    ):
        """
        Args:
          network: online categorical network with noisy layers (`build_rainbow_network`), returns
            `CategoricalQNetworkOutput`; its `atoms` buffer [K] is the support of the distributions.
          replay: stores n-step `replay_lib.Transition`s (of frame handles when `frame_store` is given).
          transition_accumulator: makes the n-step transitions.
          importance_sampling_exponent: beta as a function of env steps.
          priority_epsilon: added to the KL priority so that no transition gets priority 0.
          min_replay_size: transitions stored before learning starts.
          learn_interval: env steps between two gradient steps.
          target_network_update_period: gradient steps between two target-network copies.
          max_grad_norm: global gradient-norm clip; 0 disables.
          frame_store: for Atari, stores each frame once; observations in the replay are its handles.
        """
        if batch_size > replay.capacity:
            raise ValueError(f"batch_size {batch_size} is larger than the replay capacity {replay.capacity}")
        self._network = network.train()
        self._target_network = copy.deepcopy(network).requires_grad_(False)
        self._optimizer = optimizer
        self._replay = replay
        self._writer = replay_lib.TransitionWriter(replay, transition_accumulator, frame_store)
        self._importance_sampling_exponent = importance_sampling_exponent
        self._priority_epsilon = priority_epsilon
        self._min_replay_size = max(min_replay_size, batch_size)
        self._learn_interval = learn_interval
        self._batch_size = batch_size
        self._target_network_update_period = target_network_update_period
        self._max_grad_norm = max_grad_norm
        self._device = device
        self._env_steps = 0
        self._learner_steps = 0
        self._last_loss = float("nan")
        self._last_grad_norm = float("nan")

    def _choose_actions(self, observations: np.ndarray, env_steps: int) -> np.ndarray:
        interval = self._learn_interval
        if self._replay.size < self._min_replay_size and (
            env_steps % interval == 0 or env_steps // interval > self._env_steps // interval
        ):
            reset_noise(self._network)  # warm-up: vary the behaviour; later `_learn` redraws the noise
        return greedy_actions(self._network, observations, self._device)

    def _learn(self) -> None:
        sample = self._replay.sample(self._batch_size, self._importance_sampling_exponent(self._env_steps))
        batch = self._writer.to_tensors(sample.items, self._device)
        # Fresh, independent noise for the online and the target network at every gradient step.
        reset_noise(self._network)
        reset_noise(self._target_network)
        logits_q_tm1 = self._network(batch.s_tm1).q_logits
        with torch.no_grad():
            logits_q_t = self._target_network(batch.s_t).q_logits
            q_t_selector = self._network(batch.s_t).q_values
        output = value_learning.categorical_dist_double_qlearning(
            self._network.atoms,
            logits_q_tm1,
            batch.a_tm1,
            batch.r_t,
            batch.discount_t,
            self._target_network.atoms,
            logits_q_t,
            q_t_selector,
        )
        # The weights undo the bias of prioritized sampling (Schaul et al. 2015, section 3.4).
        loss = (torch.as_tensor(sample.weights, device=self._device) * output.loss).mean()
        self._last_loss, self._last_grad_norm = gradient_step(
            loss, self._optimizer, self._network.parameters(), self._max_grad_norm, self._learner_steps + 1
        )
        self._learner_steps += 1
        priorities = output.extra.kl.clamp(min=0.0).cpu().numpy() + self._priority_epsilon
        self._replay.update_priorities(sample.indices, priorities)
        if self._learner_steps % self._target_network_update_period == 0:
            self._target_network.load_state_dict(self._network.state_dict())

    @property
    def statistics(self) -> dict[str, float]:
        return {
            "loss": self._last_loss,
            "grad_norm": self._last_grad_norm,
            "importance_sampling_exponent": self._importance_sampling_exponent(self._env_steps),
            "max_priority": self._replay.max_priority,
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
            "replay_rng": self._replay.rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),  # the noisy layers' noise comes from torch's generator
        }

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._target_network.load_state_dict(state["target_network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        self._replay.rng.bit_generator.state = state["replay_rng"]
        if "torch_rng" in state:  # absent from checkpoints written before the noise state was saved
            torch.set_rng_state(state["torch_rng"])


class MeanNetworkActor:
    """Evaluation actor: greedy with respect to the noisy network's mean weights (noise switched off).

    The network may be the very module the learner trains; it is put in `eval()` mode only for the
    duration of each action, then back in the mode it was in.
    """

    def __init__(self, network: nn.Module, device: torch.device, agent_name: str = Rainbow.agent_name):
        self.agent_name = agent_name
        self._network = network
        self._device = device

    def step(self, timestep: TimeStep) -> int:
        was_training = self._network.training
        self._network.eval()
        try:
            return greedy_action(self._network, timestep.observation, self._device)
        finally:
            self._network.train(was_training)

    def reset(self) -> None:
        pass

    @property
    def statistics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
