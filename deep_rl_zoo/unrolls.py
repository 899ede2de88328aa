"""Unrolls of on-policy actor-critic agents (A2C, A2C-grad, PPO): the actor that collects them in its
own process, and the learner-side helpers that batch them and turn them into advantages.

An unroll is T + 1 consecutive timesteps of one actor; consecutive unrolls share their end points
(the last timestep of one is the first of the next), so no transition is lost between them:

    index        0      1      2      3      4         (T = 4)
    timestep     s_0    s_1    s_2    s_3    s_4 = s_0 of the next unroll
    action       a_0    a_1    a_2    a_3    -         (a_t is chosen in s_t)
    reward       r_1    r_2    r_3    r_4              (received on arriving in s_{t+1})
    valid        yes    yes    no     yes              (pair t is a transition unless s_t was last)
                               ^ s_2 ended the episode (terminated or truncated); s_3 is a reset

Pair t (s_t, a_t, r_{t+1}, s_{t+1}) is a transition only when s_t did not end an episode; the pair
from an episode's last state to the next episode's first state is masked out of every loss. A
time-limit truncation at s_{t+1} still bootstraps from V(s_{t+1}), the cut-off state itself, which
the unroll holds.
"""

import warnings
from typing import Any, NamedTuple, Protocol

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from deep_rl_zoo import multistep
from deep_rl_zoo.networks import common, numpy_policy
from deep_rl_zoo.networks import policy as policy_networks
from deep_rl_zoo.normalizers import NormalizedNetwork
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.types_ import TimeStep


class Unroll(NamedTuple):
    """What an actor sends to the learner (numpy arrays, cheap to pickle)."""

    actor_index: int  # (the parameters that chose its actions: the ActorMessage's parameter_version)
    observation: np.ndarray  # [T + 1, *observation_shape], s_0 ... s_T
    action: np.ndarray  # [T] int64 or [T, D] float32 (unclipped Gaussian samples), a_t in s_t
    reward: np.ndarray  # [T] float32, r_{t+1}
    terminated: np.ndarray  # [T] bool, s_{t+1} is terminal
    truncated: np.ndarray  # [T] bool, s_{t+1} was cut by a time limit
    valid: np.ndarray  # [T] bool, s_t did not end an episode (so pair t is a transition)
    # Sent only by actors built with `record_behaviour=True` (off-policy correction, recurrent policies):
    first: np.ndarray | None = None  # [T + 1] bool, s_t starts an episode (a recurrent state resets)
    behaviour_logits: np.ndarray | None = None  # [T] + [A] float32, the acting policy's logits in s_t
    core_state: tuple = ()  # the recurrent state before s_0 (e.g. LSTM (h, c), each [H]); () if none


class ActingPolicy(Protocol):
    """How an unroll actor evaluates its policy on one observation."""

    def __call__(self, observation: np.ndarray, first: bool) -> Any:
        """Logits [A] (float64 is fine), or (mean [D], log_std [D]) of a Gaussian, in s_t."""

    def state(self) -> tuple:
        """The recurrent state before the next observation, as numpy arrays; () for feed-forward."""


class FeedForwardPolicy:
    """`ActingPolicy` of a feed-forward module: its numpy mirror for small MLPs (~10x faster than torch
    for one observation), else the torch module recorded by `torch.jit.trace`."""

    def __init__(
        self, policy: nn.Module, continuous: bool, observation_space: gym.Space, device: torch.device
    ):
        self._forward = numpy_policy.policy_forward(policy)
        self._module = _ActionParameters(policy, continuous).eval()
        if self._forward is None:
            self._traced = _traced_policy(policy, continuous, observation_space, device)
            self._forward = self._run_traced
        self._continuous = continuous
        self._device = device

    def __call__(self, observation: np.ndarray, first: bool) -> Any:
        return self._forward(observation)

    @torch.inference_mode()
    def batch(self, observations: np.ndarray) -> Any:
        """Logits [N, A], or (mean [N, D], log_std [N, D]), for N observations (one per env) at once:
        one torch forward (the numpy mirror's advantage is per-call overhead, which a batch shares)."""
        output = self._module(torch.as_tensor(observations, device=self._device))
        if self._continuous:
            mean, log_std = output[0].cpu().numpy(), output[1].cpu().numpy()
            return mean, np.broadcast_to(log_std, mean.shape)
        return output.cpu().numpy()

    def state(self) -> tuple:
        return ()

    @torch.inference_mode()
    def _run_traced(self, observation: np.ndarray) -> Any:
        """The traced policy's output for one observation, as numpy arrays without the batch axis."""
        output = self._traced(torch.as_tensor(observation, device=self._device).unsqueeze(0))
        if self._continuous:
            return output[0][0].cpu().numpy(), output[1][0].cpu().numpy()
        return output[0].cpu().numpy()


def is_continuous(action_space: gym.Space) -> bool:
    return isinstance(action_space, gym.spaces.Box)


def observation_dtype(observation_space: gym.Space) -> np.dtype:
    """uint8 frames stay bytes (the network scales them); everything else travels as float32."""
    return (
        np.dtype(np.uint8) if common.is_image_observation(observation_space.shape) else np.dtype(np.float32)
    )


class _EnvUnroll:
    """What one env has collected of the unroll being built (lists of the `Unroll` fields)."""

    def __init__(self, core_state: tuple = ()):
        self.core_state = core_state
        self.observations: list[np.ndarray] = []
        self.first: list[bool] = []
        self.actions: list[Any] = []
        self.logits: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.terminated: list[bool] = []
        self.truncated: list[bool] = []
        self.valid: list[bool] = []


class UnrollActor:
    """Acts by sampling the policy and sends each unroll of T steps; what follows a send depends on
    the algorithm:

    - `wait_for_parameters=True` (synchronous A2C and PPO): wait for new parameters, so every unroll is
      collected with the parameters the learner holds when it learns from it (strictly on-policy);
    - `wait_for_parameters=False` (IMPALA, SAC): take newer parameters if any were published, and go on.

    `process_unrolls` may replace the unrolls of a send (the one unroll, or one per env) by what is
    actually sent (A2C-grad sends one gradient computed from all of them). The actor is used by every
    distributed agent; IMPALA passes its recurrent `ActingPolicy`.

    With `--num_envs` = N > 1 the actor steps N envs (`step_batch`, one batched forward per round) and
    keeps one unroll per env; every T rounds it sends the N unrolls in one message (a list), env i's
    with `actor_index = actor * N + i`, so the learner batches them as [T, actors * N] exactly as it
    batches one-env actors' unrolls (and per-actor state, e.g. reward scaling, is kept per env).
    """

    def __init__(
        self,
        *,
        policy: "nn.Module | ActingPolicy",
        link: LearnerLink,
        action_space: gym.Space,
        observation_space: gym.Space,
        unroll_length: int,
        rng: np.random.Generator,
        device: torch.device,
        agent_name: str,
        wait_for_parameters: bool = True,
        record_behaviour: bool = False,
        process_unrolls: Any = None,
    ):
        """
        Args:
          policy: a module returning `pi_logits` [1, A] or `mean`, `log_std` [1, D] for one observation
            (the actor's copy of the learner's network, or the policy part of it: acting needs no
            critic), or an `ActingPolicy` (recurrent policies).
          link: where unrolls go and new parameters come from.
          rng: draws the actions.
          wait_for_parameters: after each send, wait for new parameters (else only take them if any).
          record_behaviour: also send the `first` flags, the behaviour logits (discrete actions) and the
            recurrent state before each unroll.
          process_unrolls: turns the list of unrolls finished together (one per env) into what is sent
            (default: the unrolls themselves).
        """
        self.agent_name = agent_name
        self._link = link
        self._continuous = is_continuous(action_space)
        if isinstance(policy, nn.Module):
            policy = FeedForwardPolicy(policy, self._continuous, observation_space, device)
        self._policy = policy
        self._action_low = getattr(action_space, "low", None)
        self._action_high = getattr(action_space, "high", None)
        self._unroll_length = unroll_length
        self._rng = rng
        self._wait_for_parameters = wait_for_parameters
        self._record_behaviour = record_behaviour
        self._process_unrolls = process_unrolls
        self._observation_dtype = observation_dtype(observation_space)
        self._no_action = np.zeros(action_space.shape, np.float32) if self._continuous else 0
        self._no_logits = None if self._continuous else np.zeros(int(action_space.n), np.float32)
        self._batched = False  # step_batch was called: unrolls go out as a list, one per env
        self._envs: list[_EnvUnroll] = []

    def step(self, timestep: TimeStep) -> int | np.ndarray:
        return self._step([timestep], self._sample_one)[0]

    def step_batch(self, timesteps: list[TimeStep]) -> list[int | np.ndarray]:
        """`step` for one timestep of each of N envs, with one batched forward of the policy."""
        if not hasattr(self._policy, "batch"):
            raise ValueError(f"{self.agent_name}'s acting policy takes one observation at a time")
        self._batched = True
        return self._step(timesteps, self._sample_batch)

    def _step(self, timesteps: list[TimeStep], sample: Any) -> list[int | np.ndarray]:
        if not self._envs:
            core_state = self._policy.state() if self._record_behaviour else ()
            self._envs = [_EnvUnroll(core_state) for _ in timesteps]
        for env, timestep in zip(self._envs, timesteps, strict=True):
            if env.observations:  # timestep completes the pair that started at the previous one
                env.rewards.append(float(timestep.reward))
                env.terminated.append(timestep.terminated)
                env.truncated.append(timestep.truncated)
            env.observations.append(np.asarray(timestep.observation, dtype=self._observation_dtype))
            env.first.append(timestep.first)
        if len(self._envs[0].observations) == self._unroll_length + 1:  # the envs go in lockstep
            self._send()
        acting = [i for i, timestep in enumerate(timesteps) if not timestep.last]
        sampled = iter(sample([self._envs[i] for i in acting]) if acting else [])
        actions = []
        for env, timestep in zip(self._envs, timesteps, strict=True):
            env.valid.append(not timestep.last)
            if timestep.last:  # the env resets next; this action is never used
                env.actions.append(self._no_action)
                env.logits.append(self._no_logits)
                actions.append(self._no_action)
                continue
            action, logits = next(sampled)
            env.actions.append(action)
            if self._record_behaviour and logits is not None:
                env.logits.append(logits)
            actions.append(
                np.clip(action, self._action_low, self._action_high) if self._continuous else action
            )
        return actions

    def _unroll(self, env: _EnvUnroll, actor_index: int) -> Unroll:
        extras = {}
        if self._record_behaviour:
            extras = dict(
                first=np.asarray(env.first, dtype=bool),
                behaviour_logits=None if self._continuous else np.stack(env.logits),
                core_state=env.core_state,
            )
        return Unroll(
            actor_index=actor_index,
            observation=np.stack(env.observations),
            action=np.asarray(env.actions, dtype=np.float32 if self._continuous else np.int64),
            reward=np.asarray(env.rewards, dtype=np.float32),
            terminated=np.asarray(env.terminated, dtype=bool),
            truncated=np.asarray(env.truncated, dtype=bool),
            valid=np.asarray(env.valid, dtype=bool),
            **extras,
        )

    def _send(self) -> None:
        num_envs = len(self._envs)
        unrolls = [
            self._unroll(env, self._link.actor_index * num_envs + i) for i, env in enumerate(self._envs)
        ]
        # The next unroll starts at s_T, whose recurrent state is the one before the policy reads s_T.
        core_state = self._policy.state() if self._record_behaviour else ()
        for i, env in enumerate(self._envs):
            self._envs[i] = _EnvUnroll(core_state)
            self._envs[i].observations.append(env.observations[-1])
            self._envs[i].first.append(env.first[-1])
        if self._process_unrolls is not None:
            self._link.send(self._process_unrolls(unrolls))
        else:
            self._link.send(unrolls if self._batched else unrolls[0])
        if self._wait_for_parameters:
            self._link.wait_for_new_parameters()
        else:
            self._link.pull_parameters()

    def _sample_one(self, envs: list[_EnvUnroll]) -> list[tuple[Any, np.ndarray | None]]:
        # Sampled in numpy: for one observation, torch.distributions' per-call overhead would cost more
        # than the whole network.
        (env,) = envs
        output = self._policy(env.observations[-1], env.first[-1])
        if self._continuous:
            mean, std = output[0], np.exp(output[1])
            return [((mean + std * self._rng.standard_normal(mean.shape)).astype(np.float32), None)]
        logits = output.astype(np.float64)
        cumulative = np.cumsum(np.exp(logits - logits.max()))
        action = int(np.searchsorted(cumulative, self._rng.random() * cumulative[-1], side="right"))
        return [(action, logits.astype(np.float32))]

    def _sample_batch(self, envs: list[_EnvUnroll]) -> list[tuple[Any, np.ndarray | None]]:
        """`_sample_one` for several envs: one forward, one draw of the generator per env."""
        output = self._policy.batch(np.stack([env.observations[-1] for env in envs]))
        if self._continuous:
            mean, std = output[0], np.exp(output[1])
            noise = self._rng.standard_normal(mean.shape)
            return [((mean[k] + std[k] * noise[k]).astype(np.float32), None) for k in range(len(envs))]
        logits = output.astype(np.float64)
        cumulative = np.cumsum(np.exp(logits - logits.max(axis=1, keepdims=True)), axis=1)
        targets = self._rng.random(len(envs)) * cumulative[:, -1]
        actions = (cumulative <= targets[:, None]).sum(axis=1)  # searchsorted(..., side="right") per row
        return [(int(actions[k]), logits[k].astype(np.float32)) for k in range(len(envs))]

    def reset(self) -> None:
        pass  # episodes follow each other inside unrolls, marked by `valid` (and `first`)

    @property
    def statistics(self) -> dict[str, float]:
        return {"parameter_version": self._link.parameter_version}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class _ActionParameters(nn.Module):
    """A policy's output as plain tensors, which `torch.jit.trace` can record: the logits, or the
    Gaussian's (mean, log_std)."""

    def __init__(self, policy: nn.Module, continuous: bool):
        super().__init__()
        self.policy = policy
        self.continuous = continuous

    def forward(self, x: torch.Tensor):
        output = self.policy(x)
        return (output.mean, output.log_std) if self.continuous else output.pi_logits


def _traced_policy(
    policy: nn.Module, continuous: bool, observation_space: gym.Space, device: torch.device
) -> nn.Module:
    """The policy recorded by `torch.jit.trace`: for one observation at a time, Python's per-module
    overhead costs more than the arithmetic, and the recorded graph skips it (about 2.5x faster for
    the classic-control MLP). The trace keeps the module's own parameter tensors (it is not frozen),
    so parameters copied into `policy` later are used.

    torch 2.13 marks `torch.jit.trace` deprecated (its successors compile for seconds per process); if
    a later torch drops it, the actor falls back to the plain module: slower, identical actions.
    """
    module = _ActionParameters(policy, continuous).eval()
    example = torch.zeros((1, *observation_space.shape), dtype=torch.float32, device=device)
    if observation_dtype(observation_space) == np.uint8:
        example = example.to(torch.uint8)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.trace(module, example, check_trace=False)
    except (AttributeError, RuntimeError):
        return module


class ClippedActionActor:
    """Clips a continuous actor's actions to the action space's bounds (the Gaussian's mean may leave
    them); passes discrete actions through."""

    def __init__(self, actor: Any, action_space: gym.Space):
        self._actor = actor
        self.agent_name = actor.agent_name
        self._space = action_space

    def step(self, timestep: TimeStep):
        action = self._actor.step(timestep)
        if is_continuous(self._space):
            return np.clip(action, self._space.low, self._space.high)
        return action

    def reset(self) -> None:
        self._actor.reset()

    @property
    def statistics(self) -> dict[str, float]:
        return self._actor.statistics

    def state_dict(self) -> dict:
        return self._actor.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self._actor.load_state_dict(state)


# --- Learner side ---


class UnrollBatch(NamedTuple):
    """Unrolls of B actors stacked time-major, as tensors on the learner's device."""

    observation: torch.Tensor  # [T + 1, B, ...]
    action: torch.Tensor  # [T, B] or [T, B, D]
    reward: torch.Tensor  # [T, B]
    terminated: torch.Tensor  # [T, B] bool
    truncated: torch.Tensor  # [T, B] bool
    valid: torch.Tensor  # [T, B] bool


def stack_unrolls(unrolls: list[Unroll], rewards: list[np.ndarray], device: torch.device) -> UnrollBatch:
    """Stacks unrolls along a new batch axis 1. `rewards` replaces each unroll's rewards (e.g. scaled)."""
    lengths = {len(u.reward) for u in unrolls}
    if len(lengths) != 1:
        raise ValueError(f"unrolls of different lengths {sorted(lengths)}")

    def stack(arrays: list[np.ndarray]) -> torch.Tensor:
        return torch.as_tensor(np.stack(arrays, axis=1), device=device)

    return UnrollBatch(
        observation=stack([u.observation for u in unrolls]),
        action=stack([u.action for u in unrolls]),
        reward=stack([np.asarray(r, dtype=np.float32) for r in rewards]),
        terminated=stack([u.terminated for u in unrolls]),
        truncated=stack([u.truncated for u in unrolls]),
        valid=stack([u.valid for u in unrolls]),
    )


def advantages_and_returns(
    batch: UnrollBatch, values: torch.Tensor, discount: float, lambda_: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE advantages and lambda-return targets [T, B] of an unroll batch (garbage where not valid).

    Episode ends inside the unroll become a zero discount; at a time-limit truncation the bootstrap
    gamma * V(s_{t+1}) of the cut-off state is folded into the reward instead, as `multistep`
    prescribes, so a truncation bootstraps while a termination does not:

        r'_t        = r_{t+1} + gamma * V(s_{t+1})   if s_{t+1} was truncated (and not terminated)
        discount'_t = 0 if s_{t+1} ended the episode, else gamma
        A_t         = GAE(r', discount', lambda, V);   target_t = A_t + V(s_t)

    Args:
      batch: the unrolls; rewards already scaled if the agent scales them.
      values: V(s_0) ... V(s_T), [T + 1, B].
      discount: gamma.
      lambda_: GAE's lambda; 1 gives n-step returns bootstrapped at the end of the unroll (A2C).
    """
    with torch.no_grad():
        ended = batch.terminated | batch.truncated
        bootstrap_at_truncation = (batch.truncated & ~batch.terminated).float() * discount * values[1:]
        r_t = batch.reward + bootstrap_at_truncation
        discount_t = discount * (~ended).float()
        advantages = multistep.generalized_advantage_estimation(r_t, discount_t, lambda_, values)
        return advantages, advantages + values[:-1]


def pairs_log_prob(output: NamedTuple, action: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """log pi(a_t | s_t) of the valid pairs, read off a network output over s_0 .. s_T.

    PPO's learners run one no-grad forward over all T + 1 steps of a batch for the critic's values; pi_old
    comes from the same output, so it costs no second forward (about a tenth of an Atari update).

    Args:
      output: the network's output, each field [(T + 1) * B, ...] (time-major, flattened); the last B
        rows (s_T) have no action.
      action: the valid pairs' actions, [N] or [N, D].
      valid: which of the T * B pairs count, [T * B] bool (N of them true).
    """
    pairs = type(output)(*(field[: valid.shape[0]][valid] for field in output))
    return pairs.distribution().log_prob(action)


def evaluate_actions(
    network: nn.Module, observation: torch.Tensor, action: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """log pi(a|s), entropy of pi(.|s) and V(s) for a flat batch [N, ...] of observations and actions."""
    output = network(observation)
    distribution = output.distribution()
    return distribution.log_prob(action), distribution.entropy(), output.value


def policy_part(network: NormalizedNetwork) -> nn.Module:
    """What an actor needs to act: the policy alone when the critic has its own torso (half the work)."""
    inner = network.network
    if isinstance(inner, (policy_networks.SeparateActorCritic, policy_networks.GaussianActorCritic)):
        return NormalizedNetwork(inner.actor, network.normalizer)  # shares the very same parameters
    return network
