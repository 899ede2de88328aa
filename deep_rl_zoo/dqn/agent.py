"""DQN (Mnih et al. 2015, "Human-level control through deep reinforcement learning",
https://www.nature.com/articles/nature14236): epsilon-greedy acting, uniform experience replay,
a periodically copied target network and the Q-learning loss."""

import torch

from deep_rl_zoo import replay_q_agents, value_learning


class Dqn(replay_q_agents.ReplayQAgent):
    """A DQN agent that acts and learns in the same process.

    Every env step: store the transition, then every `learn_interval` env steps (once the replay holds
    `min_replay_size` transitions) take one gradient step on a uniformly sampled batch. The target
    network is a copy of the online network refreshed every `target_network_update_period` gradient
    steps. Acting, storing, the gradient step and the target copies are `replay_q_agents.ReplayQAgent`'s;
    the loss below is what makes it DQN.
    """

    agent_name = "DQN"

    def __init__(self, *, huber_delta: float | None = 1.0, **shared):
        """
        Args:
          huber_delta: Huber threshold of the TD error, None for the squared loss.
          **shared: `replay_q_agents.ReplayQAgent`'s arguments (network, optimizer, replay,
            exploration_epsilon, ...).
        """
        super().__init__(**shared)
        self._huber_delta = huber_delta

    def _learn(self) -> None:
        batch = self._writer.to_tensors(self._replay.sample(self._batch_size), self._device)
        q_tm1 = self._network(batch.s_tm1).q_values
        with torch.no_grad():
            q_t = self._target_network(batch.s_t).q_values
        output = value_learning.qlearning(
            q_tm1, batch.a_tm1, batch.r_t, batch.discount_t, q_t, huber_delta=self._huber_delta
        )
        self._apply_gradient(output.loss.mean())
