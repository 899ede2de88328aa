"""PPO (Schulman et al. 2017, "Proximal Policy Optimization Algorithms", https://arxiv.org/abs/1707.06347).

Actors (`unrolls.UnrollActor`, one process each) sample the policy for T env steps, send the unroll
and wait for new parameters. The learner (`Ppo`) takes one unroll from every actor (N * T steps),
computes GAE advantages and lambda-return targets with the parameters that collected the data, then
runs K epochs over shuffled minibatches of the clipped surrogate, value and entropy terms, and
publishes the new parameters. Advantages are normalised per minibatch; a time-limit truncation
bootstraps from the value of the cut-off state. The optimisation itself (`PpoOptimisation`) and the
batching (`sorted_batch`) are shared with PPO-RND and PPO-ICM, which differ in advantages and losses.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import policy_gradient, unrolls
from deep_rl_zoo.normalizers import ObservationNormalizer, RewardScaler
from deep_rl_zoo.optimization import gradient_step
from deep_rl_zoo.schedules import LinearSchedule


class PpoOptimisation:
    """PPO's optimisation of one batch, which PPO, PPO-RND and PPO-ICM share (each learner holds one).

    It owns what is the same in the three: `num_epochs` passes over the batch's transitions in freshly
    shuffled minibatches, each minibatch one `optimization.gradient_step` of the loss the agent builds
    for it; the clipped surrogate and entropy terms of that loss, with advantages normalised per
    minibatch; the learning-rate schedule; the update counters; the learner statistics; and their part
    of a checkpoint. The learner keeps what differs: its advantages, value losses and curiosity losses.
    """

    STATISTICS = (
        "loss",
        "grad_norm",
        "policy_loss",
        "entropy",
        "approx_kl",
        "clip_fraction",
        "learning_rate",
    )

    def __init__(
        self,
        *,
        optimizer: torch.optim.Optimizer,
        parameter_groups: list[list[nn.Parameter]],
        num_epochs: int,
        minibatch_size: int,
        clip_epsilon: float,
        max_grad_norm: float,
        learning_rate: LinearSchedule,
        rng: np.random.Generator,
        device: torch.device,
        statistics: tuple[str, ...] = (),
    ):
        """
        Args:
          optimizer: over every parameter the agent's loss trains.
          parameter_groups: one list of parameters per network, each network's gradient clipped to
            `max_grad_norm` on its own (0: no clipping).
          num_epochs: passes over the batch per update.
          minibatch_size: transitions per gradient step.
          clip_epsilon: PPO's clipping range of the probability ratio.
          learning_rate: Adam's learning rate as a function of env steps learned from.
          rng: shuffles the minibatches (the agent may draw from it too).
          statistics: the agent's own statistics besides `STATISTICS`; all are NaN until the first
            update, so that every row of results.csv has the same columns.
        """
        self._optimizer = optimizer
        self._parameter_groups = parameter_groups
        # The distributed loop's stop request (Ctrl-C, SIGTERM), through the learner's `should_stop`: an
        # update ends after the minibatch in progress (an Atari update on a CPU takes tens of seconds).
        self.should_stop: Callable[[], bool] = lambda: False
        self._num_epochs = num_epochs
        self._minibatch_size = minibatch_size
        self._clip_epsilon = clip_epsilon
        self._max_grad_norm = max_grad_norm
        self._learning_rate = learning_rate
        self.rng = rng
        self._device = device
        self.env_steps = 0  # transitions learned from (the learning-rate schedule's clock)
        self.learner_steps = 0  # updates
        self.latest = dict.fromkeys((*self.STATISTICS, *statistics), float("nan"))

    def policy_terms(
        self,
        log_prob: torch.Tensor,
        old_log_prob: torch.Tensor,
        advantage: torch.Tensor,
        entropy: torch.Tensor,
    ) -> "PolicyTerms":
        """The clipped surrogate loss (advantages normalised over this minibatch) and the entropy loss, each
        averaged over the minibatch, from pi(a|s) now (`log_prob`), pi_old(a|s) of the parameters that
        collected the batch (`old_log_prob`) and the entropy of pi(.|s), all [N]."""
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        policy = policy_gradient.clipped_surrogate_pg_loss(
            log_prob, old_log_prob, advantage, self._clip_epsilon
        )
        entropy_term = policy_gradient.entropy_loss(entropy)
        statistics = {
            "policy_loss": policy.loss.mean().item(),
            "entropy": entropy_term.extra.entropy.mean().item(),
            "approx_kl": policy.extra.approx_kl.mean().item(),
            "clip_fraction": policy.extra.clipped.float().mean().item(),
        }
        return PolicyTerms(policy.loss.mean(), entropy_term.loss.mean(), statistics)

    def update(
        self,
        num_transitions: int,
        minibatch_loss: Callable[[torch.Tensor], tuple[torch.Tensor, dict[str, float]]],
    ) -> None:
        """One update: the epochs of minibatch gradient steps over `num_transitions` transitions.

        `minibatch_loss(index)` builds the scalar loss of the transitions `index` [N] (and the statistics
        to average over the update); every minibatch of an epoch is a fresh shuffle's slice, the last one
        shorter if the batch does not divide (skipped below 2 transitions: no normalised advantage).
        """
        for group in self._optimizer.param_groups:
            group["lr"] = self._learning_rate(self.env_steps)
        sums: dict[str, float] = {}
        num_minibatches = 0
        for _ in range(self._num_epochs):
            if self.should_stop():
                break
            order = torch.as_tensor(self.rng.permutation(num_transitions), device=self._device)
            for start in range(0, num_transitions, self._minibatch_size):
                index = order[start : start + self._minibatch_size]
                if index.numel() < 2:
                    continue  # a normalised advantage needs two samples
                if self.should_stop():
                    break  # the rest of the update is dropped with the batch: the run saves and stops
                loss, statistics = minibatch_loss(index)
                loss_value, grad_norm = gradient_step(
                    loss, self._optimizer, self._parameter_groups, self._max_grad_norm, self.learner_steps + 1
                )
                for key, value in {"loss": loss_value, "grad_norm": grad_norm, **statistics}.items():
                    sums[key] = sums.get(key, 0.0) + value
                num_minibatches += 1
        self.env_steps += num_transitions
        self.learner_steps += 1
        self.latest.update({key: value / max(num_minibatches, 1) for key, value in sums.items()})
        self.latest["learning_rate"] = self._optimizer.param_groups[0]["lr"]

    @property
    def statistics(self) -> dict[str, float]:
        return {"learner_steps": self.learner_steps, "env_steps_learned": self.env_steps, **self.latest}

    def state_dict(self) -> dict:
        return {
            "optimizer": self._optimizer.state_dict(),
            "env_steps": self.env_steps,
            "learner_steps": self.learner_steps,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        self._optimizer.load_state_dict(state["optimizer"])
        self.env_steps = state["env_steps"]
        self.learner_steps = state["learner_steps"]
        self.rng.bit_generator.state = state["rng"]


class PolicyTerms(NamedTuple):
    """`PpoOptimisation.policy_terms`: two scalar losses and their statistics."""

    policy_loss: torch.Tensor  # the clipped surrogate, averaged over the minibatch
    entropy_loss: torch.Tensor  # minus the mean entropy (`policy_gradient.entropy_loss`)
    statistics: dict[str, float]


def sorted_batch(
    payloads: list[unrolls.Unroll], reward_scaler: RewardScaler | None, device: torch.device
) -> unrolls.UnrollBatch:
    """The actors' unrolls stacked in actor order (arrival order varies; results must not), with their
    rewards divided by the running std of the discounted return if `reward_scaler` is given."""
    payloads = sorted(payloads, key=lambda u: u.actor_index)
    rewards = [u.reward for u in payloads]
    if reward_scaler is not None:
        rewards = [reward_scaler.scale(u.actor_index, u.reward, u.terminated | u.truncated) for u in payloads]
    return unrolls.stack_unrolls(payloads, rewards, device)


class Ppo:
    """The PPO learner: one update (several epochs of minibatch steps) per batch of actor unrolls."""

    agent_name = "PPO"
    on_policy = True  # the loop gives `learn` only unrolls of the parameters published last

    def __init__(
        self,
        *,
        network: nn.Module,
        optimizer: torch.optim.Optimizer,
        num_actors: int,
        discount: float,
        gae_lambda: float,
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
        reward_scaler: RewardScaler | None = None,
        value_clip_epsilon: float = 0.0,
    ):
        """
        Args:
          network: returns an output with `.value` [B] and `.distribution()` (categorical or Gaussian);
            observations go through `observation_normalizer` inside it, if there is one.
          num_actors: unrolls per update, one from each actor.
          clip_epsilon: PPO's clipping range of the probability ratio.
          num_epochs: passes over the batch per update.
          minibatch_size: transitions per gradient step.
          learning_rate: Adam's learning rate as a function of env steps learned from (linear decay).
          observation_normalizer: the normaliser inside `network`, whose statistics the learner updates
            from the observations of each batch after learning from it.
          reward_scaler: divides rewards by the running std of the discounted return, if given.
          value_clip_epsilon: > 0 uses the clipped value loss of PPO's reference implementation.
        """
        self._network = network
        self.messages_per_step = num_actors
        self._discount = discount
        self._gae_lambda = gae_lambda
        self._value_coef = value_coef
        self._entropy_coef = entropy_coef
        self._device = device
        self._observation_normalizer = observation_normalizer
        self._reward_scaler = reward_scaler
        self._value_clip_epsilon = value_clip_epsilon
        self._optimisation = PpoOptimisation(
            optimizer=optimizer,
            parameter_groups=[list(network.parameters())],
            num_epochs=num_epochs,
            minibatch_size=minibatch_size,
            clip_epsilon=clip_epsilon,
            max_grad_norm=max_grad_norm,
            learning_rate=learning_rate,
            rng=rng,
            device=device,
            statistics=("value_loss", "explained_variance"),
        )

    @property
    def shared_module(self) -> nn.Module:
        return self._network

    @property
    def should_stop(self) -> Callable[[], bool]:
        """The distributed loop sets it to its stop request: an update ends after its minibatch in progress."""
        return self._optimisation.should_stop

    @should_stop.setter
    def should_stop(self, check: Callable[[], bool]) -> None:
        self._optimisation.should_stop = check

    def learn(self, payloads: list[unrolls.Unroll]) -> None:
        batch = sorted_batch(payloads, self._reward_scaler, self._device)
        num_steps, num_unrolls = batch.reward.shape
        valid = batch.valid.flatten()  # drop the pairs from an episode's last state to a reset
        observation = batch.observation[:-1].flatten(0, 1)[valid]
        action = batch.action.flatten(0, 1)[valid]
        # One no-grad forward over s_0 .. s_T gives both the critic's targets and pi_old, with the very
        # parameters the actors sampled from.
        with torch.no_grad():
            output = self._network(batch.observation.flatten(0, 1))
            values = output.value.reshape(num_steps + 1, num_unrolls)
            old_log_prob = unrolls.pairs_log_prob(output, action, valid)
        advantages, targets = unrolls.advantages_and_returns(batch, values, self._discount, self._gae_lambda)
        old_value = values[:-1].flatten()[valid]
        advantages, targets = advantages.flatten()[valid], targets.flatten()[valid]

        def minibatch_loss(index: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            # index_select copies the minibatch's frames about 2x faster than observation[index] here.
            log_prob, entropy, value = unrolls.evaluate_actions(
                self._network, observation.index_select(0, index), action[index]
            )
            terms = self._optimisation.policy_terms(log_prob, old_log_prob[index], advantages[index], entropy)
            if self._value_clip_epsilon > 0:
                critic = policy_gradient.clipped_value_loss(
                    value, old_value[index], targets[index], self._value_clip_epsilon
                )
            else:
                critic = policy_gradient.value_loss(value, targets[index])
            loss = (
                terms.policy_loss
                + self._value_coef * critic.loss.mean()
                + self._entropy_coef * terms.entropy_loss
            )
            return loss, {**terms.statistics, "value_loss": critic.loss.mean().item()}

        self._optimisation.update(observation.shape[0], minibatch_loss)
        if self._observation_normalizer is not None:
            # After learning, so the update saw the statistics the actors used for this batch.
            self._observation_normalizer.update(batch.observation[:-1].flatten(0, 1))
        self._optimisation.latest["explained_variance"] = _explained_variance(old_value, targets)

    @property
    def statistics(self) -> dict[str, float]:
        return self._optimisation.statistics

    def state_dict(self) -> dict:
        state = {"network": self._network.state_dict(), **self._optimisation.state_dict()}
        if self._reward_scaler is not None:
            state["reward_scaler"] = self._reward_scaler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._optimisation.load_state_dict(state)
        if self._reward_scaler is not None:
            self._reward_scaler.load_state_dict(state["reward_scaler"])


def _explained_variance(prediction: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - prediction] / Var[target]: 1 is a perfect critic, <= 0 no better than a constant."""
    variance = target.var()
    return float("nan") if variance == 0 else float(1 - (target - prediction).var() / variance)
