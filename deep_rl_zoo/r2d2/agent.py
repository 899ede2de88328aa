"""R2D2 (Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed Reinforcement Learning",
https://openreview.net/forum?id=r1lyTjAqYX): many epsilon-greedy actors with an LSTM Q-network, each
with its own fixed epsilon (Ape-X's schedule), send their experience to one learner that replays
sequences by priority.

Actor i (`R2d2Actor`) carries its LSTM state through its episodes and sends every P env steps (the
replay period) a `SequenceBlock`: the P steps and the LSTM state it had before the first step of the
sequence the block completes, its last T steps. The learner (`R2d2`) stores the steps once in a
`PrioritizedSequenceReplay` (adjacent sequences of an actor overlap by T - P steps) and takes its share
of gradient steps per env step received. Each gradient step, for a batch of sequences of
T = b + L + 1 steps (the paper's Atari layout: b = 40, L = 80, P = 40, so each transition is learned in
two sequences):

    sequence   | o_0 ... o_{b-1} | o_b  o_{b+1} ... o_{T-1} |
                 burn-in            L = T - 1 - b transitions o_k -> o_{k+1}, k = b .. T-2
    online:    stored state -(burn-in, no grad)-> state_b -(with grad)-> h(Q)(o_b .. o_{T-1})
    target:    stored state -(burn-in)----------> state'_b ------------> h(Q')(o_b .. o_{T-1})

(the state is zeroed before any o_k that starts an episode, inside the burn-in or after it)

- n-step double-Q targets in the rescaled space (`multistep.transformed_n_step_returns`):
  y_k = h(sum of n rewards + gamma^n h^{-1}(Q'(o_{k+n}, argmax_a Q(o_{k+n}, a)))), stopped at a true
  termination (no bootstrap) and cut before a time-limit truncation's next episode (bootstrapping from
  the truncated episode's last observation), never looking past the sequence's end;
- a transition k counts only when o_{k+1} does not start a new episode (the `first` flag);
- loss: importance-weighted mean over the batch of the mean over counted transitions of 0.5 td^2;
- priority of each replayed sequence: 0.9 max_k |td_k| + 0.1 mean_k |td_k| (`sequence_priorities`);
  a new sequence enters with the largest priority seen so far (as in prioritized replay; the paper's
  actors computed a first priority themselves, which costs each actor a second network here);
- the target network is a copy of the online one every `target_network_update_period` gradient steps.

The network (`networks.value.RecurrentQNetwork`, shared with NGU and Agent57) reads each o_k with the
one-hot previous action a_{k-1} (stored with each step) and the reward r_k received on arriving in o_k,
as the paper's LSTM does.

Differences from the paper, on purpose: sequences may cross an episode's end (the paper pads them
instead); the LSTM state is zeroed at the new episode's first step and the transition into it is
masked, so nothing is learned across the boundary. The head is a ReLU layer and a plain Q layer where
the paper has a dueling head. Importance-sampling weights (exponent 0.6) are applied: the paper's
table lists 0.6 while its text says they were dropped; `--importance_sampling_exponent=0` drops them.
Classic control replays 10 + 9 + 1 steps every 10 (each transition learned once, the last of every 10
never: the layout its CartPole results were tuned with) where Atari has the paper's 40 + 80 + 1 every 40.
On a workstation: 16 actors, a 1M-step replay and fewer gradient steps per env step (`run_atari`).
"""

import copy
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import multistep, optimization, value_learning
from deep_rl_zoo.drqn.agent import unroll
from deep_rl_zoo.networks.value import RecurrentQInput, RecurrentQNetwork
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.sequence_replay import PrioritizedSequenceReplay, SequenceBlock, SequenceStartStates
from deep_rl_zoo.types_ import TimeStep


class R2d2Extra(NamedTuple):
    td_error: torch.Tensor  # [L, B] y - h(Q)(o_k, a_k), 0 where the transition does not count
    target: torch.Tensor  # [L, B] y
    mask: torch.Tensor  # [L, B] float, 1 where the transition counts


def r2d2_td_errors(
    q_online: torch.Tensor,
    q_target: torch.Tensor,
    a_tm1: torch.Tensor,
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    valid_t: torch.Tensor,
    n_step: int,
    rescaling_eps: float = 1e-3,
) -> R2d2Extra:
    """TD errors of R2D2's transformed n-step double-Q targets over one stretch of a sequence.

    With q = h(Q) (the network's outputs) at o_0 .. o_L and transitions o_j -> o_{j+1}, j < L:

        td_j = y_j - q_online[j, a_j],   y_j = h(r_n[j] + discount_n[j] h^{-1}(q_target[j+m, a*_{j+m}]))
        a*_t = argmax_a q_online[t, a]   (the online network selects, the target network evaluates)

    Args:
      q_online: online h(Q) of o_0 .. o_L, [L + 1, B, A] (gradients flow through row j < L only).
      q_target: target-network h(Q) of o_0 .. o_L, [L + 1, B, A].
      a_tm1: a_j, [L, B] int64.
      r_t: rewards of o_j -> o_{j+1}, [L, B].
      discount_t: gamma, 0 where o_{j+1} is terminal, [L, B].
      valid_t: o_{j+1} does not start a new episode, [L, B] bool.
      n_step: steps before bootstrapping.
      rescaling_eps: h's linear term.
    """
    if q_online.shape != q_target.shape or q_online.dim() != 3:
        raise ValueError(
            f"q_online {tuple(q_online.shape)} and q_target {tuple(q_target.shape)} must be [L+1, B, A]"
        )
    if a_tm1.shape != (q_online.shape[0] - 1, q_online.shape[1]):
        raise ValueError(f"a_tm1 {tuple(a_tm1.shape)} must be [L, B] for q {tuple(q_online.shape)}")
    if a_tm1.dtype != torch.int64:
        raise ValueError(f"a_tm1 must be int64, got {a_tm1.dtype}")
    with torch.no_grad():
        selected = q_online.detach().argmax(dim=-1, keepdim=True)  # [L + 1, B, 1]
        values = q_target.gather(-1, selected).squeeze(-1)  # [L + 1, B]
        target = multistep.transformed_n_step_returns(r_t, discount_t, valid_t, values, n_step, rescaling_eps)
    mask = valid_t.to(q_online.dtype)
    q_a = q_online[:-1].gather(-1, a_tm1.unsqueeze(-1)).squeeze(-1)  # [L, B]
    return R2d2Extra(td_error=(target - q_a) * mask, target=target, mask=mask)


def sequence_q_values(
    network: RecurrentQNetwork,
    target_network: RecurrentQNetwork,
    observation: torch.Tensor,
    first: torch.Tensor,
    stored_state: tuple[torch.Tensor, torch.Tensor],
    burn_in: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both networks' outputs on the learned part of replayed sequences, each network unrolled from the
    sequences' stored LSTM state through the burn-in (without gradients) first.

    Args:
      observation: [T, B, ...]; first: [T, B] bool (the state is zeroed before a `first` step).
      stored_state: (h, c), each [1, B, H]: the actors' state before step 0.
      burn_in: b, steps that only warm up the state.

    Returns:
      (q_online [T - b, B, A] with gradients, q_target [T - b, B, A] without).
    """
    with torch.no_grad():
        # The target network runs through burn-in and learned steps in one go, from the same stored state.
        q_target = unroll(target_network, observation, stored_state, first).q_values[burn_in:]
        online_state = stored_state
        if burn_in > 0:
            online_state = unroll(network, observation[:burn_in], stored_state, first[:burn_in]).hidden_state
    q_online = unroll(network, observation[burn_in:], online_state, first[burn_in:]).q_values
    return q_online, q_target


class R2d2Actor:
    """Acts epsilon-greedily with its copy of the Q-network (its epsilon fixed for the whole run),
    carrying the LSTM state through the episodes, and sends every `period` env steps a block of them.

    The network reads each observation with the previous action (0 at an episode's start) and the reward
    received on arriving in it; the previous action goes with each step to the replay as an extra. The
    LSTM state is zeroed at every `first` timestep. The state sent with a block is the one before the
    first observation of the sequence the block completes (its last `sequence_length` steps) was read:
    zero when that observation starts an episode, or before the actor's T-th step.

    Without a link it is the evaluation actor (it records and sends nothing).
    """

    def __init__(
        self,
        *,
        network: RecurrentQNetwork,
        link: LearnerLink | None,
        num_actions: int,
        epsilon: float,
        period: int = 1,
        sequence_length: int = 1,
        image_observations: bool,
        rng: np.random.Generator,
        device: torch.device,
        agent_name: str,
    ):
        """
        Args:
          network: the actor's copy of the learner's network (the link copies parameters into it).
          link: the actor's `LearnerLink` (send, pull_parameters, actor_index); None: evaluation.
          epsilon: probability of a uniformly random action.
          period: env steps per block sent (the replay period).
          sequence_length: T, steps per replayed sequence: a block carries the state from T steps back.
          image_observations: send only the newest frame of each stacked observation (Atari).
        """
        self.agent_name = agent_name
        self._network = network
        self._link = link
        self._num_actions = num_actions
        self._epsilon = epsilon
        self._period = period
        self._image = image_observations
        self._rng = rng
        self._device = device
        self._state = network.initial_state(1, device)
        self._start_states = SequenceStartStates(sequence_length)
        self._records: list[tuple] = []
        self._previous_action = 0

    @torch.inference_mode()
    def step(self, timestep: TimeStep) -> int:
        if timestep.first:
            self._state = self._network.initial_state(1, self._device)
            self._previous_action = 0
        self._start_states.record(self._state)
        action = 0  # the action after an episode's last step is never taken nor learned from
        if not timestep.last:
            x = RecurrentQInput(  # each [T=1, B=1, ...]
                observation=torch.as_tensor(timestep.observation, device=self._device)[None, None],
                previous_action=torch.tensor([[self._previous_action]], device=self._device),
                previous_reward=torch.tensor([[float(timestep.reward)]], device=self._device),
            )
            output = self._network(x, self._state)
            self._state = output.hidden_state
            if self._rng.random() < self._epsilon:
                action = int(self._rng.integers(self._num_actions))
            else:
                action = int(output.q_values[0, 0].argmax().item())
        if self._link is not None:
            observation = np.asarray(timestep.observation)
            self._records.append(
                (
                    observation[-1] if self._image else observation,
                    action,
                    timestep.reward,
                    timestep.terminated,
                    timestep.truncated,
                    timestep.first,
                    self._previous_action,
                )
            )
            if len(self._records) == self._period:
                self._send()
        self._previous_action = action
        return action

    def _send(self) -> None:
        observation, action, reward, terminated, truncated, first, previous = zip(*self._records, strict=True)
        block = SequenceBlock(
            actor_index=self._link.actor_index,
            observation=np.stack(observation),
            action=np.asarray(action, np.int64),
            reward=np.asarray(reward, np.float32),
            terminated=np.asarray(terminated, bool),
            truncated=np.asarray(truncated, bool),
            first=np.asarray(first, bool),
            core_state=self._start_states.sequence_start(),
            extras={"previous_action": np.asarray(previous, np.int64)},
        )
        self._records = []
        self._link.send(block, self.statistics)  # logged under actor_<i>/ for the first 8 actors
        self._link.pull_parameters()  # off-policy: take newer parameters if any, never wait

    def reset(self) -> None:
        pass  # episodes follow each other in the stream; `first` zeroes the state

    @property
    def statistics(self) -> dict[str, float]:
        return {"epsilon": self._epsilon}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class R2d2:
    """The R2D2 learner: stores every block, then takes its share of gradient steps on replayed sequences."""

    agent_name = "R2D2"
    on_policy = False  # learns from blocks of any parameters, through its replay
    messages_per_step = 1

    def __init__(
        self,
        *,
        network: RecurrentQNetwork,
        optimizer: torch.optim.Optimizer,
        replay: PrioritizedSequenceReplay,
        burn_in: int,
        batch_size: int,
        min_replay_size: int,
        updates_per_env_step: float,
        discount: float,
        n_step: int,
        target_network_update_period: int,
        importance_sampling_exponent: float,
        priority_eta: float,
        rescaling_eps: float,
        max_grad_norm: float,
        device: torch.device,
    ):
        """
        Args:
          network: online recurrent Q-network; its outputs are h(Q).
          replay: sequences of T steps (burn-in included).
          burn_in: leading steps of each sequence that only warm up the stored LSTM state (no loss).
          batch_size: sequences per gradient step.
          min_replay_size: env steps stored before the first gradient step.
          updates_per_env_step: gradient steps per env step received (fractions carry over).
          discount: gamma.
          n_step: steps of the bootstrapped return.
          target_network_update_period: gradient steps between two copies into the target network.
          importance_sampling_exponent: beta of the prioritized-replay weights (fixed, as in the paper).
          priority_eta: weight of the max in a sequence's priority (eta max + (1 - eta) mean).
          rescaling_eps: the linear term of the value rescaling h.
          max_grad_norm: global gradient-norm clip; 0 disables.
        """
        if not 0 <= burn_in <= replay.sequence_length - 2:
            raise ValueError(
                f"burn_in {burn_in} leaves no transition in sequences of {replay.sequence_length}"
            )
        self._network = network
        self._target_network = copy.deepcopy(network).requires_grad_(False)
        self._optimizer = optimizer
        self._replay = replay
        self._burn_in = burn_in
        self._batch_size = batch_size
        self._min_replay_size = min_replay_size
        self._updates_per_env_step = updates_per_env_step
        self._discount = discount
        self._n_step = n_step
        self._target_network_update_period = target_network_update_period
        self._importance_sampling_exponent = importance_sampling_exponent
        self._priority_eta = priority_eta
        self._rescaling_eps = rescaling_eps
        self._max_grad_norm = max_grad_norm
        self._device = device
        self._env_steps = 0  # env steps received
        self._learner_steps = 0  # gradient steps
        self._update_credit = 0.0  # gradient steps owed, carried over between blocks
        # Set by the distributed loop to its stop request (Ctrl-C, SIGTERM): the steps still owed are
        # left in the credit, which the checkpoint keeps, so a stop never waits for all of them.
        self.should_stop: Callable[[], bool] = lambda: False
        self._statistics: dict[str, float] = {}

    @property
    def shared_module(self) -> nn.Module:
        return self._network

    @property
    def network(self) -> RecurrentQNetwork:
        return self._network

    @property
    def target_network(self) -> RecurrentQNetwork:
        return self._target_network

    @property
    def learner_steps(self) -> int:
        return self._learner_steps

    def learn(self, payloads: list[SequenceBlock]) -> None:
        for block in payloads:
            self._replay.add_block(block)
            self._env_steps += len(block.first)
            if self._ready():
                self._update_credit += len(block.first) * self._updates_per_env_step
        while self._update_credit >= 1.0 and not self.should_stop():
            self._update_credit -= 1.0
            self.gradient_step()

    def _ready(self) -> bool:
        return (
            self._replay.num_steps >= self._min_replay_size and self._replay.num_sequences >= self._batch_size
        )

    def gradient_step(self) -> None:
        """One gradient step on a prioritized batch of sequences; updates their priorities."""
        batch = self._replay.sample(self._batch_size, self._importance_sampling_exponent)

        def to(x, dtype=None):
            return torch.as_tensor(x, device=self._device, dtype=dtype)

        first = to(batch.first, torch.bool)
        observation = RecurrentQInput(
            observation=to(batch.observation),
            previous_action=to(batch.extras["previous_action"], torch.int64),
            previous_reward=to(batch.reward, torch.float32),
        )
        stored_state = tuple(to(x, torch.float32)[None] for x in batch.core_state)  # each [1, B, H]
        b = self._burn_in
        q_online, q_target = sequence_q_values(
            self._network, self._target_network, observation, first, stored_state, b
        )  # each [L + 1, B, A]

        # Transition k: o_k -> o_{k+1}, k = b .. T-2; its reward and discount are those of arriving in o_{k+1}.
        extra = r2d2_td_errors(
            q_online,
            q_target,
            to(batch.action[b:-1], torch.int64),
            to(batch.reward[b + 1 :], torch.float32),
            self._discount * (1.0 - to(batch.terminated[b + 1 :], torch.float32)),
            ~first[b + 1 :],
            self._n_step,
            self._rescaling_eps,
        )
        counts = extra.mask.sum(dim=0)  # [B]
        per_sequence = 0.5 * extra.td_error.square().sum(dim=0) / counts.clamp(min=1.0)  # [B]
        loss = (to(batch.weights, torch.float32) * per_sequence).mean()

        step = optimization.gradient_step(
            loss, self._optimizer, self._network.parameters(), self._max_grad_norm, self._learner_steps + 1
        )
        self._learner_steps += 1
        if self._learner_steps % self._target_network_update_period == 0:
            self._target_network.load_state_dict(self._network.state_dict())

        abs_td = extra.td_error.detach().abs()
        has_loss = counts > 0
        # A sequence without any counted transition (rare: one-step episodes) gets priority 0.
        mask = torch.where(has_loss[None, :], extra.mask, torch.ones_like(extra.mask))
        priorities = value_learning.sequence_priorities(abs_td, mask, self._priority_eta)
        self._replay.update_priorities(batch.indices, priorities.cpu().numpy())
        self._statistics = {
            "loss": step.loss,
            "grad_norm": step.grad_norm,
            "mean_priority": priorities.mean().item(),
            "mean_target": (extra.target * extra.mask).sum().item() / max(extra.mask.sum().item(), 1.0),
        }

    @property
    def statistics(self) -> dict[str, float]:
        return {
            "learner_steps": self._learner_steps,
            "env_steps_received": self._env_steps,
            "replay_steps": self._replay.num_steps,
            "replay_sequences": self._replay.num_sequences,
            **self._statistics,
        }

    def state_dict(self) -> dict:
        """Everything but the replay's contents (as for the other replay agents): a resumed run refills it."""
        return {
            "network": self._network.state_dict(),
            "target_network": self._target_network.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "env_steps": self._env_steps,
            "learner_steps": self._learner_steps,
            "update_credit": self._update_credit,
            "replay_rng": self._replay.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._target_network.load_state_dict(state["target_network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        self._update_credit = state["update_credit"]
        self._replay.rng.bit_generator.state = state["replay_rng"]
