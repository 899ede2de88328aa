"""SAC for discrete actions (Christodoulou 2019, "Soft Actor-Critic for Discrete Action Settings",
https://arxiv.org/abs/1910.07207) on the distributed loop.

Actors sample their copy of the policy and send chunks of T consecutive timesteps (an
`unrolls.Unroll`), then pick up newer policy parameters if any, without waiting. The learner (`Sac`)
turns each chunk into one-step transitions in its replay, which lives as long as the learner (across
iterations), and takes `updates_per_env_step` gradient steps per env step received once the replay
holds `min_replay_size` transitions. Each step updates the twin soft Q-networks, the policy and the
temperature (see `deep_rl_zoo.sac.losses`); every `target_update_period` gradient steps the target
networks move towards the online ones (tau < 1: Polyak averaging; tau = 1: a copy, the paper's Atari setting).
Only the policy is published to the actors.

Atari frames are kept once in a `FrameStackStore`. Chunks of different actors interleave, so each
chunk re-adds the full stack of its first observation (oldest frame marked `first`, which rebuilds that
stack exactly, reset padding included), then the newest frame of every later observation:

    chunk of actor k:  s_0 = [f0 f1 f2 f3]   s_1 = [f1 f2 f3 f4]   s_2 = [f2 f3 f4 f5] ...
    frames added:       f0* f1 f2 f3 (h_0)    f4 (h_1)              f5 (h_2)          (* first=True)

The replay then stores transitions (h_t, a_t, r_{t+1}, discount, h_{t+1}) of handles.
"""

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import unrolls
from deep_rl_zoo.networks.common import LiveUnits
from deep_rl_zoo.optimization import gradient_step
from deep_rl_zoo.sac import losses


class SacNetworks(nn.Module):
    """The learner's modules in one place (for `.to(device)` and the checkpoint)."""

    def __init__(
        self, policy: nn.Module, q1: nn.Module, q2: nn.Module, target_q1: nn.Module, target_q2: nn.Module
    ):
        super().__init__()
        self.policy, self.q1, self.q2 = policy, q1, q2
        self.target_q1 = target_q1.requires_grad_(False)
        self.target_q2 = target_q2.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.zeros(()))


class Sac:
    """The SAC learner: stores every chunk's transitions, then takes its share of gradient steps."""

    agent_name = "SAC"
    on_policy = False  # off-policy: learns from chunks of any parameters, through its replay

    def __init__(
        self,
        *,
        networks: SacNetworks,
        q_optimizer: torch.optim.Optimizer,
        policy_optimizer: torch.optim.Optimizer,
        alpha_optimizer: torch.optim.Optimizer,
        replay: replay_lib.UniformReplay,
        frame_store: replay_lib.FrameStackStore | None,
        batch_size: int,
        min_replay_size: int,
        updates_per_env_step: float,
        discount: float,
        target_entropy: float,
        target_update_rate: float,
        max_grad_norm: float,
        device: torch.device,
        target_update_period: int = 1,
    ):
        """
        Args:
          networks: policy, twin Q-networks, their targets and log alpha.
          replay: transitions of arrays (vectors) or of frame handles into `frame_store` (Atari).
          frame_store: keeps each Atari frame once; None for vector observations.
          batch_size: transitions per gradient step.
          min_replay_size: transitions stored before the first gradient step.
          updates_per_env_step: gradient steps per env step received (fractions carry over).
          discount: gamma.
          target_entropy: H_target of the temperature loss.
          target_update_rate: tau of target <- tau * online + (1 - tau) * target.
          target_update_period: gradient steps between two such target updates (1: after every step;
            with tau = 1, a copy every that many steps).
          max_grad_norm: clip each network's gradient norm to this; 0 disables.
        """
        self._networks = networks
        self._q_optimizer = q_optimizer
        self._policy_optimizer = policy_optimizer
        # What the policy's loss trains: all of `networks.policy`, or only its head when its torso is a
        # critic's (then the torso's gradients are the critic's, which the policy's clip must not see).
        self._policy_parameters = [p for group in policy_optimizer.param_groups for p in group["params"]]
        self._alpha_optimizer = alpha_optimizer
        self._replay = replay
        self._frame_store = frame_store
        self._batch_size = batch_size
        self._min_replay_size = min_replay_size
        self._updates_per_env_step = updates_per_env_step
        self._discount = discount
        self._target_entropy = target_entropy
        self._tau = target_update_rate
        self._target_update_period = target_update_period
        self._max_grad_norm = max_grad_norm
        self._device = device
        self.messages_per_step = 1
        self._env_steps = 0  # env steps received
        self._learner_steps = 0  # gradient steps
        self._update_credit = 0.0  # gradient steps owed, carried over between chunks
        # Set by the distributed loop to its stop request: steps still owed stay in the saved credit.
        self.should_stop: Callable[[], bool] = lambda: False
        # The policy's live ReLU units in the latest batch it (or, when its torso is the first critic's,
        # that critic) learned from: a policy whose layer has died acts the same on every observation
        # (docs/agents/sac.md). Only for ReLU networks (Atari's).
        self._policy_units = LiveUnits(networks.policy)
        # NaN until the first update, so that every row of results.csv has the same columns.
        self._statistics = dict.fromkeys(
            (
                "critic_loss",
                "policy_loss",
                "critic_grad_norm",
                "policy_grad_norm",
                "entropy",
                "alpha",
                "mean_q",
            ),
            float("nan"),
        )

    @property
    def shared_module(self) -> nn.Module:
        return self._networks.policy

    def learn(self, payloads: list[unrolls.Unroll]) -> None:
        for chunk in payloads:
            self._store(chunk)
            self._env_steps += len(chunk.reward)
            if self._replay.size >= self._min_replay_size:
                self._update_credit += len(chunk.reward) * self._updates_per_env_step
        while self._update_credit >= 1.0 and not self.should_stop():
            self._update_credit -= 1.0
            self._gradient_step()

    def _store(self, chunk: unrolls.Unroll) -> None:
        if self._frame_store is None:
            states = list(chunk.observation)
        else:
            store, first_stack = self._frame_store, chunk.observation[0]
            # Short lives put more first frames in the store than its size allows for: it grows rather
            # than lose a frame that a transition in the replay still needs. The replay does not change
            # while the chunk's frames go in, so checking the chunk's newest frame covers them all.
            newest = store.num_added + len(first_stack) + len(chunk.observation) - 2
            replay_lib.keep_frames_of_oldest_transition(store, self._replay, newest)
            for index, frame in enumerate(first_stack):
                handle = store.add(frame, first=index == 0)
            states = [handle]
            for t in range(1, len(chunk.observation)):
                # s_t starts an episode when s_{t-1} ended one (pair t - 1 is no transition).
                states.append(store.add(chunk.observation[t][-1], first=not chunk.valid[t - 1]))
        for t in np.flatnonzero(chunk.valid):
            discount = 0.0 if chunk.terminated[t] else self._discount  # a truncation still bootstraps
            self._replay.add(
                replay_lib.Transition(
                    s_tm1=states[t],
                    a_tm1=np.int64(chunk.action[t]),
                    r_t=np.float32(chunk.reward[t]),
                    discount_t=np.float32(discount),
                    s_t=states[t + 1],
                )
            )

    def _sample(self) -> replay_lib.Transition:
        batch = self._replay.sample(self._batch_size)
        s_tm1, s_t = batch.s_tm1, batch.s_t
        if self._frame_store is not None:
            s_tm1, s_t = self._frame_store.stacks(s_tm1), self._frame_store.stacks(s_t)

        def tensor(x):
            return torch.as_tensor(x, device=self._device)

        return replay_lib.Transition(
            tensor(s_tm1), tensor(batch.a_tm1), tensor(batch.r_t), tensor(batch.discount_t), tensor(s_t)
        )

    def _gradient_step(self) -> None:
        networks = self._networks
        s_tm1, a_tm1, r_t, discount_t, s_t = self._sample()
        alpha = networks.log_alpha.exp().item()

        with torch.no_grad():
            log_pi_t = torch.log_softmax(networks.policy(s_t).pi_logits, dim=-1)
            target_q1_t = networks.target_q1(s_t).q_values
            target_q2_t = networks.target_q2(s_t).q_values
        q1_tm1, q2_tm1 = networks.q1(s_tm1).q_values, networks.q2(s_tm1).q_values
        critic = losses.soft_q_learning(
            q1_tm1, q2_tm1, a_tm1, r_t, discount_t, target_q1_t, target_q2_t, log_pi_t, alpha
        )
        step_number = self._learner_steps + 1
        critic_value, critic_grad_norm = gradient_step(
            critic.loss.mean(),
            self._q_optimizer,
            [*networks.q1.parameters(), *networks.q2.parameters()],
            self._max_grad_norm,
            step_number,
        )

        log_pi_tm1 = torch.log_softmax(networks.policy(s_tm1).pi_logits, dim=-1)
        policy = losses.soft_policy_loss(log_pi_tm1, q1_tm1.detach(), q2_tm1.detach(), alpha)
        policy_value, policy_grad_norm = gradient_step(
            policy.loss.mean(),
            self._policy_optimizer,
            self._policy_parameters,
            self._max_grad_norm,
            step_number,
        )

        temperature = losses.temperature_loss(networks.log_alpha, policy.extra.entropy, self._target_entropy)
        # The temperature's single gradient is not clipped.
        gradient_step(temperature.loss.mean(), self._alpha_optimizer, [networks.log_alpha], 0.0, step_number)

        if step_number % self._target_update_period == 0:
            with torch.no_grad():
                for online, target in ((networks.q1, networks.target_q1), (networks.q2, networks.target_q2)):
                    for p, p_target in zip(online.parameters(), target.parameters(), strict=True):
                        p_target.lerp_(p, self._tau)  # exact copy at tau = 1 (lerp computes end - 0 * diff)

        self._learner_steps += 1
        self._statistics = {
            "critic_loss": critic_value,
            "policy_loss": policy_value,
            "critic_grad_norm": critic_grad_norm,
            "policy_grad_norm": policy_grad_norm,
            "entropy": policy.extra.entropy.mean().item(),
            "alpha": alpha,
            "mean_q": critic.extra.target.mean().item(),
        }

    @property
    def statistics(self) -> dict[str, float]:
        return {
            "learner_steps": self._learner_steps,
            "env_steps_received": self._env_steps,
            "replay_size": self._replay.size,
            **self._statistics,
            **({"policy_live_units": self._policy_units.smallest()} if self._policy_units.num_layers else {}),
        }

    @property
    def replay_contents(self) -> replay_lib.ReplayContents:
        """The replay and frame store, which `--checkpoint_replay` saves beside the checkpoint."""
        return replay_lib.ReplayContents(self._replay, self._frame_store)

    def state_dict(self) -> dict:
        """Everything but the replay's contents (as for DQN; `replay_contents` has them, which
        `--checkpoint_replay` saves): without them a resumed run refills the replay first."""
        return {
            "networks": self._networks.state_dict(),
            "q_optimizer": self._q_optimizer.state_dict(),
            "policy_optimizer": self._policy_optimizer.state_dict(),
            "alpha_optimizer": self._alpha_optimizer.state_dict(),
            "env_steps": self._env_steps,
            "learner_steps": self._learner_steps,
            "update_credit": self._update_credit,
            "replay_rng": self._replay.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        self._networks.load_state_dict(state["networks"])
        self._q_optimizer.load_state_dict(state["q_optimizer"])
        self._policy_optimizer.load_state_dict(state["policy_optimizer"])
        self._alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        self._update_credit = state["update_credit"]
        self._replay.rng.bit_generator.state = state["replay_rng"]
