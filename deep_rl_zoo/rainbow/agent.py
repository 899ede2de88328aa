"""Rainbow (Hessel et al. 2017, "Rainbow: Combining Improvements in Deep Reinforcement Learning",
https://arxiv.org/abs/1710.02298): C51's distributional loss with double selection, n-step returns,
prioritized replay, and a dueling network whose noisy layers do all the exploration (no epsilon)."""

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import replay_q_agents, value_learning
from deep_rl_zoo.greedy_actors import greedy_action, greedy_actions
from deep_rl_zoo.networks.value import reset_noise
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.types_ import TimeStep


class Rainbow(replay_q_agents.ReplayQAgent):
    """A Rainbow agent that acts and learns in the same process.

    Acts greedily with respect to the noisy online network. Its noise is redrawn before every gradient
    step (and acting keeps that noise until the next one), so the behaviour changes as often as the
    weights; during the warm-up it is redrawn every `learn_interval` env steps. Every `learn_interval` env steps
    it draws a prioritized batch of n-step transitions, minimises the importance-weighted
    cross-entropy of `value_learning.categorical_dist_double_qlearning`, and sets the batch's
    priorities to the KL divergence between target and prediction (as in the paper). Storing, the
    gradient step and the target copies are `replay_q_agents.ReplayQAgent`'s.
    """

    agent_name = "Rainbow"

    def __init__(self, *, importance_sampling_exponent: LinearSchedule, priority_epsilon: float, **shared):
        """
        Args:
          importance_sampling_exponent: beta as a function of env steps.
          priority_epsilon: added to the KL priority so that no transition gets priority 0.
          **shared: `replay_q_agents.ReplayQAgent`'s arguments but the epsilon-greedy ones: a
            categorical network with noisy layers (`build_rainbow_network`, returns
            `CategoricalQNetworkOutput`; its `atoms` buffer [K] is the support of the distributions),
            optimizer, a `replay_lib.PrioritizedReplay` of n-step transitions, ...
        """
        super().__init__(**shared)
        # Noisy layers draw their noise in train mode (the evaluation actor uses their mean).
        self._network.train()
        self._target_network.train()
        self._importance_sampling_exponent = importance_sampling_exponent
        self._priority_epsilon = priority_epsilon

    def _choose_actions(self, observations: np.ndarray, env_steps: int) -> np.ndarray:
        interval = self._learn_interval
        if self._replay.size < self._min_replay_size and (
            env_steps % interval == 0 or env_steps // interval > self._env_steps // interval
        ):
            reset_noise(self._acting_network)  # warm-up: vary the behaviour; later `_learn` redraws the noise
        # The online network itself, or with overlapped learning its copy (with the noise last drawn).
        return greedy_actions(self._acting_network, observations, self._device)

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
        self._apply_gradient(loss)
        priorities = output.extra.kl.clamp(min=0.0).cpu().numpy() + self._priority_epsilon
        self._replay.update_priorities(sample.indices, priorities)

    @property
    def statistics(self) -> dict[str, float]:
        return {
            **super().statistics,
            "importance_sampling_exponent": self._importance_sampling_exponent(self._env_steps),
            "max_priority": self._replay.max_priority,
        }

    def state_dict(self) -> dict:
        # the noisy layers' noise comes from torch's generator
        return {**super().state_dict(), "torch_rng": torch.get_rng_state()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
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
