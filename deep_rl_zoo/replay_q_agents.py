"""What the eight replay-based Q agents (DQN, Double DQN, Prioritized DQN, C51, Rainbow, QR-DQN, IQN,
DRQN) share: their common flags and checks, the building of their replay, schedules and optimiser,
the rebuilding of a trained network from a checkpoint, and (all but DRQN, whose sequence replay and
recurrent state are its own) the agent around the algorithm: acting, storing, the gradient step and
target copies, statistics and checkpoint state (`ReplayQAgent`). The algorithms themselves (each
loss, Rainbow's noisy acting) stay in each `<agent>/agent.py`; each `<agent>/train.py` declares the
agent's own flags and calls these functions in `build_agents` (the five epsilon-greedy agents with
plain feed-forward acting through `build_epsilon_greedy_agents`).

    config:   RunConfig -> ReplayQConfig -> EpsilonGreedyConfig -> DqnConfig, QrDqnConfig, ...
                                        -> RainbowConfig (noisy layers explore: no epsilon)
    build:    build_network(config, ...) -> learner_arguments + transition_storage / sequence_storage
              + epsilon_schedule / importance_sampling_schedule -> agent.<Agent>(...)
              (build_epsilon_greedy_agents: all of it, plus the evaluation actor)
    evaluate: config.trained_config(checkpoint) -> load_network -> a greedy actor
    agent:    ReplayQAgent -> dqn.agent.Dqn, ..., rainbow.agent.Rainbow (each writes its `_learn`)
"""

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from deep_rl_zoo import checkpoint as checkpoint_lib
from deep_rl_zoo import evaluation, optimization, run_folders, training
from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo.config import QEvalConfig, RunConfig, field, trained_config
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import EpsilonGreedyActor, epsilon_greedy_actions
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.sequence_replay import SequenceReplay
from deep_rl_zoo.types_ import TimeStep

_C = TypeVar("_C", bound="ReplayQConfig")


@dataclasses.dataclass(frozen=True)
class ReplayQConfig(RunConfig):
    """The flags every replay-based Q agent has. The defaults are DQN's classic-control ones (see
    `dqn.train.DqnConfig`); an agent tuned differently redeclares the field with its own default."""

    replay_capacity: int = field(50_000, "Transitions the replay holds.")
    min_replay_size: int = field(1000, "Transitions collected before learning starts.")
    batch_size: int = field(128, "Transitions per gradient step.")
    learning_rate: float = field(2e-3, "Adam learning rate.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    n_step: int = field(1, "Steps of the bootstrapped return (1 is the DQN of the paper).")
    learn_interval: int = field(4, "Env steps between two gradient steps.")
    target_network_update_period: int = field(125, "Gradient steps between two target-network copies.")
    max_grad_norm: float = field(10.0, "Clip the gradient's global norm to this; 0 disables.")
    checkpoint_replay: bool = run_folders.checkpoint_replay_field()
    hidden_sizes: tuple[int, ...] = field((128, 128), "Hidden layer sizes of the MLP (classic control).")
    overlap_learning: bool = field(
        False,
        "Take each due gradient step in a second thread while acting goes on (the same batches and "
        "gradient steps as without; actions use the parameters from before the step in flight). Slower than "
        "the serial loop on a 2-core CPU (docs/usage.md); --num_threads=0 then gives each thread one core.",
    )

    def auto_num_threads(self, cores: int) -> int:
        """With --overlap_learning the learner's thread and the acting thread each take one core."""
        if self.overlap_learning:
            return 1
        return super().auto_num_threads(cores)

    def __post_init__(self):
        super().__post_init__()
        for name in (
            "replay_capacity",
            "batch_size",
            "n_step",
            "learn_interval",
            "target_network_update_period",
        ):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        require(self.min_replay_size >= 0, f"--min_replay_size must be >= 0, got {self.min_replay_size}")
        require(
            self.batch_size <= self.replay_capacity,
            f"--batch_size={self.batch_size} is larger than --replay_capacity={self.replay_capacity}",
        )
        require(
            self.min_replay_size <= self.replay_capacity,
            f"--min_replay_size={self.min_replay_size} is larger than "
            f"--replay_capacity={self.replay_capacity}",
        )
        require(0.0 <= self.discount <= 1.0, f"--discount must be in [0, 1], got {self.discount}")
        require(self.learning_rate > 0, f"--learning_rate must be positive, got {self.learning_rate}")
        require(self.adam_eps > 0, f"--adam_eps must be positive, got {self.adam_eps}")
        require(self.max_grad_norm >= 0, f"--max_grad_norm must be >= 0, got {self.max_grad_norm}")


@dataclasses.dataclass(frozen=True)
class EpsilonGreedyConfig(ReplayQConfig):
    """`ReplayQConfig` and the epsilon-greedy exploration of every Q agent but Rainbow."""

    exploration_epsilon_begin_value: float = field(1.0, "Epsilon at the start of learning.")
    exploration_epsilon_end_value: float = field(0.01, "Epsilon after the decay.")
    exploration_epsilon_decay_steps: int = field(5000, "Env steps over which epsilon decays, after warm-up.")
    eval_exploration_epsilon: float = field(0.0, "Epsilon of the greedy evaluation.")

    def __post_init__(self):
        super().__post_init__()
        for name in (
            "exploration_epsilon_begin_value",
            "exploration_epsilon_end_value",
            "eval_exploration_epsilon",
        ):
            value = getattr(self, name)
            require(0.0 <= value <= 1.0, f"--{name} must be in [0, 1], got {value}")
        require(
            self.exploration_epsilon_decay_steps >= 0,
            f"--exploration_epsilon_decay_steps must be >= 0, got {self.exploration_epsilon_decay_steps}",
        )


def check_prioritized_replay(config) -> None:
    """The checks of the prioritized-replay flags (Prioritized DQN and Rainbow)."""
    require(
        config.priority_exponent >= 0, f"--priority_exponent must be >= 0, got {config.priority_exponent}"
    )
    for name in ("importance_sampling_exponent_begin_value", "importance_sampling_exponent_end_value"):
        value = getattr(config, name)
        require(0.0 <= value <= 1.0, f"--{name} must be in [0, 1], got {value}")
    require(
        config.importance_sampling_exponent_decay_steps >= 0,
        "--importance_sampling_exponent_decay_steps must be >= 0",
    )
    require(
        config.priority_epsilon > 0, f"--priority_epsilon must be positive, got {config.priority_epsilon}"
    )


def check_categorical_support(config) -> None:
    """The checks of the categorical-distribution flags (C51 and Rainbow)."""
    require(config.num_atoms >= 2, f"--num_atoms must be >= 2, got {config.num_atoms}")
    require(config.v_min < config.v_max, f"--v_min ({config.v_min}) must be below --v_max ({config.v_max})")


# --- Building an agent


def learner_arguments(config: ReplayQConfig, network: nn.Module, device: torch.device) -> dict[str, Any]:
    """The constructor arguments every Q agent's learner takes, straight from the config: the online
    network, its Adam optimiser, the warm-up, learning and target-copy periods, and the clip."""
    return dict(
        network=network,
        optimizer=optimization.adam(network.parameters(), config.learning_rate, config.adam_eps),
        min_replay_size=config.min_replay_size,
        learn_interval=config.learn_interval,
        batch_size=config.batch_size,
        target_network_update_period=config.target_network_update_period,
        max_grad_norm=config.max_grad_norm,
        device=device,
    )


def transition_storage(
    config: ReplayQConfig,
    observation_shape: tuple[int, ...],
    rng: np.random.Generator,
    prioritized: bool = False,
) -> dict[str, Any]:
    """The `replay`, `transition_accumulator` and `frame_store` arguments of an agent learning from
    n-step transitions. The replay's generator is drawn from `rng` (one draw)."""
    replay_rng = np.random.default_rng(rng.integers(2**63))
    if prioritized:
        replay = replay_lib.PrioritizedReplay(
            config.replay_capacity, priority_exponent=config.priority_exponent, rng=replay_rng
        )
    else:
        replay = replay_lib.UniformReplay(config.replay_capacity, rng=replay_rng)
    return dict(
        replay=replay,
        transition_accumulator=replay_lib.TransitionAccumulator(n=config.n_step, discount=config.discount),
        frame_store=replay_lib.frame_store_for(observation_shape, config.replay_capacity, config.n_step),
    )


def sequence_storage(
    config: ReplayQConfig, sequence_length: int, observation_shape: tuple[int, ...], rng: np.random.Generator
) -> dict[str, Any]:
    """The `replay` and `frame_store` arguments of an agent learning from sequences (DRQN). The
    replay's generator is drawn from `rng` (one draw)."""
    frame_store = None
    if len(observation_shape) == 3:
        # Atari: the replay stores frame handles; store and replay advance one step at a time
        # together, so the store needs the replay's span plus the frames before its oldest stack.
        frame_store = replay_lib.FrameStackStore(
            capacity=config.replay_capacity + observation_shape[0],
            frame_shape=tuple(observation_shape[1:]),
            stack_size=observation_shape[0],
        )
    replay = SequenceReplay(
        config.replay_capacity, sequence_length, rng=np.random.default_rng(rng.integers(2**63))
    )
    return dict(replay=replay, frame_store=frame_store)


def epsilon_schedule(config: EpsilonGreedyConfig) -> LinearSchedule:
    """Epsilon as a function of env steps: it decays once the warm-up ends."""
    return LinearSchedule(
        begin_value=config.exploration_epsilon_begin_value,
        end_value=config.exploration_epsilon_end_value,
        begin_t=config.min_replay_size,
        decay_steps=config.exploration_epsilon_decay_steps,
    )


def importance_sampling_schedule(config: ReplayQConfig) -> LinearSchedule:
    """beta of the prioritized replay as a function of env steps: it anneals once the warm-up ends."""
    return LinearSchedule(
        begin_value=config.importance_sampling_exponent_begin_value,
        end_value=config.importance_sampling_exponent_end_value,
        begin_t=config.min_replay_size,
        decay_steps=config.importance_sampling_exponent_decay_steps,
    )


def build_epsilon_greedy_agents(
    config: EpsilonGreedyConfig,
    env: gym.Env,
    device: torch.device,
    agent_class: type["ReplayQAgent"],
    build_network: Callable[[Any, tuple[int, ...], int], nn.Module],
    prioritized: bool = False,
    **agent_arguments: Any,
) -> training.Agents:
    """The learning agent of an epsilon-greedy Q agent (DQN, Double DQN, Prioritized DQN, C51, QR-DQN)
    and an evaluation actor sharing its online network.

    `agent_arguments` are the agent's own constructor arguments (a PER agent's beta schedule, QR-DQN's
    quantiles); the shared ones come from the config. One generator seeded with `config.seed` seeds the
    replay's generator, then the evaluation actor's, and the agent keeps it for its epsilon draws.
    """
    observation_shape = env.observation_space.shape
    num_actions = int(env.action_space.n)
    network = build_network(config, observation_shape, num_actions).to(device)
    rng = np.random.default_rng(config.seed)
    train_agent = agent_class(
        **learner_arguments(config, network, device),
        **transition_storage(config, observation_shape, rng, prioritized=prioritized),
        exploration_epsilon=epsilon_schedule(config),
        num_actions=num_actions,
        rng=rng,
        overlap_learning=config.overlap_learning,
        **agent_arguments,
    )
    eval_agent = EpsilonGreedyActor(
        network,
        num_actions,
        config.eval_exploration_epsilon,
        np.random.default_rng(rng.integers(2**63)),
        device,
        agent_class.agent_name,
    )
    return training.Agents(train_agent, eval_agent)


# --- Rebuilding a trained network


def load_network(
    build_network: Callable[[Any, tuple[int, ...], int], nn.Module],
    config: ReplayQConfig,
    checkpoint: Mapping | None,
    env: gym.Env,
    device: torch.device,
) -> nn.Module:
    """`build_network(config, observation_shape, num_actions)` with the checkpoint's online-network
    weights (untrained without a checkpoint), on `device`, in eval mode (noisy layers use their mean)."""
    network = build_network(config, env.observation_space.shape, int(env.action_space.n))
    if checkpoint is not None:
        network.load_state_dict(checkpoint["agent"]["network"])
    return network.to(device).eval()


def load_trained_network(
    checkpoint_path: str,
    env: gym.Env,
    agent_name: str,
    config_class: type[ReplayQConfig],
    build_network: Callable[[Any, tuple[int, ...], int], nn.Module],
    device: str | torch.device = "cpu",
) -> nn.Module:
    """The online network a checkpoint file holds, rebuilt with the config it was trained with, for
    `env` (made as the run made its envs, so its observations are preprocessed alike), in eval mode.
    Raises CheckpointError when the file is not `agent_name`'s for this env."""
    environment_id = env.spec.id if env.spec is not None else ""
    payload = checkpoint_lib.load_checkpoint(checkpoint_path, agent_name, environment_id)
    config = trained_config(config_class, payload)
    return load_network(build_network, config, payload, env, torch.device(device))


def evaluate_epsilon_greedy(
    config: QEvalConfig,
    config_class: type[ReplayQConfig],
    build_network: Callable[[Any, tuple[int, ...], int], nn.Module],
    agent_name: str,
) -> list[float]:
    """`eval_agent`'s main for a Q agent that acts greedily on its network's `q_values` (all but IQN,
    whose actions average sampled quantile fractions, and DRQN, whose network is recurrent): rebuilds
    the network the checkpoint was trained with and plays it at --eval_exploration_epsilon."""

    def build_actor(env: gym.Env, device: torch.device, checkpoint: Mapping | None) -> EpsilonGreedyActor:
        train_config = trained_config(config_class, checkpoint)
        network = load_network(build_network, train_config, checkpoint, env, device)
        epsilon = evaluation.eval_exploration_epsilon(config)
        rng = np.random.default_rng(config.seed)
        return EpsilonGreedyActor(network, int(env.action_space.n), epsilon, rng, device, agent_name)

    return evaluation.evaluate(config, agent_name, build_actor)


# --- The agent around each algorithm


class ReplayQAgent:
    """What every replay Q agent but DRQN (DQN, Double DQN, Prioritized DQN, C51, QR-DQN, IQN, Rainbow)
    does around its algorithm, so that each `<agent>/agent.py` holds only what makes it that agent: the
    loss in `_learn` (and, for Rainbow, its noisy acting in `_choose_actions`).

    Acting: `step_batch` takes one timestep of each of N envs (`--num_envs`), counts the env steps they
    complete, chooses the N actions with one batched forward (`_choose_actions`: epsilon-greedy on
    `_acting_network` unless the agent writes its own), stores env i's transitions through replay
    stream i and takes the gradient steps now due (one per `learn_interval` env steps, once the replay
    holds `min_replay_size`). `step` is the same for a single env.

    Learning: the agent's `_learn()` samples a batch, computes its loss and hands that scalar to
    `_apply_gradient`, which clips and takes the optimiser step, counts it, and copies the online
    network into the target network every `target_network_update_period` gradient steps.

    `statistics` and `state_dict` cover what is shared; an agent adds its own keys to them.

    Overlapped learning (`overlap_learning=True`): once the replay holds `min_replay_size`, the gradient
    steps due at env step t run in a second thread while the agent goes on acting, and acting stores
    nothing meanwhile: the timesteps it gets are queued and written when the next gradient steps fall due
    (or anything reads the agent), after the thread has finished. So each gradient step samples the
    replay as it would be without overlap, priorities are updated in the same order, and with the same
    actions every gradient step is the same. The actions differ only in their parameters: they come from
    a copy of the online network refreshed when gradient steps are launched, so an action at t + 1 ..
    t + `learn_interval` misses the step(s) launched at t.

        env step        t-1      t          t+1       t+2       t+3       t+4
        main thread     act      act, write queue, copy online -> acting, launch | act ... (queue) ... act
        learner thread                      ------- sample, loss, step (the online network) -------|
    """

    agent_name: str

    def __init__(
        self,
        *,
        network: nn.Module,
        optimizer: torch.optim.Optimizer,
        replay: replay_lib.UniformReplay | replay_lib.PrioritizedReplay,
        transition_accumulator: replay_lib.TransitionAccumulator,
        min_replay_size: int,
        learn_interval: int,
        batch_size: int,
        target_network_update_period: int,
        max_grad_norm: float,
        device: torch.device,
        frame_store: replay_lib.FrameStackStore | None = None,
        exploration_epsilon: LinearSchedule | None = None,
        num_actions: int | None = None,
        rng: np.random.Generator | None = None,
        overlap_learning: bool = False,
    ):
        """
        Args:
          network: the online network; the target network starts as a copy of it.
          optimizer: over the online network's parameters.
          replay: stores `replay_lib.Transition`s (of frame handles when `frame_store` is given).
          transition_accumulator: makes the (n-step) transitions the replay stores.
          min_replay_size: transitions stored before learning starts (at least one batch).
          learn_interval: env steps between two gradient steps.
          batch_size: transitions per gradient step.
          target_network_update_period: gradient steps between two target-network copies.
          max_grad_norm: global gradient-norm clip; 0 disables.
          device: where the networks run.
          frame_store: for Atari, stores each frame once; observations in the replay are its handles.
          exploration_epsilon: epsilon as a function of env steps, for epsilon-greedy acting; None for an
            agent that explores otherwise and writes its own `_choose_actions` (Rainbow).
          num_actions: the number of actions epsilon-greedy acting chooses from.
          rng: the exploration's generator (saved in checkpoints).
          overlap_learning: take the gradient steps in a second thread while acting goes on (above).
        """
        if batch_size > replay.capacity:
            raise ValueError(f"batch_size {batch_size} is larger than the replay capacity {replay.capacity}")
        epsilon_greedy = type(self)._choose_actions is ReplayQAgent._choose_actions
        if epsilon_greedy and (exploration_epsilon is None or num_actions is None or rng is None):
            raise ValueError(
                f"{type(self).__name__} acts epsilon-greedily: it needs exploration_epsilon, num_actions and rng"
            )
        self._network = network
        # The network acting reads: the online one, or with overlapped learning a copy of it that the
        # learner thread never writes (`_acting_source`; an agent may wrap it, as IQN does).
        self._acting_source = copy.deepcopy(network).requires_grad_(False) if overlap_learning else network
        self._acting_network: Callable[[torch.Tensor], Any] = self._acting_source
        self._target_network = copy.deepcopy(network).requires_grad_(False)
        self._optimizer = optimizer
        self._replay = replay
        self._writer = replay_lib.TransitionWriter(replay, transition_accumulator, frame_store)
        self._exploration_epsilon = exploration_epsilon
        self._num_actions = num_actions
        self._rng = rng
        self._min_replay_size = max(min_replay_size, batch_size)
        self._learn_interval = learn_interval
        self._batch_size = batch_size
        self._target_network_update_period = target_network_update_period
        self._max_grad_norm = max_grad_norm
        self._device = device
        self._env_steps = 0
        self._learner_steps = 0
        self._last_loss = float("nan")
        self._last_grad_norm = float("nan")
        self._overlap = overlap_learning
        self._learner_thread = ThreadPoolExecutor(1, "learner") if overlap_learning else None
        self._in_flight: Future | None = None
        self._queued: list[tuple[TimeStep, int, int] | None] = []  # (timestep, action, stream); None: reset
        self._acted_env_steps = 0  # env steps acted; `_env_steps` lags it while timesteps are queued

    def _learn(self) -> None:
        """One gradient step: sample a batch, compute the loss, `_apply_gradient(loss)`."""
        raise NotImplementedError

    def _choose_actions(self, observations: np.ndarray, env_steps: int) -> np.ndarray:
        """Epsilon-greedy actions [N] for observations [N, ...], epsilon taken at `env_steps`."""
        return epsilon_greedy_actions(
            self._acting_network,
            observations,
            self._exploration_epsilon(env_steps),
            self._num_actions,
            self._rng,
            self._device,
        )

    @property
    def epsilon(self) -> float:
        return self._exploration_epsilon(self._env_steps)

    def _apply_gradient(self, loss: torch.Tensor) -> None:
        """Minimises `loss` (a scalar) by one clipped optimiser step of the online network, then
        refreshes the target network when this step completes a period."""
        self._last_loss, self._last_grad_norm = optimization.gradient_step(
            loss, self._optimizer, self._network.parameters(), self._max_grad_norm, self._learner_steps + 1
        )
        self._learner_steps += 1
        if self._learner_steps % self._target_network_update_period == 0:
            self._target_network.load_state_dict(self._network.state_dict())

    def step(self, timestep: TimeStep) -> int:
        """Stores what `timestep` completes, learns when due, and returns the agent's action."""
        return int(self.step_batch([timestep])[0])

    def step_batch(self, timesteps: Sequence[TimeStep]) -> np.ndarray:
        # Once the replay holds min_replay_size (it never shrinks), gradient steps are due by count alone.
        if self._overlap and self._replay.size >= self._min_replay_size:
            return self._step_overlapped(timesteps)
        actions, self._env_steps, gradient_steps = act_and_store(
            timesteps,
            self._writer,
            self._env_steps,
            self._choose_actions,
            self._learn_interval,
            self._min_replay_size,
        )
        self._acted_env_steps = self._env_steps
        if not self._overlap:
            for _ in range(gradient_steps):
                self._learn()
        elif gradient_steps:  # the first gradient steps of an overlapped run
            self._launch(gradient_steps)
        return actions

    def _step_overlapped(self, timesteps: Sequence[TimeStep]) -> np.ndarray:
        """`step_batch` once learning has begun with `overlap_learning`: act on the acting copy, queue
        the timesteps, and when gradient steps fall due wait for the thread, write the queue, launch."""
        env_steps_before = self._acted_env_steps
        self._acted_env_steps += completed_env_steps(timesteps)
        actions = self._choose_actions(
            np.stack([timestep.observation for timestep in timesteps]), self._acted_env_steps
        )
        for stream, (timestep, action) in enumerate(zip(timesteps, actions, strict=True)):
            # A copy: a vector env writes the next observations into the same arrays.
            self._queued.append(
                (timestep._replace(observation=timestep.observation.copy()), int(action), stream)
            )
        # The replay holds min_replay_size already (and never shrinks): one step per interval boundary.
        due = self._acted_env_steps // self._learn_interval - env_steps_before // self._learn_interval
        if due:
            self.finish_learning()
            self._launch(due)
        return actions

    def _launch(self, gradient_steps: int) -> None:
        """Refreshes the acting copy from the online network, then takes `gradient_steps` in the thread."""
        self._acting_source.load_state_dict(self._network.state_dict())

        def learn() -> None:
            for _ in range(gradient_steps):
                self._learn()

        self._in_flight = self._learner_thread.submit(learn)

    def finish_learning(self) -> None:
        """With overlapped learning: waits for the gradient steps in flight (raising what they raised),
        then writes the queued timesteps, so that the agent is as it would be without overlap. Anything
        that reads the online network, the replay or the counts calls it first; a no-op otherwise."""
        if self._in_flight is not None:
            in_flight, self._in_flight = self._in_flight, None
            in_flight.result()
        for item in self._queued:
            if item is None:
                self._writer.reset()
            else:
                self._writer.add(*item)
        self._queued.clear()
        self._env_steps = self._acted_env_steps

    def reset(self) -> None:
        if self._in_flight is not None or self._queued:
            self._queued.append(None)  # in order with the queued timesteps
        else:
            self._writer.reset()

    @property
    def replay_contents(self) -> replay_lib.TransitionWriter:
        """The replay and frame store, which `--checkpoint_replay` saves beside the checkpoint."""
        self.finish_learning()
        return self._writer

    @property
    def statistics(self) -> dict[str, float]:
        self.finish_learning()
        exploration = {} if self._exploration_epsilon is None else {"epsilon": self.epsilon}
        return {
            "loss": self._last_loss,
            "grad_norm": self._last_grad_norm,
            **exploration,
            "learner_steps": self._learner_steps,
            "replay_size": self._replay.size,
        }

    def state_dict(self) -> dict:
        self.finish_learning()
        exploration = {} if self._rng is None else {"rng": self._rng.bit_generator.state}
        return {
            "network": self._network.state_dict(),
            "target_network": self._target_network.state_dict(),
            "optimizer": self._optimizer.state_dict(),
            "env_steps": self._env_steps,
            "learner_steps": self._learner_steps,
            **exploration,
            "replay_rng": self._replay.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        self.finish_learning()
        self._network.load_state_dict(state["network"])
        if self._acting_source is not self._network:
            self._acting_source.load_state_dict(state["network"])
        self._target_network.load_state_dict(state["target_network"])
        self._optimizer.load_state_dict(state["optimizer"])
        self._env_steps = self._acted_env_steps = state["env_steps"]
        self._learner_steps = state["learner_steps"]
        if self._rng is not None:
            self._rng.bit_generator.state = state["rng"]
        self._replay.rng.bit_generator.state = state["replay_rng"]


def completed_env_steps(timesteps: Sequence[TimeStep]) -> int:
    """The env steps a batch of timesteps completes: one per env that is not at a first timestep."""
    return sum(not timestep.first for timestep in timesteps)


def act_and_store(
    timesteps: Sequence[TimeStep],
    writer: replay_lib.TransitionWriter,
    env_steps: int,
    choose_actions: Callable[[np.ndarray, int], np.ndarray],
    learn_interval: int,
    min_replay_size: int,
) -> tuple[np.ndarray, int, int]:
    """What every replay Q agent's `step_batch` does before learning: counts the env steps the
    timesteps complete (one per env that is not at a first timestep), chooses one action per env
    with `choose_actions(observations [N, ...], env_steps)` (one batched forward), and stores env i's
    timestep through the writer's stream i. Returns the actions [N], the new env step count and the
    gradient steps now due (`learning_steps_due`), which the agent takes after recording the count.

    With one env this is exactly a single-env agent's `step`: count, act, store, learn when due.
    """
    env_steps_before = env_steps
    env_steps += completed_env_steps(timesteps)
    actions = choose_actions(np.stack([timestep.observation for timestep in timesteps]), env_steps)
    for stream, (timestep, action) in enumerate(zip(timesteps, actions, strict=True)):
        writer.add(timestep, int(action), stream)
    due = learning_steps_due(env_steps_before, env_steps, learn_interval, writer.replay.size, min_replay_size)
    return actions, env_steps, due


def learning_steps_due(
    env_steps_before: int, env_steps: int, learn_interval: int, replay_size: int, min_replay_size: int
) -> int:
    """Gradient steps due after the env steps env_steps_before + 1 .. env_steps: one per multiple of
    `learn_interval` among them, once the replay holds `min_replay_size` transitions. So N envs keep
    the single env's one gradient step per `learn_interval` env steps, e.g. 8 envs and an interval of
    4 give 2 steps per round (8 // 4)."""
    if replay_size < min_replay_size:
        return 0
    return env_steps // learn_interval - env_steps_before // learn_interval
