"""Prioritized DQN (Schaul, Quan, Antonoglou & Silver 2015, "Prioritized Experience Replay",
https://arxiv.org/abs/1511.05952): Double DQN that replays transitions in proportion to their last
|TD error| (on a sum tree) and corrects the bias with importance-sampling weights."""

import torch

from deep_rl_zoo import replay_q_agents, value_learning
from deep_rl_zoo.schedules import LinearSchedule


class PrioritizedDqn(replay_q_agents.ReplayQAgent):
    """A Double DQN agent with proportional prioritized replay, acting and learning in one process.

    Each gradient step draws a batch with probability proportional to priority^alpha, scales each
    example's loss by its importance-sampling weight w_i = (N P(i))^-beta / max_j w_j (beta annealed to
    1 over training), and then sets the batch's priorities to |TD error| + `priority_epsilon`.
    As in the paper the target is Double DQN's. Acting, storing, the gradient step and the target
    copies are `replay_q_agents.ReplayQAgent`'s.
    """

    agent_name = "PrioritizedDQN"

    def __init__(
        self,
        *,
        importance_sampling_exponent: LinearSchedule,
        priority_epsilon: float,
        huber_delta: float | None = 1.0,
        **shared,
    ):
        """
        Args:
          importance_sampling_exponent: beta as a function of env steps.
          priority_epsilon: added to |TD error| so that no transition gets priority 0.
          huber_delta: Huber threshold of the TD error, None for the squared loss.
          **shared: `replay_q_agents.ReplayQAgent`'s arguments (network, optimizer, a
            `replay_lib.PrioritizedReplay`, exploration_epsilon, ...).
        """
        super().__init__(**shared)
        self._importance_sampling_exponent = importance_sampling_exponent
        self._priority_epsilon = priority_epsilon
        self._huber_delta = huber_delta

    def _learn(self) -> None:
        sample = self._replay.sample(self._batch_size, self._importance_sampling_exponent(self._env_steps))
        batch = self._writer.to_tensors(sample.items, self._device)
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
        # The weights undo the bias of prioritized sampling (Schaul et al. 2015, section 3.4).
        loss = (torch.as_tensor(sample.weights, device=self._device) * output.loss).mean()
        self._apply_gradient(loss)
        priorities = output.extra.td_error.abs().cpu().numpy() + self._priority_epsilon
        self._replay.update_priorities(sample.indices, priorities)

    @property
    def statistics(self) -> dict[str, float]:
        return {
            **super().statistics,
            "importance_sampling_exponent": self._importance_sampling_exponent(self._env_steps),
            "max_priority": self._replay.max_priority,
        }
