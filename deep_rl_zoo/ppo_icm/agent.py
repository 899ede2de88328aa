"""PPO with the Intrinsic Curiosity Module (Pathak, Agrawal, Efros & Darrell 2017, "Curiosity-driven
Exploration by Self-supervised Prediction", https://arxiv.org/abs/1705.05363).

Actors are PPO's (`unrolls.UnrollActor`). The learner (`PpoIcm`), per batch of one unroll from every
actor:

1. intrinsic rewards: r^i_t = eta / 2 * ||phi_hat(s_{t+1}) - phi(s_{t+1})||^2, the forward model's error
   in the feature space of the inverse-dynamics model, for every transition (0 on reset pairs);
2. rewards r_t = r^e_t + r^i_t (the paper's sum, one value head, episodic returns) and PPO's GAE
   advantages and lambda-return targets from them (`unrolls.advantages_and_returns`);
3. K epochs over shuffled minibatches of PPO's loss plus ICM's (1 - beta) * L_inverse + beta * L_forward
   on the same minibatch (one Adam; each network's gradient clipped to its own norm);
4. updates the policy's observation statistics (which the ICM also reads) with the batch.

Paper choices kept: the embedding learned through the inverse model (and the forward loss), the forward
model in feature space, the reward scale eta, beta = 0.2, the ICM trained jointly with the policy on the
policy's own experience, summed extrinsic + intrinsic reward with one value function.
Changed: PPO instead of A3C (as Burda et al.'s "Large-Scale Study of Curiosity-Driven Learning" does);
the paper's lambda = 0.1, which weighs the policy loss against the ICM loss, is left out: the two losses
have disjoint parameters, Adam scales each parameter's step itself and each network's gradient is
clipped to its own norm, so a constant factor on either loss would change nothing. Optionally
(`normalize_intrinsic_reward`, a change from the paper, off on Atari) the intrinsic reward is divided by
the running std of its discounted return, as in RND, so that eta does not depend on the feature scale.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import intrinsic_rewards, policy_gradient, unrolls
from deep_rl_zoo.networks.curiosity import IntrinsicCuriosityModule
from deep_rl_zoo.normalizers import ObservationNormalizer, RewardScaler
from deep_rl_zoo.ppo.agent import PpoOptimisation, sorted_batch
from deep_rl_zoo.schedules import LinearSchedule


class IcmAdvantages(NamedTuple):
    """GAE advantages and value targets of the summed rewards and the intrinsic rewards, [T, B], and the
    no-grad network output over s_0 .. s_T that gave the values (pi_old for the update)."""

    advantage: torch.Tensor
    target: torch.Tensor
    intrinsic_reward: torch.Tensor
    network_output: NamedTuple


class PpoIcm:
    """The PPO-ICM learner: one update (several epochs of minibatch steps) per batch of actor unrolls."""

    agent_name = "PPO-ICM"
    on_policy = True  # the loop gives `learn` only unrolls of the parameters published last

    def __init__(
        self,
        *,
        network: nn.Module,
        icm: IntrinsicCuriosityModule,
        optimizer: torch.optim.Optimizer,
        num_actors: int,
        discount: float,
        gae_lambda: float,
        eta: float,
        beta: float,
        clip_epsilon: float,
        num_epochs: int,
        minibatch_size: int,
        value_coef: float,
        entropy_coef: float,
        max_grad_norm: float,
        learning_rate: LinearSchedule,
        rng: np.random.Generator,
        device: torch.device,
        observation_normalizer: ObservationNormalizer | None = None,
        normalize_intrinsic_reward: bool = False,
        extrinsic_reward_scaler: RewardScaler | None = None,
        envs_per_actor: int = 1,
    ):
        """
        Args:
          network: the actor-critic (`.value`, `.distribution()`), behind `observation_normalizer` if
            there is one; what the actors receive.
          icm: embedding, inverse and forward models; it reads observations through the same normaliser.
          optimizer: over the network's and the ICM's parameters.
          num_actors: actor messages per update, one from each actor (a list of `envs_per_actor`
            unrolls, or one unroll); `envs_per_actor`: envs each actor steps (per-env reward statistics).
          eta: scale of the intrinsic reward (0: plain PPO with an ICM that learns but is not used).
          beta: weight of the forward loss against the inverse loss.
          normalize_intrinsic_reward: divide intrinsic rewards by the running std of their discounted
            return (`intrinsic_rewards.IntrinsicRewardNormalizer`, RND's scaling).
          extrinsic_reward_scaler: divides extrinsic rewards by the running std of their discounted
            return before the intrinsic reward is added, if given (PPO's reward normalisation).
        """
        self._network = network
        self._icm = icm
        self.messages_per_step = num_actors
        self._discount = discount
        self._gae_lambda = gae_lambda
        self._eta = eta
        self._beta = beta
        self._value_coef = value_coef
        self._entropy_coef = entropy_coef
        self._device = device
        self._observation_normalizer = observation_normalizer
        self._intrinsic_normalizer = (
            intrinsic_rewards.IntrinsicRewardNormalizer(num_actors * envs_per_actor, discount)
            if normalize_intrinsic_reward
            else None
        )
        self._extrinsic_reward_scaler = extrinsic_reward_scaler
        self._optimisation = PpoOptimisation(
            optimizer=optimizer,
            parameter_groups=[list(network.parameters()), list(icm.parameters())],  # each clipped alone
            num_epochs=num_epochs,
            minibatch_size=minibatch_size,
            clip_epsilon=clip_epsilon,
            max_grad_norm=max_grad_norm,
            learning_rate=learning_rate,
            rng=rng,
            device=device,
            statistics=(
                "value_loss",
                "inverse_loss",
                "forward_loss",
                "extrinsic_reward_mean",
                "intrinsic_reward_mean",
                "intrinsic_reward_max",
            ),
        )

    @property
    def shared_module(self) -> nn.Module:
        return self._network

    def _icm_input(self, observation: torch.Tensor) -> torch.Tensor:
        if self._observation_normalizer is None:
            return observation
        return self._observation_normalizer(observation)

    def intrinsic_rewards(self, batch: unrolls.UnrollBatch) -> torch.Tensor:
        """r^i_t = eta * L_F(s_t, a_t, s_{t+1}) of every pair, 0 on reset pairs, [T, B] (no gradient)."""
        num_steps, num_unrolls = batch.reward.shape
        with torch.no_grad():
            output = self._icm(
                self._icm_input(batch.observation[:-1].flatten(0, 1)),
                batch.action.flatten(0, 1),
                self._icm_input(batch.observation[1:].flatten(0, 1)),
            )
            icm = intrinsic_rewards.icm_loss(
                output.predicted_phi_tp1, output.phi_tp1, output.inverse_logits, batch.action.flatten(0, 1),
                beta=self._beta, eta=self._eta,
            )  # fmt: skip
        return torch.where(batch.valid, icm.extra.intrinsic_reward.reshape(num_steps, num_unrolls), 0.0)

    def advantages(self, batch: unrolls.UnrollBatch, streams: list[int]) -> IcmAdvantages:
        """GAE of the summed extrinsic and intrinsic rewards of a batch, with the parameters that collected
        it."""
        num_steps, num_unrolls = batch.reward.shape
        r_int = self.intrinsic_rewards(batch)
        if self._intrinsic_normalizer is not None:
            r_int = self._intrinsic_normalizer.normalize(r_int, batch.valid, streams).to(r_int.dtype)
        with torch.no_grad():
            output = self._network(batch.observation.flatten(0, 1))
            values = output.value.reshape(num_steps + 1, num_unrolls)
        summed = batch._replace(reward=batch.reward + r_int)
        advantages, targets = unrolls.advantages_and_returns(summed, values, self._discount, self._gae_lambda)
        return IcmAdvantages(advantages, targets, r_int, output)

    @property
    def should_stop(self) -> Callable[[], bool]:
        """The distributed loop sets it to its stop request: an update ends after its minibatch in progress."""
        return self._optimisation.should_stop

    @should_stop.setter
    def should_stop(self, check: Callable[[], bool]) -> None:
        self._optimisation.should_stop = check

    def learn(self, payloads: list[unrolls.Unroll]) -> None:
        batch = sorted_batch(payloads, self._extrinsic_reward_scaler, self._device)
        advantages, targets, r_int, network_output = self.advantages(
            batch, sorted(u.actor_index for u in payloads)
        )

        valid = batch.valid.flatten()  # drop the pairs from an episode's last state to a reset
        observation = batch.observation[:-1].flatten(0, 1)[valid]
        next_observation = batch.observation[1:].flatten(0, 1)[valid]
        action = batch.action.flatten(0, 1)[valid]
        advantages, targets = advantages.flatten()[valid], targets.flatten()[valid]
        # pi_old from the values' forward: the very parameters the actors sampled from.
        old_log_prob = unrolls.pairs_log_prob(network_output, action, valid)

        def minibatch_loss(index: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            s_t = observation.index_select(0, index)  # copies ~2x faster than observation[index]
            log_prob, entropy, value = unrolls.evaluate_actions(self._network, s_t, action[index])
            terms = self._optimisation.policy_terms(log_prob, old_log_prob[index], advantages[index], entropy)
            critic = policy_gradient.value_loss(value, targets[index])
            output = self._icm(
                self._icm_input(s_t), action[index], self._icm_input(next_observation.index_select(0, index))
            )
            icm = intrinsic_rewards.icm_loss(
                output.predicted_phi_tp1, output.phi_tp1, output.inverse_logits, action[index],
                beta=self._beta, eta=self._eta,
            )  # fmt: skip
            loss = (
                terms.policy_loss
                + self._value_coef * critic.loss.mean()
                + self._entropy_coef * terms.entropy_loss
                + icm.loss.mean()
            )
            return loss, {
                **terms.statistics,
                "value_loss": critic.loss.mean().item(),
                "inverse_loss": icm.extra.inverse_loss.mean().item(),
                "forward_loss": icm.extra.forward_error.mean().item(),
            }

        self._optimisation.update(observation.shape[0], minibatch_loss)
        if self._observation_normalizer is not None:
            # After learning, so the update saw the statistics the actors used for this batch.
            self._observation_normalizer.update(batch.observation[:-1].flatten(0, 1))
        valid_t = batch.valid
        self._optimisation.latest.update(
            {
                "extrinsic_reward_mean": float(batch.reward[valid_t].mean()),
                "intrinsic_reward_mean": float(r_int[valid_t].mean()),
                "intrinsic_reward_max": float(r_int[valid_t].max()),
            }
        )

    @property
    def statistics(self) -> dict[str, float]:
        return self._optimisation.statistics

    def state_dict(self) -> dict:
        state = {
            "network": self._network.state_dict(),
            "icm": self._icm.state_dict(),
            **self._optimisation.state_dict(),
        }
        if self._intrinsic_normalizer is not None:
            state["intrinsic_normalizer"] = self._intrinsic_normalizer.state_dict()
        if self._extrinsic_reward_scaler is not None:
            state["extrinsic_reward_scaler"] = self._extrinsic_reward_scaler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._icm.load_state_dict(state["icm"])
        self._optimisation.load_state_dict(state)
        if self._intrinsic_normalizer is not None:
            self._intrinsic_normalizer.load_state_dict(state["intrinsic_normalizer"])
        if self._extrinsic_reward_scaler is not None:
            self._extrinsic_reward_scaler.load_state_dict(state["extrinsic_reward_scaler"])
