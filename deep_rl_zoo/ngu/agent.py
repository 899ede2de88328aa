"""NGU (Badia et al. 2020, "Never Give Up: Learning Directed Exploration Strategies",
https://arxiv.org/abs/2002.06038): R2D2 with an intrinsic reward for states that are new within the
episode (and more so if new over the whole of training), and a family of N policies that weigh it.

Each actor plays one policy j of the family, (beta_j, gamma_j) from `exploration.policy_family`
(actor i plays j = i mod N for the whole run), epsilon-greedy with its Ape-X epsilon. At every step
it computes the intrinsic reward of the observation it arrives in:

    e_t   = f(o_t)                      controllable embedding (trained by an inverse-dynamics model)
    r_ep  = episodic kernel reward of e_t against this episode's memory M (k nearest neighbours,
            squared distances divided by a running mean d_m^2 of such distances: `exploration.
            episodic_intrinsic_reward`), then e_t joins M; M is emptied at every episode start, and
            r_ep is 0 until M holds k embeddings (the first k steps of every episode)
    alpha = RND error of o_t, normalised by the error's running mean and std (`exploration.
            lifelong_novelty_factor`), clipped to [1, L = 5]
    r^i_t = r_ep * alpha

The recurrent Q-network (`NguQNetwork`: R2D2's `networks.value.RecurrentQNetwork` with policy inputs)
reads o_t with the one-hot j, the one-hot previous action, and the previous extrinsic and intrinsic
rewards. The learner replays sequences as R2D2 does (stored LSTM
state, burn-in, priorities 0.9 max + 0.1 mean |td|, target network) with the reward and discount of
each sequence's own policy:

    r_t = r^e_t + beta_j r^i_t,   discount_t = gamma_j (0 at a true termination)

and, as in the paper, transformed Retrace(lambda) targets (`retrace_td_errors`, --q_target=retrace:
the target policy is epsilon-greedy in the online network's h(Q) of j, the behaviour probabilities
mu(a_t | o_t) are the actor's epsilon-greedy ones, stored with each step), or with --q_target=n_step
R2D2's transformed n-step double-Q targets (`r2d2.agent.r2d2_td_errors`; the classic-control default,
where it was tuned; not the paper's). The same
replayed batches train the embedding (cross-entropy of the inverse model predicting a_t from
f(o_t), f(o_{t+1})) and RND's predictor (squared error to the fixed random target), on the last
--auxiliary_steps transitions of each sequence (the paper's 5 on Atari). One Adam steps
all three; each network's gradient is clipped to --max_grad_norm on its own
(`NguNetworks.trained_parameter_groups`), and the logged `grad_norm` is the norm over all of them.

Kept from the paper: k = 10, kernel epsilon 1e-4, cluster distance 0.008, c = 0.001, maximum
similarity 8, L = 5, beta = 0.3, gamma from 0.99 to 0.997, the policy family's shapes, Ape-X epsilons,
an inverse-dynamics embedding, RND's life-long factor, each actor's own episodic memory, learning rate
5e-4 for the embedding and RND, which learn the last 5 transitions of each replayed sequence (Atari;
benchmarks/README.md measures what learning all 80 cost).

Changed, and why:
- The embedding is `networks.curiosity.IntrinsicCuriosityModule`'s (shared with PPO-ICM; its forward
  model is left untrained here): on Atari its 1,152 convolution features, not the paper's 32; on
  vectors an MLP of 32 units. One module of the zoo instead of a second embedding network.
- The running mean d_m^2 is over all of an actor's squared k-NN distances (the paper keeps it per
  actor too, without saying over which window); the RND error's mean and std are running statistics the
  learner keeps over every step received (the paper's actors kept them), published to the actors with
  the networks. Both and the bandit of Agent57 are in the checkpoint.
- CPU budget: few actors (4 on classic control, 16 on Atari) and fewer policies than actors (N = 2 and
  8), so that the greedy policy j = 0 has both a noisy and a near-greedy actor, as each policy of the
  paper's 256 actors over 32 policies has (`train.NguConfig` says why), short sequences, and the replay
  ratio of R2D2's classic defaults.
- Sequences cross episode ends with masking, and the head is plain (no dueling), as in `r2d2.agent`.
- Classic control learns 5-step double-Q targets with importance-sampling weights 0.6 and R2D2's
  target period and Adam epsilon (what was tuned on MountainCar here); run_atari has NGU's table's
  (Retrace 0.95, no importance weights, target copy every 1,500 steps, Adam epsilon 1e-4). On classic
  control the embedding and RND learn every one of the 9 learned transitions of a sequence, as the
  published MountainCar runs did (not the paper's last 5).
"""

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from deep_rl_zoo import exploration, multistep, optimization, value_learning
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.networks.curiosity import IntrinsicCuriosityModule, RandomNetworkDistillation
from deep_rl_zoo.networks.value import RecurrentQInput, RecurrentQNetwork
from deep_rl_zoo.normalizers import ObservationNormalizer
from deep_rl_zoo.r2d2.agent import R2d2, R2d2Extra, r2d2_td_errors, sequence_q_values
from deep_rl_zoo.sequence_replay import (
    PrioritizedSequenceReplay,
    ReplayedSequences,
    SequenceBlock,
    SequenceStartStates,
)
from deep_rl_zoo.types_ import TimeStep

# ----------------------------------------------------------------------------------------------------
# Networks


class NguQNetwork(RecurrentQNetwork):
    """R2D2's recurrent Q-network (`networks.value.RecurrentQNetwork`) with NGU's policy inputs: the LSTM
    also reads the one-hot policy index j and the previous intrinsic reward. Outputs are h(Q)."""

    def __init__(
        self,
        observation_shape,
        num_actions: int,
        num_policies: int,
        hidden_sizes=(128,),
        lstm_size: int = 128,
        head_hidden_sizes=(128,),
    ):
        if num_policies < 1:
            raise ValueError(f"num_policies must be >= 1, got {num_policies}")
        super().__init__(
            observation_shape, num_actions, hidden_sizes, lstm_size, head_hidden_sizes, num_policies
        )

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """One network, clipped on its own (`NguNetworks.trained_parameter_groups`)."""
        return {"q": list(self.parameters())}

    def acting_q_values(self, q_values: torch.Tensor, beta: float) -> torch.Tensor:
        """The values the actor is greedy in: NGU's one network already learns r^e + beta_j r^i."""
        return q_values


class ActorMemory(nn.Module):
    """What each actor remembers across episodes, kept by the learner as buffers (so it is in the
    checkpoint and published to the actors with the networks): the running mean of squared k-NN
    distances and, for Agent57, the bandit's last `window` (arm, return) pairs. Row i is actor i's,
    the last row the evaluation actor's. A (re)started actor reads its row once, at its first step;
    afterwards it sends its own state with every block."""

    def __init__(self, num_actors: int, window: int = 1):
        super().__init__()
        rows = num_actors + 1
        self.register_buffer("distance_mean", torch.zeros(rows, dtype=torch.float64))
        self.register_buffer("distance_count", torch.zeros(rows, dtype=torch.float64))
        self.register_buffer("bandit_arms", torch.zeros(rows, window, dtype=torch.int64))
        self.register_buffer("bandit_returns", torch.zeros(rows, window, dtype=torch.float64))
        self.register_buffer("bandit_length", torch.zeros(rows, dtype=torch.int64))

    @property
    def window(self) -> int:
        return self.bandit_arms.shape[1]

    def read(self, row: int) -> dict:
        length = int(self.bandit_length[row])
        return {
            "distance_mean": float(self.distance_mean[row]),
            "distance_count": float(self.distance_count[row]),
            "bandit_arms": self.bandit_arms[row, :length].tolist(),
            "bandit_returns": self.bandit_returns[row, :length].tolist(),
        }

    @torch.no_grad()
    def write(self, row: int, state: dict) -> None:
        self.distance_mean[row] = state["distance_mean"]
        self.distance_count[row] = state["distance_count"]
        arms, returns = state["bandit_arms"][-self.window :], state["bandit_returns"][-self.window :]
        self.bandit_length[row] = len(arms)
        self.bandit_arms[row, : len(arms)] = torch.as_tensor(arms, dtype=torch.int64)
        self.bandit_returns[row, : len(arms)] = torch.as_tensor(returns, dtype=torch.float64)


class NguNetworks(nn.Module):
    """Everything the actors need, published as one module: the Q-network(s) `q`, the embedding, RND
    (with its observation normaliser), the running statistics of RND's error, and the actors' memory."""

    def __init__(
        self,
        q: nn.Module,
        embedding: IntrinsicCuriosityModule,
        rnd: RandomNetworkDistillation,
        actor_memory: ActorMemory,
    ):
        super().__init__()
        self.q = q
        self.embedding = embedding
        self.rnd = rnd
        self.rnd_error = ObservationNormalizer((), clip=math.inf)  # running mean / var of RND's error
        self.actor_memory = actor_memory

    def trained_parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """What the learner trains, one entry per network, each clipped to the gradient-norm limit on its
        own (as PPO-RND clips each of its networks): the Q-network (Agent57: each of its two), the
        embedding with its inverse model (ICM's forward model is not trained by NGU), and RND's
        predictor (its target is fixed). One global clip over all of them would let the auxiliary
        losses' gradients shrink the Q-network's step; a clip of the Q-network alone leaves the others'
        steps unbounded."""
        return {
            **self.q.parameter_groups(),
            "embedding": [*self.embedding.embedding.parameters(), *self.embedding.inverse_model.parameters()],
            "rnd": self.rnd.trainable_parameters(),
        }

    @torch.no_grad()
    def lifelong_factor(self, observation: torch.Tensor, max_scale: float) -> torch.Tensor:
        """min(max(1 + (err - mean) / std, 1), L) of observations [B, ...] -> [B]."""
        prediction, target = self.rnd(observation)
        error = (prediction - target).square().mean(-1)
        std = float(torch.sqrt(self.rnd_error.var + 1e-8))
        return exploration.lifelong_novelty_factor(error, float(self.rnd_error.mean), std, max_scale)


# ----------------------------------------------------------------------------------------------------
# Actor


class EpisodicNoveltyConfig(NamedTuple):
    """The episodic and life-long novelty constants (the paper's by default)."""

    memory_capacity: int = 30_000  # embeddings kept per episode (the oldest are overwritten)
    num_neighbours: int = 10
    kernel_epsilon: float = 1e-4
    cluster_distance: float = 0.008
    pseudo_count_constant: float = 1e-3
    max_similarity: float = 8.0
    max_lifelong_scale: float = 5.0


class EpisodicMemory:
    """One actor's episodic memory of embeddings and its running mean of squared k-NN distances.

    `reward(e)` is the episodic kernel reward of e against the memory as it is, then stores e; the
    running mean d_m^2 takes in e's k squared distances before they are normalised. While the memory
    holds fewer than k embeddings (the first k steps of every episode) the reward is 0 and the mean is
    left alone, as in the reference implementations: a kernel sum over fewer than k neighbours is
    smaller, so those steps would get up to ~3x the steady bonus (1 / sqrt(K) with one neighbour at
    unit normalised distance against 1 / sqrt(10 K) with ten), whatever the action.
    """

    def __init__(
        self, config: EpisodicNoveltyConfig, distance_mean: float = 0.0, distance_count: float = 0.0
    ):
        self._config = config
        self._memory: torch.Tensor | None = None
        self._size = 0
        self._added = 0
        self.distance_mean = distance_mean
        self.distance_count = distance_count

    def reset(self) -> None:
        self._size = 0
        self._added = 0

    @torch.no_grad()
    def reward(self, embedding: torch.Tensor) -> float:
        """embedding: [F]."""
        config = self._config
        if self._memory is None:
            self._memory = torch.zeros(config.memory_capacity, embedding.shape[0], device=embedding.device)
        value = 0.0
        if self._size >= config.num_neighbours:
            distances = (self._memory[: self._size] - embedding).square().sum(-1)  # [M]
            k = config.num_neighbours
            nearest = torch.topk(distances, k, largest=False).values  # [k]
            count = self.distance_count + k
            self.distance_mean += (float(nearest.sum()) - k * self.distance_mean) / count
            self.distance_count = count
            value = float(
                exploration.episodic_intrinsic_reward(
                    nearest[None],
                    self.distance_mean,
                    config.kernel_epsilon,
                    config.cluster_distance,
                    config.pseudo_count_constant,
                    config.max_similarity,
                )[0]
            )
        self._memory[self._added % config.memory_capacity] = embedding
        self._added += 1
        self._size = min(self._added, config.memory_capacity)
        return value


class FixedPolicy:
    """NGU's choice of policy: the same j every episode (actor i plays j = i mod N)."""

    def __init__(self, index: int):
        self.index = index

    def choose(self) -> int:
        return self.index

    def record(self, arm: int, episode_return: float) -> None:
        pass

    def state(self) -> dict:
        return {"bandit_arms": [], "bandit_returns": []}


class NguActor:
    """Acts epsilon-greedily in h(Q) of its policy j with the actor's copy of the networks, computing
    each step's intrinsic reward on the way, and sends blocks of `period` steps as R2D2's actor does,
    with the policy index, previous action and intrinsic reward of each step as extras.

    Without a link it is the evaluation actor (it sends nothing and keeps its memory row itself).
    `policy` chooses j at every episode start (NGU: `FixedPolicy`; Agent57: its bandit).
    """

    def __init__(
        self,
        *,
        networks: NguNetworks,
        link,
        policy,
        betas: list[float],
        num_actions: int,
        epsilon: float,
        period: int,
        sequence_length: int,
        image_observations: bool,
        novelty: EpisodicNoveltyConfig,
        memory_row: int,
        rng: np.random.Generator,
        device: torch.device,
        agent_name: str,
    ):
        self.agent_name = agent_name
        self._networks = networks
        self._link = link
        self._policy = policy
        self._betas = betas
        self._num_actions = num_actions
        self._epsilon = epsilon
        self._period = period
        self._image = image_observations
        self._novelty = novelty
        self._memory_row = memory_row
        self._rng = rng
        self._device = device
        self._memory: EpisodicMemory | None = None  # built at the first step, from the published row
        self._state = networks.q.initial_state(1, device)
        self._start_states = SequenceStartStates(sequence_length)
        self._records: list[tuple] = []
        self._policy_index = 0
        self._previous_action = 0
        self._episode_return = 0.0
        self._intrinsic_sum = 0.0
        self._intrinsic_count = 0

    def _begin(self) -> None:
        """Reads this actor's row of the published memory (once: afterwards the actor's own is newer)."""
        row = self._networks.actor_memory.read(self._memory_row)
        self._memory = EpisodicMemory(self._novelty, row["distance_mean"], row["distance_count"])
        if hasattr(self._policy, "load"):
            self._policy.load(row["bandit_arms"], row["bandit_returns"])

    def _own_state(self) -> dict:
        return {
            "distance_mean": self._memory.distance_mean,
            "distance_count": self._memory.distance_count,
            **self._policy.state(),
        }

    @torch.inference_mode()
    def step(self, timestep: TimeStep) -> int:
        if self._memory is None:
            self._begin()
        if timestep.first:
            self._state = self._networks.q.initial_state(1, self._device)
            self._memory.reset()
            self._policy_index = self._policy.choose()
            self._previous_action = 0
            self._episode_return = 0.0
        else:
            self._episode_return += float(timestep.reward)
        self._start_states.record(self._state)

        observation = torch.as_tensor(timestep.observation, device=self._device)[None]  # [B=1, ...]
        # 0 for the first k steps of an episode (fewer than k embeddings to compare with)
        episodic = self._memory.reward(self._networks.embedding.embed(observation)[0])
        intrinsic = 0.0
        if not timestep.first:  # the first observation's reward is never learned from (masked)
            factor = self._networks.lifelong_factor(observation, self._novelty.max_lifelong_scale)
            intrinsic = episodic * float(factor[0])
            self._intrinsic_sum += intrinsic
            self._intrinsic_count += 1

        action = 0  # the action after an episode's last step is never taken nor learned from
        behaviour_probability = 1.0
        if not timestep.last:
            x = RecurrentQInput(
                observation=observation[None],
                previous_action=torch.tensor([[self._previous_action]], device=self._device),
                previous_reward=torch.tensor([[float(timestep.reward)]], device=self._device),
                policy_index=torch.tensor([[self._policy_index]], device=self._device),
                previous_intrinsic_reward=torch.tensor([[intrinsic]], device=self._device),
            )
            output = self._networks.q(x, self._state)
            self._state = output.hidden_state
            q = self._networks.q.acting_q_values(output.q_values, self._betas[self._policy_index])
            greedy = int(q[0, 0].argmax().item())
            if self._rng.random() < self._epsilon:
                action = int(self._rng.integers(self._num_actions))
            else:
                action = greedy
            # mu(a_t | o_t) of the epsilon-greedy behaviour, for Retrace's importance weights
            behaviour_probability = self._epsilon / self._num_actions + (1.0 - self._epsilon) * (
                action == greedy
            )
        else:
            self._policy.record(self._policy_index, self._episode_return)
            if self._link is None:
                self._networks.actor_memory.write(self._memory_row, self._own_state())

        if self._link is not None:
            stored = np.asarray(timestep.observation)
            self._records.append(
                (
                    stored[-1] if self._image else stored,
                    action,
                    timestep.reward,
                    timestep.terminated,
                    timestep.truncated,
                    timestep.first,
                    self._policy_index,
                    self._previous_action,
                    intrinsic,
                    behaviour_probability,
                )
            )
            if len(self._records) == self._period:
                self._send()
        self._previous_action = action
        return action

    def _send(self) -> None:
        fields = list(zip(*self._records, strict=True))
        observation, action, reward, terminated, truncated, first, policy, previous, intrinsic, mu = fields
        block = SequenceBlock(
            actor_index=self._link.actor_index,
            observation=np.stack(observation),
            action=np.asarray(action, np.int64),
            reward=np.asarray(reward, np.float32),
            terminated=np.asarray(terminated, bool),
            truncated=np.asarray(truncated, bool),
            first=np.asarray(first, bool),
            core_state=self._start_states.sequence_start(),
            extras={
                "policy_index": np.asarray(policy, np.int64),
                "previous_action": np.asarray(previous, np.int64),
                "intrinsic_reward": np.asarray(intrinsic, np.float32),
                "behaviour_probability": np.asarray(mu, np.float32),
            },
        )
        self._records = []
        statistics = {"epsilon": self._epsilon, "policy_index": float(self._policy_index)}
        if self._intrinsic_count:
            statistics["mean_intrinsic_reward"] = self._intrinsic_sum / self._intrinsic_count
        self._intrinsic_sum, self._intrinsic_count = 0.0, 0
        self._link.send(NguMessage(block, self._own_state()), statistics)
        self._link.pull_parameters()  # off-policy: take newer parameters if any, never wait

    def reset(self) -> None:
        pass  # `first` resets the LSTM state and the episodic memory

    @property
    def statistics(self) -> dict[str, float]:
        return {"epsilon": self._epsilon, "policy_index": float(self._policy_index)}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class NguMessage(NamedTuple):
    """An NGU actor's payload: a block of steps and the actor's own memory (for the learner to keep)."""

    block: SequenceBlock
    actor_state: dict


# ----------------------------------------------------------------------------------------------------
# Learner


class SequenceTensors(NamedTuple):
    """A replayed batch as tensors on the learner's device."""

    inputs: RecurrentQInput  # [T, B, ...]
    action: torch.Tensor  # [T, B] int64
    extrinsic_reward: torch.Tensor  # [T, B]
    intrinsic_reward: torch.Tensor  # [T, B]
    terminated: torch.Tensor  # [T, B] bool
    first: torch.Tensor  # [T, B] bool
    policy_index: torch.Tensor  # [T, B] int64
    stored_state: tuple  # (h, c), each [1, B, H]
    weights: torch.Tensor  # [B]
    behaviour_probability: torch.Tensor | None = None  # [T, B] mu(a_t | o_t) of the actor (Retrace)


def sequence_tensors(batch: ReplayedSequences, device: torch.device) -> SequenceTensors:
    def to(x, dtype=None):
        return torch.as_tensor(x, device=device, dtype=dtype)

    extras = batch.extras
    reward = to(batch.reward, torch.float32)
    intrinsic = to(extras["intrinsic_reward"], torch.float32)
    policy_index = to(extras["policy_index"], torch.int64)
    return SequenceTensors(
        inputs=RecurrentQInput(
            observation=to(batch.observation),
            previous_action=to(extras["previous_action"], torch.int64),
            previous_reward=reward,
            policy_index=policy_index,
            previous_intrinsic_reward=intrinsic,
        ),
        action=to(batch.action, torch.int64),
        extrinsic_reward=reward,
        intrinsic_reward=intrinsic,
        terminated=to(batch.terminated, torch.bool),
        first=to(batch.first, torch.bool),
        policy_index=policy_index,
        stored_state=tuple(to(x, torch.float32)[None] for x in batch.core_state),
        weights=to(batch.weights, torch.float32),
        behaviour_probability=to(extras["behaviour_probability"], torch.float32)
        if "behaviour_probability" in extras
        else None,
    )


def policy_reward_and_discount(
    r_e: torch.Tensor,
    r_i: torch.Tensor,
    terminated: torch.Tensor,
    policy_index: torch.Tensor,
    betas: torch.Tensor,
    gammas: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """NGU's reward and discount of each transition under the policy j that collected it:

        r_t = r^e_t + beta_j r^i_t,   discount_t = gamma_j (1 - terminated_t)

    Args: r_e, r_i, terminated, policy_index [L, B] (j of the step arrived in); betas, gammas [N].
    """
    if not r_e.shape == r_i.shape == terminated.shape == policy_index.shape:
        raise ValueError("r_e, r_i, terminated and policy_index must have one shape [L, B]")
    return r_e + betas[policy_index] * r_i, gammas[policy_index] * (~terminated).to(r_e.dtype)


class RetraceSettings(NamedTuple):
    """NGU's and Agent57's transformed Retrace (Badia et al. 2020): the trace decay and the epsilon of the
    target policy pi, epsilon-greedy in the online network's Q of the sequence's policy j."""

    lambda_: float = 0.95
    target_epsilon: float = 0.01


def epsilon_greedy_probabilities(q: torch.Tensor, epsilon: float) -> torch.Tensor:
    """pi(a | o) = epsilon / A + (1 - epsilon) [a = argmax q], [..., A] -> [..., A]."""
    greedy = F.one_hot(q.argmax(-1), q.shape[-1]).to(q.dtype)
    return epsilon / q.shape[-1] + (1.0 - epsilon) * greedy


def retrace_td_errors(
    q_online: torch.Tensor,
    q_target: torch.Tensor,
    pi_t: torch.Tensor,
    a_tm1: torch.Tensor,
    r_t: torch.Tensor,
    discount_t: torch.Tensor,
    valid_t: torch.Tensor,
    mu_a_tm1: torch.Tensor,
    lambda_: float,
    rescaling_eps: float = 1e-3,
) -> R2d2Extra:
    """TD errors of the transformed Retrace targets (`multistep.transformed_retrace_returns`) over one
    stretch of a sequence o_0 .. o_L, transitions o_j -> o_{j+1}, j < L:

        td_j = y_j - q_online[j, a_j],   y_j = h(G_j),
        G_j  = r_j + discount_j (E_pi h^{-1}(q_target[j+1]) + c_{j+1} (G_{j+1} - h^{-1}(q_target[j+1, a_{j+1}])))
        c_j  = lambda min(1, pi_t[j, a_j] / mu_a_tm1[j])

    with the trace cut where o_{j+1} starts a new episode and at the stretch's end (G_{L-1} bootstraps
    from E_pi h^{-1}(q_target[L])).

    Args:
      q_online: online h(Q) of o_0 .. o_L, [L + 1, B, A] (gradients flow through row j < L only).
      q_target: target-network h(Q) of o_0 .. o_L, [L + 1, B, A].
      pi_t: target policy at o_0 .. o_L, [L + 1, B, A].
      a_tm1: a_j, [L, B] int64; r_t, discount_t: [L, B]; valid_t: [L, B] bool.
      mu_a_tm1: the behaviour's probability of a_j at o_j, [L, B].
      lambda_: trace decay.
      rescaling_eps: h's linear term.
    """
    if q_online.shape != q_target.shape or q_online.shape != pi_t.shape or q_online.dim() != 3:
        raise ValueError(
            f"q_online {tuple(q_online.shape)}, q_target {tuple(q_target.shape)} and pi_t "
            f"{tuple(pi_t.shape)} must be one shape [L+1, B, A]"
        )
    with torch.no_grad():
        target = multistep.transformed_retrace_returns(
            r_t, discount_t, q_target, a_tm1, pi_t, mu_a_tm1, lambda_, valid_t, rescaling_eps
        )
    mask = valid_t.to(q_online.dtype)
    q_a = q_online[:-1].gather(-1, a_tm1.unsqueeze(-1)).squeeze(-1)  # [L, B]
    return R2d2Extra(td_error=(target - q_a) * mask, target=target, mask=mask)


def auxiliary_losses(
    networks: NguNetworks, observation: torch.Tensor, action: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The embedding's inverse-dynamics loss and RND's predictor loss on a stretch of replayed steps.

    Args:
      observation: o_0 .. o_L, [L + 1, B, ...]; action: a_0 .. a_{L-1}, [L, B]; valid: o_{k+1} does
        not start a new episode, [L, B] bool.

    Returns:
      (mean over valid transitions of -log p(a_k | f(o_k), f(o_{k+1})), mean over o_1 .. o_L of RND's
      squared error).
    """
    steps = observation.shape[0]
    flat = observation.flatten(0, 1)
    phi = networks.embedding.embed(flat).view(steps, observation.shape[1], -1)
    logits = networks.embedding.inverse_model(torch.cat([phi[:-1], phi[1:]], dim=-1))  # [L, B, A]
    cross_entropy = F.cross_entropy(logits.flatten(0, 1), action.flatten(), reduction="none")
    mask = valid.flatten().to(cross_entropy.dtype)
    inverse_loss = (cross_entropy * mask).sum() / mask.sum().clamp(min=1.0)
    prediction, target = networks.rnd(observation[1:].flatten(0, 1))
    rnd_loss = (prediction - target).square().mean(-1).mean()
    return inverse_loss, rnd_loss


def check_resumable(own: dict, saved: dict) -> None:
    """A one-line ConfigError (exit 2, before any actor starts) when a checkpoint's networks do not fit
    this run's, naming the flag: the actors' memory has one row per actor plus the evaluation actor's
    (--num_actors), and Agent57's bandit keeps --bandit_window pairs per row; any other shape names the
    tensor (the network sizes, --num_policies)."""
    rows, saved_rows = (
        own["actor_memory.distance_mean"].shape[0],
        saved["actor_memory.distance_mean"].shape[0],
    )
    if saved_rows != rows:
        raise ConfigError(
            f"--resume: the checkpoint was trained with --num_actors={saved_rows - 1}, this run has "
            f"--num_actors={rows - 1}; resume with --num_actors={saved_rows - 1}"
        )
    window, saved_window = (
        own["actor_memory.bandit_arms"].shape[1],
        saved["actor_memory.bandit_arms"].shape[1],
    )
    if saved_window != window:
        raise ConfigError(
            f"--resume: the checkpoint was trained with --bandit_window={saved_window}, this run has "
            f"--bandit_window={window}; resume with --bandit_window={saved_window}"
        )
    for name, value in saved.items():
        if name in own and tuple(own[name].shape) != tuple(value.shape):
            raise ConfigError(
                f"--resume: the checkpoint's {name} is {tuple(value.shape)}, this run's "
                f"{tuple(own[name].shape)}: resume with the flags it was trained with (its run's config.txt)"
            )


class Ngu(R2d2):
    """The NGU learner: keeps the actors' memory rows and RND's statistics from every message, stores
    the blocks, and takes its share of gradient steps (Q-network, embedding and RND on the same batch).

    R2D2's learner (`r2d2.agent.R2d2`) with the networks `q` as its network: its constructor, counters,
    replay credit (`learn` of the blocks), readiness and statistics are shared; the gradient step (each
    sequence's own policy, the auxiliary losses) and the checkpoint's layout (`networks`, `target_q`)
    are NGU's."""

    agent_name = "NGU"

    def __init__(
        self,
        *,
        networks: NguNetworks,
        optimizer: torch.optim.Optimizer,
        replay: PrioritizedSequenceReplay,
        betas: list[float],
        gammas: list[float],
        retrace: RetraceSettings | None = None,
        auxiliary_steps: int = 0,
        **r2d2_arguments,
    ):
        """
        Args:
          networks: everything published; `networks.q` is the online Q-network (outputs h(Q)).
          optimizer: over the Q-network's, the embedding's and RND predictor's parameters.
          betas, gammas: the policy family's (beta_j, gamma_j), j < N.
          retrace: learn transformed Retrace targets (the papers'); None: R2D2's transformed n-step
            double-Q targets (`n_step` steps).
          auxiliary_steps: K, the embedding and RND learn each sequence's last K transitions (o_{T-K-1}
            -> o_{T-K} .. o_{T-2} -> o_{T-1}; RND the K observations they arrive in), the paper's 5;
            0: every learned transition.
          r2d2_arguments: `r2d2.agent.R2d2`'s (burn_in, batch_size, ..., device) but its discount:
            each sequence is learned with its own policy's gamma_j.
        """
        if len(betas) != len(gammas):
            raise ValueError(f"{len(betas)} betas but {len(gammas)} gammas")
        super().__init__(
            network=networks.q, optimizer=optimizer, replay=replay, discount=None, **r2d2_arguments
        )
        self._networks = networks
        self._betas = torch.tensor(betas, dtype=torch.float32, device=self._device)
        self._gammas = torch.tensor(gammas, dtype=torch.float32, device=self._device)
        self._retrace = retrace
        self._auxiliary_steps = auxiliary_steps

    @property
    def shared_module(self) -> nn.Module:
        return self._networks

    @property
    def networks(self) -> NguNetworks:
        return self._networks

    @property
    def target_q(self) -> nn.Module:
        return self._target_network

    def learn(self, payloads: list[NguMessage]) -> None:
        """Each message's actor memory row and RND statistics first, then R2D2's: store every block and
        take the gradient steps owed."""
        for message in payloads:
            self._networks.actor_memory.write(message.block.actor_index, message.actor_state)
            self._observe_novelty(message.block.observation)
        super().learn([message.block for message in payloads])

    @torch.no_grad()
    def _observe_novelty(self, observation: np.ndarray) -> None:
        """RND's observation statistics, then its error statistics, from every step received once."""
        x = torch.as_tensor(observation, device=self._device)
        if self._networks.rnd.is_image:
            x = x[:, None]  # [P, 1, H, W]: blocks carry the newest frame only
        self._networks.rnd.update_statistics(x)
        prediction, target = self._networks.rnd(x)
        self._networks.rnd_error.update((prediction - target).square().mean(-1))

    def q_loss(self, data: SequenceTensors) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """(per-sequence loss [B], |td| [L, B] for priorities, mask [L, B], statistics) of NGU's one
        Q-network, learned with r^e + beta_j r^i and gamma_j of each sequence's policy."""
        b = self._burn_in
        q_online, q_target = sequence_q_values(
            self._networks.q, self._target_network, data.inputs, data.first, data.stored_state, b
        )
        reward, discount = policy_reward_and_discount(
            data.extrinsic_reward[b + 1 :],
            data.intrinsic_reward[b + 1 :],
            data.terminated[b + 1 :],
            data.policy_index[b + 1 :],
            self._betas,
            self._gammas,
        )
        if self._retrace is None:
            extra = r2d2_td_errors(
                q_online,
                q_target,
                data.action[b:-1],
                reward,
                discount,
                ~data.first[b + 1 :],
                self._n_step,
                self._rescaling_eps,
            )
        else:
            extra = retrace_td_errors(
                q_online,
                q_target,
                epsilon_greedy_probabilities(q_online.detach(), self._retrace.target_epsilon),
                data.action[b:-1],
                reward,
                discount,
                ~data.first[b + 1 :],
                data.behaviour_probability[b:-1],
                self._retrace.lambda_,
                self._rescaling_eps,
            )
        per_sequence = 0.5 * extra.td_error.square().sum(0) / extra.mask.sum(0).clamp(min=1.0)
        mean_target = (extra.target * extra.mask).sum().item() / max(extra.mask.sum().item(), 1.0)
        return per_sequence, extra.td_error.detach().abs(), extra.mask, {"mean_target": mean_target}

    def embedding_and_rnd_losses(self, data: SequenceTensors) -> tuple[torch.Tensor, torch.Tensor]:
        """`auxiliary_losses` on the last `auxiliary_steps` transitions of each sequence (0: every learned one)."""
        k = self._auxiliary_steps or data.action.shape[0] - 1 - self._burn_in
        return auxiliary_losses(
            self._networks, data.inputs.observation[-k - 1 :], data.action[-k - 1 : -1], ~data.first[-k:]
        )

    def gradient_step(self) -> None:
        batch = self._replay.sample(self._batch_size, self._importance_sampling_exponent)
        data = sequence_tensors(batch, self._device)
        per_sequence, abs_td, mask, q_statistics = self.q_loss(data)
        q_loss = (data.weights * per_sequence).mean()
        inverse_loss, rnd_loss = self.embedding_and_rnd_losses(data)
        loss = q_loss + inverse_loss + rnd_loss
        # Each network's gradient clipped on its own; the logged norm is that of all three, before clipping.
        step = optimization.gradient_step(
            loss,
            self._optimizer,
            list(self._networks.trained_parameter_groups().values()),
            self._max_grad_norm,
            self._learner_steps + 1,
        )
        value = step.loss
        self._learner_steps += 1
        if self._learner_steps % self._target_network_update_period == 0:
            self._target_network.load_state_dict(self._networks.q.state_dict())

        has_loss = mask.sum(0) > 0
        priority_mask = torch.where(has_loss[None, :], mask, torch.ones_like(mask))
        priorities = value_learning.sequence_priorities(abs_td, priority_mask, self._priority_eta)
        self._replay.update_priorities(batch.indices, priorities.cpu().numpy())
        self._statistics = {
            "loss": value,
            "grad_norm": step.grad_norm,
            "q_loss": q_loss.item(),
            "inverse_dynamics_loss": inverse_loss.item(),
            "rnd_loss": rnd_loss.item(),
            "mean_priority": priorities.mean().item(),
            "rnd_error_mean": float(self._networks.rnd_error.mean),
            **q_statistics,
        }

    def state_dict(self) -> dict:
        """Networks with every normaliser and the actors' memory (bandit included), target, optimizer,
        counters; not the replay's contents (a resumed run refills it, as the other replay agents).
        R2D2's dict with its `network` (here `networks.q`) widened to `networks`, `target_network` named
        `target_q`: NGU's checkpoint layout."""
        state = super().state_dict()
        del state["network"]
        return {"networks": self._networks.state_dict(), "target_q": state.pop("target_network"), **state}

    def load_state_dict(self, state: dict) -> None:
        check_resumable(self._networks.state_dict(), state["networks"])
        self._networks.load_state_dict(state["networks"])
        rest = {name: value for name, value in state.items() if name not in ("networks", "target_q")}
        super().load_state_dict(
            {**rest, "network": self._networks.q.state_dict(), "target_network": state["target_q"]}
        )
