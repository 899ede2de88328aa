"""DRQN (Hausknecht & Stone 2015, "Deep Recurrent Q-Learning for Partially Observable MDPs",
https://arxiv.org/abs/1507.06527): a Q-network with an LSTM, acting with its hidden state carried
through the episode and learning from sequences sampled from a sequence replay.

Learning follows the paper's "bootstrapped random updates": each sequence starts at a random step
with a zero LSTM state. Its first `burn_in` steps only warm the state up (no loss; R2D2, Kapturowski
et al. 2019, https://openreview.net/forum?id=r1lyTjAqYX), so the state the loss sees is closer to
the one carried while acting:

    window   | o_0 ... o_{b-1} | o_b  o_{b+1} ... o_{b+L} |
               burn-in (no grad)  L transitions o_k -> o_{k+1}, masked across episode ends

Added to the paper's one-step Q-learning, each a standard part of later recurrent DQNs:
- burn-in (R2D2), above;
- n-step targets cut at episode ends and at the window's end (R2D2, n = 5): with one-step targets
  the Q horizon grows by one step per target copy, which on CartPole left Q far below the returns
  for tens of thousands of env steps (see `train.DrqnConfig`);
- double Q-learning targets (van Hasselt et al. 2015) and the Huber loss;
- ReLU layers between the LSTM and the Q head (`networks.value.DrqnNetwork`, R2D2's head).
The stored recurrent states of R2D2 were not needed on CartPole and are not used.
"""

import copy
import functools
import inspect

import numpy as np
import torch
from torch import nn

from deep_rl_zoo import multistep, value_learning
from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo.networks.value import DrqnNetwork
from deep_rl_zoo.optimization import gradient_step
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.sequence_replay import SequenceReplay, SequenceStep
from deep_rl_zoo.types_ import TimeStep


class RecurrentEpsilonGreedyActor:
    """Acts (epsilon-)greedily with a recurrent Q-network, carrying its LSTM state through the episode.

    The state is zeroed by `reset()` and at every `first` timestep. The network runs on every step,
    random actions included, so the state always summarises the whole history.
    """

    def __init__(
        self,
        network: DrqnNetwork,
        num_actions: int,
        epsilon: float,
        rng: np.random.Generator,
        device: torch.device,
        agent_name: str,
    ):
        self.agent_name = agent_name
        self._network = network
        self._num_actions = num_actions
        self._epsilon = epsilon
        self._rng = rng
        self._device = device
        self._hidden_state = network.initial_state(1, device)

    @torch.inference_mode()
    def step(self, timestep: TimeStep) -> int:
        if timestep.first:
            self.reset()
        x = torch.as_tensor(timestep.observation, device=self._device)[None, None]  # [T=1, B=1, ...]
        output = self._network(x, self._hidden_state)
        self._hidden_state = output.hidden_state
        if self._rng.random() < self._epsilon:
            return int(self._rng.integers(self._num_actions))
        return int(output.q_values[0, 0].argmax().item())

    def reset(self) -> None:
        self._hidden_state = self._network.initial_state(1, self._device)

    @property
    def statistics(self) -> dict[str, float]:
        return {"epsilon": self._epsilon}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def unroll(
    network: nn.Module,
    observation,
    hidden_state: tuple[torch.Tensor, torch.Tensor],
    first: torch.Tensor,
    one_pass: bool = True,
):
    """`network`'s outputs on time-major sequences that may cross episode starts: the LSTM state is
    zeroed before every `first` step, as the actors zeroed it.

    DRQN's own learner passes `one_pass=False`: its measured figures (README, learning test) come from
    the per-stretch nn.LSTM calls, and the one-pass masked loop, equal up to float rounding, sends a
    seed down another trajectory (seed 3's 5k-step evaluation went 183 -> 109). R2D2 and NGU use one pass.

    A network whose `forward(x, hidden_state, first)` takes `first` (`DrqnNetwork`: one pass, see
    `networks.common.lstm_with_resets`) is called once. Any other recurrent network
    (`forward(x, hidden_state)`) is called once per stretch of steps in which no sequence starts an
    episode, the state zeroed between stretches.

    Args:
      observation: [T, B, ...] time-major sequences (or anything sliced like them along time).
      hidden_state: (h, c), each [1, B, H], the state before `observation[0]`.
      first: [T, B] bool, steps that start an episode (the state is zeroed before them).

    Returns:
      The network's RecurrentQNetworkOutput: q_values [T, B, A] and the state after the last step.
    """
    if one_pass and _takes_first(network):
        return network(observation, hidden_state, first)
    reset_times = torch.nonzero(first.any(dim=1)).flatten().tolist()
    bounds = sorted({0, *reset_times, observation.shape[0]})
    outputs = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        keep = (~first[start]).to(hidden_state[0].dtype)[None, :, None]  # [1, B, 1]
        hidden_state = (hidden_state[0] * keep, hidden_state[1] * keep)
        output = network(observation[start:end], hidden_state)
        outputs.append(output.q_values)
        hidden_state = output.hidden_state
    return output._replace(q_values=torch.cat(outputs))


def _takes_first(network: nn.Module) -> bool:
    return "first" in inspect.signature(network.forward).parameters


class Drqn:
    """A DRQN agent that acts and learns in the same process.

    Every env step is stored in the sequence replay; every `learn_interval` env steps (once
    `min_replay_size` steps are stored) one gradient step is taken on `batch_size` sequences of
    `burn_in + unroll_length + 1` steps, with the (double) n-step Q-learning loss of each transition.
    """

    agent_name = "DRQN"

    def __init__(
        self,
        *,
        network: DrqnNetwork,
        optimizer: torch.optim.Optimizer,
        replay: SequenceReplay,
        exploration_epsilon: LinearSchedule,
        num_actions: int,
        discount: float,
        burn_in: int,
        min_replay_size: int,
        learn_interval: int,
        batch_size: int,
        target_network_update_period: int,
        max_grad_norm: float,
        rng: np.random.Generator,
        device: torch.device,
        frame_store: replay_lib.FrameStackStore | None = None,
        double_q: bool = True,
        huber_delta: float | None = 1.0,
        n_step: int = 1,
    ):
        """
        Args:
          network: online recurrent Q-network.
          replay: sequence replay of `burn_in + unroll length + 1` steps per sequence.
          exploration_epsilon: epsilon as a function of env steps.
          discount: gamma of the one-step targets.
          burn_in: leading steps of each sequence that only warm up the LSTM state.
          min_replay_size: steps stored before learning starts.
          learn_interval: env steps between two gradient steps.
          target_network_update_period: gradient steps between two target-network copies.
          max_grad_norm: global gradient-norm clip; 0 disables.
          frame_store: for Atari, stores each frame once; the replay then stores its handles.
          double_q: the online network picks the bootstrap action (van Hasselt et al. 2015).
          huber_delta: Huber threshold of the TD error, None for the squared loss.
          n_step: steps of the bootstrapped return (1 is the paper's one-step target).
        """
        if not 0 <= burn_in <= replay.sequence_length - 2:
            raise ValueError(
                f"burn_in {burn_in} leaves no transition in sequences of {replay.sequence_length}"
            )
        self._network = network
        self._target_network = copy.deepcopy(network).requires_grad_(False)
        self._actor = RecurrentEpsilonGreedyActor(network, num_actions, 0.0, rng, device, self.agent_name)
        self._optimizer = optimizer
        self._replay = replay
        self._frame_store = frame_store
        self._exploration_epsilon = exploration_epsilon
        self._num_actions = num_actions
        self._discount = discount
        self._burn_in = burn_in
        self._min_replay_size = max(min_replay_size, replay.sequence_length)
        self._learn_interval = learn_interval
        self._batch_size = batch_size
        self._target_network_update_period = target_network_update_period
        self._max_grad_norm = max_grad_norm
        self._double_q = double_q
        self._huber_delta = huber_delta
        self._n_step = n_step
        self._rng = rng
        self._device = device
        self._env_steps = 0
        self._learner_steps = 0
        self._last_loss = float("nan")
        self._last_grad_norm = float("nan")

    def step(self, timestep: TimeStep) -> int:
        """Stores `timestep`, learns when due, and returns an epsilon-greedy action."""
        if not timestep.first:
            self._env_steps += 1
        greedy = self._actor.step(timestep)  # always advances the LSTM state
        action = int(self._rng.integers(self._num_actions)) if self._rng.random() < self.epsilon else greedy
        stored = timestep.observation
        if self._frame_store is not None:
            stored = self._frame_store.add(timestep.observation[-1], timestep.first)
        self._replay.add(
            SequenceStep(
                observation=stored,
                action=action,
                reward=np.float32(timestep.reward),
                terminated=timestep.terminated,
                first=timestep.first,
            )
        )
        if (
            not timestep.first
            and self._replay.size >= self._min_replay_size
            and self._env_steps % self._learn_interval == 0
        ):
            self._learn()
        return action

    def reset(self) -> None:
        self._actor.reset()

    @property
    def epsilon(self) -> float:
        return self._exploration_epsilon(self._env_steps)

    def _learn(self) -> None:
        batch = self._replay.sample(self._batch_size)  # fields [T, B, ...]
        observation = batch.observation
        if self._frame_store is not None:
            num_steps, batch_size = observation.shape
            stacks = self._frame_store.stacks(observation.reshape(-1))
            observation = stacks.reshape(num_steps, batch_size, *stacks.shape[1:])
        to = lambda x, dtype=None: torch.as_tensor(x, device=self._device, dtype=dtype)  # noqa: E731
        observation, first = to(observation), to(batch.first, torch.bool)
        b = self._burn_in
        zeros = self._network.initial_state(observation.shape[1], self._device)
        split = functools.partial(unroll, one_pass=False)  # DRQN's measured numerics: see `unroll`
        with torch.no_grad():
            q_target = split(self._target_network, observation, zeros, first).q_values[b:]  # [L + 1, B, A]
            state = zeros
            if b > 0:
                state = split(self._network, observation[:b], zeros, first[:b]).hidden_state
        q_online = split(self._network, observation[b:], state, first[b:]).q_values  # [L + 1, B, A]

        # Transition j: o_{b+j} -> o_{b+j+1}, j = 0 .. L-1, folded into n-step transitions that
        # bootstrap from step b + bootstrap_index; everything is then flattened to [L * B].
        valid = ~first[b + 1 :]  # o_{b+j+1} starting an episode: not a transition of o_{b+j}
        n_step = multistep.n_step_transitions(
            to(batch.reward[b + 1 :], torch.float32),
            self._discount * (1.0 - to(batch.terminated[b + 1 :], torch.float32)),
            valid,
            self._n_step,
        )
        at_bootstrap = lambda q: q.gather(0, n_step.bootstrap_index[..., None].expand_as(q[1:]))  # noqa: E731
        flat = lambda x: x.flatten(0, 1)  # noqa: E731
        q_tm1 = flat(q_online[:-1])
        a_tm1 = flat(to(batch.action[b:-1], torch.int64))
        r_t, discount_t = flat(n_step.r_n), flat(n_step.discount_n)
        q_t = flat(at_bootstrap(q_target))
        if self._double_q:
            output = value_learning.double_qlearning(
                q_tm1, a_tm1, r_t, discount_t, q_t, flat(at_bootstrap(q_online.detach())), self._huber_delta
            )
        else:
            output = value_learning.qlearning(q_tm1, a_tm1, r_t, discount_t, q_t, self._huber_delta)
        mask = flat(valid)
        loss = (output.loss * mask).sum() / mask.sum().clamp(min=1)

        self._last_loss, self._last_grad_norm = gradient_step(
            loss, self._optimizer, self._network.parameters(), self._max_grad_norm, self._learner_steps + 1
        )
        self._learner_steps += 1
        if self._learner_steps % self._target_network_update_period == 0:
            self._target_network.load_state_dict(self._network.state_dict())

    @property
    def statistics(self) -> dict[str, float]:
        return {
            "loss": self._last_loss,
            "grad_norm": self._last_grad_norm,
            "epsilon": self.epsilon,
            "learner_steps": self._learner_steps,
            "replay_size": self._replay.size,
        }

    def state_dict(self) -> dict:
        return {
            "network": self._network.state_dict(),
            "target_network": self._target_network.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "env_steps": self._env_steps,
            "learner_steps": self._learner_steps,
            "rng": self._rng.bit_generator.state,
            "replay_rng": self._replay.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        self._network.load_state_dict(state["network"])
        self._target_network.load_state_dict(state["target_network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        self._rng.bit_generator.state = state["rng"]
        self._replay.rng.bit_generator.state = state["replay_rng"]
