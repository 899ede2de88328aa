"""PPO with Random Network Distillation (Burda, Edwards, Storkey & Klimov 2018, "Exploration by Random
Network Distillation", https://arxiv.org/abs/1810.12894).

Actors are PPO's (`unrolls.UnrollActor`, one process each, sampling the policy for T env steps and
waiting for new parameters). The learner (`PpoRnd`), per batch of one unroll from every actor:

1. intrinsic rewards: the RND predictor's error on each next observation s_{t+1} (normalised by running
   statistics and clipped to [-5, 5]), divided by the running std of the non-episodic discounted
   intrinsic return (`intrinsic_rewards.IntrinsicRewardNormalizer`);
2. advantages: an episodic extrinsic GAE and a non-episodic intrinsic GAE against two value heads,
   mixed as 2 * A_E + 1 * A_I (`intrinsic_rewards.two_stream_advantages`);
3. K epochs over shuffled minibatches of the clipped surrogate + both value losses + entropy, plus the
   predictor's loss on a random `predictor_proportion` of each minibatch (one Adam for both);
4. updates the observation statistics (the RND input's and, if configured, the policy's) with the batch.

Paper choices kept: fixed random target, deeper predictor, per-feature observation normalisation with
clipping to [-5, 5], statistics initialised by stepping a random policy before any update (here: the
initial, near-uniform policy for `observation_warmup_steps` env steps, counted in the budget), intrinsic
reward scaled by the std of the intrinsic return and not re-centred, non-episodic intrinsic and episodic
extrinsic returns, two value heads with the sum of both squared errors, coefficients 2 and 1, 25% of each
batch for the predictor, entropy bonus 0.001, lambda 0.95, gamma_I 0.99, and on Atari (run_atari) clip
0.1, gamma_E 0.999, Adam 1e-4, clipped extrinsic rewards (the classic defaults differ where MountainCar
needed it; `train.PpoRndConfig` says where and why). Changed: the predictor trains within each PPO minibatch rather than on its own shuffled batches (same
data, same number of passes); the intrinsic stream runs through a game over with discount 1 and reward 0
on the reset pair (the paper's vectorised envs skip the terminal observation instead; ours keeps it as
the last state of the episode, which `unrolls` does for every agent).
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import intrinsic_rewards, policy_gradient, unrolls
from deep_rl_zoo.networks.curiosity import RandomNetworkDistillation
from deep_rl_zoo.normalizers import ObservationNormalizer, RewardScaler
from deep_rl_zoo.ppo.agent import PpoOptimisation, sorted_batch
from deep_rl_zoo.schedules import LinearSchedule


class RndAdvantages(NamedTuple):
    """`intrinsic_rewards.TwoStreamAdvantages` and the scaled intrinsic rewards they came from, [T, B], and
    the no-grad network output over s_0 .. s_T that gave their values (pi_old for the update)."""

    advantage: torch.Tensor
    extrinsic_target: torch.Tensor
    intrinsic_target: torch.Tensor
    extrinsic_advantage: torch.Tensor
    intrinsic_advantage: torch.Tensor
    intrinsic_reward: torch.Tensor
    network_output: NamedTuple


class PpoRnd:
    """The PPO-RND learner: one update (several epochs of minibatch steps) per batch of actor unrolls."""

    agent_name = "PPO-RND"
    on_policy = True  # the loop gives `learn` only unrolls of the parameters published last

    def __init__(
        self,
        *,
        network: nn.Module,
        rnd: RandomNetworkDistillation,
        optimizer: torch.optim.Optimizer,
        num_actors: int,
        extrinsic_discount: float,
        intrinsic_discount: float,
        gae_lambda: float,
        extrinsic_coef: float,
        intrinsic_coef: float,
        clip_epsilon: float,
        num_epochs: int,
        minibatch_size: int,
        value_coef: float,
        entropy_coef: float,
        max_grad_norm: float,
        learning_rate: LinearSchedule,
        predictor_proportion: float,
        observation_warmup_steps: int,
        rng: np.random.Generator,
        device: torch.device,
        observation_normalizer: ObservationNormalizer | None = None,
        extrinsic_reward_scaler: RewardScaler | None = None,
        envs_per_actor: int = 1,
    ):
        """
        Args:
          network: the policy with two value heads (`networks.curiosity.TwoValueOutput`), behind the
            policy's observation normaliser if there is one; what the actors receive.
          rnd: target, predictor and their input normaliser.
          optimizer: over the network's and the predictor's parameters.
          num_actors: actor messages per update, one from each actor (a list of `envs_per_actor`
            unrolls, or one unroll).
          envs_per_actor: envs each actor steps; the intrinsic reward's return is kept per env.
          extrinsic_coef, intrinsic_coef: weights of the two advantages.
          predictor_proportion: fraction of each minibatch the predictor trains on, in (0, 1].
          observation_warmup_steps: env steps (of the initial policy) that only feed the observation
            statistics before the first update.
          learning_rate: Adam's learning rate as a function of env steps learned from.
          observation_normalizer: the normaliser inside `network`, updated from each batch after learning.
          extrinsic_reward_scaler: divides extrinsic rewards by the running std of their (episodic)
            discounted return, if given (not in the paper, whose Atari rewards are clipped instead).
        """
        self._network = network
        self._rnd = rnd
        self.messages_per_step = num_actors
        self._extrinsic_discount = extrinsic_discount
        self._intrinsic_discount = intrinsic_discount
        self._gae_lambda = gae_lambda
        self._extrinsic_coef = extrinsic_coef
        self._intrinsic_coef = intrinsic_coef
        self._value_coef = value_coef
        self._entropy_coef = entropy_coef
        self._predictor_proportion = predictor_proportion
        self._observation_warmup_steps = observation_warmup_steps
        self._rng = rng
        self._device = device
        self._observation_normalizer = observation_normalizer
        self._extrinsic_reward_scaler = extrinsic_reward_scaler
        self._intrinsic_normalizer = intrinsic_rewards.IntrinsicRewardNormalizer(
            num_actors * envs_per_actor, intrinsic_discount
        )
        self._last_raw_intrinsic_mean = 0.0  # of the latest batch, before scaling (for the statistics)
        # Its env-step clock (the schedule's) counts every transition received, the warm-up's included.
        self._optimisation = PpoOptimisation(
            optimizer=optimizer,
            # Each network's gradient norm clipped on its own: the predictor's gradients are far larger.
            parameter_groups=[list(network.parameters()), rnd.trainable_parameters()],
            num_epochs=num_epochs,
            minibatch_size=minibatch_size,
            clip_epsilon=clip_epsilon,
            max_grad_norm=max_grad_norm,
            learning_rate=learning_rate,
            rng=rng,
            device=device,
            statistics=(
                "observation_warmup",
                "extrinsic_value_loss",
                "intrinsic_value_loss",
                "predictor_loss",
                "extrinsic_reward_mean",
                "intrinsic_reward_raw_mean",
                "intrinsic_reward_mean",
                "intrinsic_reward_max",
                "intrinsic_return_std",
                "extrinsic_advantage_std",
                "intrinsic_advantage_std",
            ),
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
        batch = sorted_batch(payloads, self._extrinsic_reward_scaler, self._device)
        if self._optimisation.env_steps < self._observation_warmup_steps:
            self._update_observation_statistics(batch)
            self._optimisation.env_steps += int(batch.valid.sum())
            self._optimisation.latest["observation_warmup"] = 1.0
            return

        advantages = self.advantages(batch, sorted(u.actor_index for u in payloads))
        valid = batch.valid.flatten()  # drop the pairs from an episode's last state to a reset
        observation = batch.observation[:-1].flatten(0, 1)[valid]
        next_observation = batch.observation[1:].flatten(0, 1)[valid]
        action = batch.action.flatten(0, 1)[valid]
        advantage = advantages.advantage.flatten()[valid]
        extrinsic_target = advantages.extrinsic_target.flatten()[valid]
        intrinsic_target = advantages.intrinsic_target.flatten()[valid]
        # pi_old from the values' forward: the very parameters the actors sampled from.
        old_log_prob = unrolls.pairs_log_prob(advantages.network_output, action, valid)

        def minibatch_loss(index: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            output = self._network(observation.index_select(0, index))  # copies ~2x faster than [index]
            distribution = output.distribution()
            terms = self._optimisation.policy_terms(
                distribution.log_prob(action[index]), old_log_prob[index], advantage[index],
                distribution.entropy(),
            )  # fmt: skip
            extrinsic_value = policy_gradient.value_loss(output.extrinsic_value, extrinsic_target[index])
            intrinsic_value = policy_gradient.value_loss(output.intrinsic_value, intrinsic_target[index])
            predictor_loss = self._predictor_loss(next_observation, index)
            loss = (
                terms.policy_loss
                + self._value_coef * (extrinsic_value.loss.mean() + intrinsic_value.loss.mean())
                + self._entropy_coef * terms.entropy_loss
                + predictor_loss
            )
            return loss, {
                **terms.statistics,
                "extrinsic_value_loss": extrinsic_value.loss.mean().item(),
                "intrinsic_value_loss": intrinsic_value.loss.mean().item(),
                "predictor_loss": predictor_loss.item(),
            }

        self._optimisation.update(observation.shape[0], minibatch_loss)
        self._update_observation_statistics(batch)  # after learning: the update saw the actors' statistics
        valid_t = batch.valid
        self._optimisation.latest.update(
            {
                "observation_warmup": 0.0,
                "extrinsic_reward_mean": float(batch.reward[valid_t].mean()),
                "intrinsic_reward_raw_mean": self._last_raw_intrinsic_mean,
                "intrinsic_reward_mean": float(advantages.intrinsic_reward[valid_t].mean()),
                "intrinsic_reward_max": float(advantages.intrinsic_reward[valid_t].max()),
                "intrinsic_return_std": self._intrinsic_normalizer.return_std,
                "extrinsic_advantage_std": float(advantages.extrinsic_advantage[valid_t].std()),
                "intrinsic_advantage_std": float(advantages.intrinsic_advantage[valid_t].std()),
            }
        )

    def _predictor_loss(self, next_observation: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The predictor's mean error on a random `predictor_proportion` of the minibatch `index` only (the
        paper's way of keeping its effective batch size fixed as actors are added). Only the chosen frames
        are copied and go through the target and the predictor: the others would add nothing to the loss
        or its gradient (with the default 0.25 they were three quarters of RND's work in each minibatch)."""
        keep = torch.as_tensor(
            self._rng.random(index.shape[0]) < self._predictor_proportion, device=self._device
        )
        if not keep.any():
            return torch.zeros((), device=self._device)
        prediction, target = self._rnd(next_observation.index_select(0, index[keep]))
        return intrinsic_rewards.rnd_prediction_error(prediction, target).mean()

    def advantages(self, batch: unrolls.UnrollBatch, streams: list[int]) -> RndAdvantages:
        """Intrinsic rewards of the batch (updating the intrinsic return statistics) and the combined
        advantages and both value targets, with the parameters that collected the batch, [T, B] each."""
        num_steps, num_unrolls = batch.reward.shape
        with torch.no_grad():
            prediction, target = self._rnd(batch.observation[1:].flatten(0, 1))
            error = intrinsic_rewards.rnd_prediction_error(prediction, target).reshape(num_steps, num_unrolls)
            raw = torch.where(batch.valid, error, 0.0)
            self._last_raw_intrinsic_mean = float(raw[batch.valid].mean()) if batch.valid.any() else 0.0
            r_int = self._intrinsic_normalizer.normalize(raw, batch.valid, streams).to(raw.dtype)
            output = self._network(batch.observation.flatten(0, 1))
            v_ext = output.extrinsic_value.reshape(num_steps + 1, num_unrolls)
            v_int = output.intrinsic_value.reshape(num_steps + 1, num_unrolls)
        two = intrinsic_rewards.two_stream_advantages(
            batch.reward, r_int, batch.terminated, batch.truncated, batch.valid, v_ext, v_int,
            extrinsic_discount=self._extrinsic_discount, intrinsic_discount=self._intrinsic_discount,
            lambda_=self._gae_lambda, extrinsic_coef=self._extrinsic_coef,
            intrinsic_coef=self._intrinsic_coef,
        )  # fmt: skip
        return RndAdvantages(*two, intrinsic_reward=r_int, network_output=output)

    def _update_observation_statistics(self, batch: unrolls.UnrollBatch) -> None:
        self._rnd.update_statistics(batch.observation[1:].flatten(0, 1))
        if self._observation_normalizer is not None:
            self._observation_normalizer.update(batch.observation[:-1].flatten(0, 1))

    @property
    def statistics(self) -> dict[str, float]:
        return self._optimisation.statistics

    def state_dict(self) -> dict:
        state = {
            "network": self._network.state_dict(),
            "rnd": self._rnd.state_dict(),  # target, predictor and their input statistics
            "intrinsic_normalizer": self._intrinsic_normalizer.state_dict(),
            **self._optimisation.state_dict(),
        }
        if self._extrinsic_reward_scaler is not None:
            state["extrinsic_reward_scaler"] = self._extrinsic_reward_scaler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._rnd.load_state_dict(state["rnd"])
        self._intrinsic_normalizer.load_state_dict(state["intrinsic_normalizer"])
        self._optimisation.load_state_dict(state)
        if self._extrinsic_reward_scaler is not None:
            self._extrinsic_reward_scaler.load_state_dict(state["extrinsic_reward_scaler"])
