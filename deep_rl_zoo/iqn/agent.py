"""IQN (Dabney et al. 2018, "Implicit Quantile Networks for Distributional Reinforcement Learning",
https://arxiv.org/abs/1806.06923): the network maps a state and a fraction tau ~ U(0, 1) to the
tau-quantile of the return; it learns with the quantile Huber loss on sampled fractions.

Three sample counts, as in the paper: N fractions for the online quantiles, N' for the target ones,
and K for acting (Q = the mean of K sampled quantiles; also how the target picks its arg-max).
"""

import torch

from deep_rl_zoo import replay_q_agents, value_learning
from deep_rl_zoo.networks.value import IqnNetwork, QuantileNetworkOutput


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


class Iqn(replay_q_agents.ReplayQAgent):
    """An IQN agent that acts and learns in the same process (replay, n-step transitions, target
    network and learning cadence as in DQN: `replay_q_agents.ReplayQAgent`)."""

    agent_name = "IQN"

    def __init__(
        self,
        *,
        num_online_taus: int,
        num_target_taus: int,
        num_acting_taus: int,
        tau_generator: torch.Generator,
        huber_delta: float | None = 1.0,
        **shared,
    ):
        """
        Args:
          num_online_taus: N, fractions sampled per example for the online quantiles.
          num_target_taus: N', fractions sampled per example for the target quantiles.
          num_acting_taus: K, fractions whose mean is the Q-value when acting and when the target
            network picks a*.
          tau_generator: CPU generator of every sampled fraction (acting and learning).
          huber_delta: kappa of the quantile Huber loss, None for the plain quantile loss.
          **shared: `replay_q_agents.ReplayQAgent`'s arguments (an `IqnNetwork`, optimizer, replay,
            exploration_epsilon, ...).
        """
        super().__init__(**shared)
        # With overlapped learning acting runs beside `_learn` and needs fractions of its own.
        self._acting_tau_generator = tau_generator
        if self._overlap:
            seed = int(torch.randint(2**62, (1,), generator=tau_generator))
            self._acting_tau_generator = torch.Generator().manual_seed(seed)
        self._acting_network = SampledTausQNetwork(
            self._acting_source, num_acting_taus, self._acting_tau_generator
        )
        self._num_online_taus = num_online_taus
        self._num_target_taus = num_target_taus
        self._num_acting_taus = num_acting_taus
        self._tau_generator = tau_generator
        self._huber_delta = huber_delta

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
        self._apply_gradient(loss)

    def state_dict(self) -> dict:
        state = {**super().state_dict(), "tau_generator": self._tau_generator.get_state()}
        if self._acting_tau_generator is not self._tau_generator:
            state["acting_tau_generator"] = self._acting_tau_generator.get_state()
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self._tau_generator.set_state(state["tau_generator"])
        if "acting_tau_generator" in state and self._acting_tau_generator is not self._tau_generator:
            self._acting_tau_generator.set_state(state["acting_tau_generator"])
