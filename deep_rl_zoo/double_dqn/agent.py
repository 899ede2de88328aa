"""Double DQN (van Hasselt, Guez & Silver 2015, "Deep Reinforcement Learning with Double Q-learning",
https://arxiv.org/abs/1509.06461): DQN whose bootstrap action is chosen by the online network and
valued by the target network, which removes most of Q-learning's over-estimation."""

import torch

from deep_rl_zoo import replay_q_agents, value_learning


class DoubleDqn(replay_q_agents.ReplayQAgent):
    """A Double DQN agent that acts and learns in the same process.

    Acting, replay and target-network refreshes are DQN's (`replay_q_agents.ReplayQAgent`); only the
    target differs: `r_t + discount_t * q_target(s_t)[argmax_a q_online(s_t)[a]]`.
    """

    agent_name = "DoubleDQN"

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
            q_t_value = self._target_network(batch.s_t).q_values
            q_t_selector = self._network(batch.s_t).q_values
        output = value_learning.double_qlearning(
            q_tm1,
            batch.a_tm1,
            batch.r_t,
            batch.discount_t,
            q_t_value,
            q_t_selector,
            huber_delta=self._huber_delta,
        )
        loss = output.loss.mean()
        self._apply_gradient(loss)
