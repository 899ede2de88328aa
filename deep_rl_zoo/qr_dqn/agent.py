"""QR-DQN (Dabney et al. 2017, "Distributional Reinforcement Learning with Quantile Regression",
https://arxiv.org/abs/1710.10044): DQN whose network outputs N quantiles of the return per action,
at the fixed fractions (2i + 1) / 2N, trained with the quantile Huber loss."""

import torch

from deep_rl_zoo import replay_q_agents, value_learning


class QrDqn(replay_q_agents.ReplayQAgent):
    """A QR-DQN agent that acts and learns in the same process.

    Acting is epsilon-greedy on the mean of the quantiles; everything around the loss (replay,
    n-step transitions, target network, learning cadence) is DQN's (`replay_q_agents.ReplayQAgent`).
    """

    agent_name = "QR-DQN"

    def __init__(self, *, num_quantiles: int, huber_delta: float | None = 1.0, **shared):
        """
        Args:
          num_quantiles: N, the number of fixed quantile fractions; the network returns
            `QuantileNetworkOutput` with N quantiles.
          huber_delta: kappa of the quantile Huber loss, None for the plain quantile loss.
          **shared: `replay_q_agents.ReplayQAgent`'s arguments (network, optimizer, replay,
            exploration_epsilon, ...).
        """
        super().__init__(**shared)
        self._taus = value_learning.quantile_midpoints(num_quantiles, self._device)  # [N]
        self._huber_delta = huber_delta

    def _learn(self) -> None:
        batch = self._writer.to_tensors(self._replay.sample(self._batch_size), self._device)
        dist_q_tm1 = self._network(batch.s_tm1).q_dist
        with torch.no_grad():
            dist_q_t = self._target_network(batch.s_t).q_dist
        output = value_learning.quantile_q_learning(
            dist_q_tm1,
            self._taus.expand(dist_q_tm1.shape[0], -1),
            batch.a_tm1,
            batch.r_t,
            batch.discount_t,
            dist_q_t,
            dist_q_t,
            huber_delta=self._huber_delta,
        )
        loss = output.loss.mean()
        self._apply_gradient(loss)
