"""C51 (Bellemare, Dabney & Munos 2017, "A Distributional Perspective on Reinforcement Learning",
https://arxiv.org/abs/1707.06887): DQN that learns, for each action, a categorical distribution of the
return on fixed atoms, trained by cross-entropy against the projected distributional Bellman target."""

import torch

from deep_rl_zoo import replay_q_agents, value_learning


class C51Dqn(replay_q_agents.ReplayQAgent):
    """A C51 agent that acts and learns in the same process.

    Acting (epsilon-greedy on the distributions' means), uniform replay and target-network refreshes
    are DQN's (`replay_q_agents.ReplayQAgent`, whose arguments it takes); the loss is
    `value_learning.categorical_dist_qlearning`. Its network returns `CategoricalQNetworkOutput`, and
    its `atoms` buffer [K] is the support of the distributions.
    """

    agent_name = "C51"

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
        self._apply_gradient(loss)
