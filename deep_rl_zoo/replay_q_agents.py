"""What the eight replay-based Q agents (DQN, Double DQN, Prioritized DQN, C51, Rainbow, QR-DQN, IQN,
DRQN) share: their common flags and checks, the building of their replay, schedules and optimiser,
and the rebuilding of a trained network from a checkpoint. The algorithms themselves (acting and
learning) stay in each `<agent>/agent.py`; each `<agent>/train.py` declares the agent's own flags and
calls these functions in `build_agents`.

    config:   RunConfig -> ReplayQConfig -> EpsilonGreedyConfig -> DqnConfig, QrDqnConfig, ...
                                        -> RainbowConfig (noisy layers explore: no epsilon)
    build:    build_network(config, ...) -> learner_arguments + transition_storage / sequence_storage
              + epsilon_schedule / importance_sampling_schedule -> agent.<Agent>(...)
    evaluate: trained_config(checkpoint) -> load_network -> a greedy actor
"""

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from deep_rl_zoo import optimization, run_support
from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo.config import RunConfig, field
from deep_rl_zoo.errors import require
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
    checkpoint_replay: bool = run_support.checkpoint_replay_field()
    hidden_sizes: tuple[int, ...] = field((128, 128), "Hidden layer sizes of the MLP (classic control).")

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


# --- Rebuilding a trained network


def trained_config(
    config_class: type[_C],
    checkpoint: Mapping | None,
    old_checkpoint_defaults: Mapping[str, Any] | None = None,
) -> _C:
    """The config a checkpoint was trained with: its saved values over `config_class`'s defaults, or
    the defaults when there is no checkpoint. `old_checkpoint_defaults` gives the value of a field that
    checkpoints saved before it existed must get (when that is not today's default)."""
    if checkpoint is None:
        return config_class()
    saved = {**(old_checkpoint_defaults or {}), **checkpoint["config"]}
    names = {f.name for f in dataclasses.fields(config_class)}
    return config_class(**{name: value for name, value in saved.items() if name in names})


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


# --- Acting in several envs at once (--num_envs)


class ReplayQActing:
    """The acting half every replay Q agent (DQN to IQN, not DRQN) shares.

    `step_batch` takes one timestep of each of N envs (`--num_envs`): it counts the env steps they
    complete, chooses the N actions with one batched forward (`_choose_actions`, the one part each agent
    writes itself), stores env i's transitions through replay stream i and takes the gradient steps now
    due (one per `_learn_interval` env steps, once the replay holds `_min_replay_size`). `step` is the
    same for a single env. A subclass sets `_writer`, `_env_steps`, `_learn_interval` and
    `_min_replay_size` and defines `_choose_actions(observations [N, ...], env_steps)` and `_learn()`.
    """

    _writer: replay_lib.TransitionWriter
    _env_steps: int
    _learn_interval: int
    _min_replay_size: int

    def _choose_actions(self, observations: np.ndarray, env_steps: int) -> np.ndarray:
        raise NotImplementedError

    def _learn(self) -> None:
        raise NotImplementedError

    def step(self, timestep: TimeStep) -> int:
        """Stores what `timestep` completes, learns when due, and returns the agent's action."""
        return int(self.step_batch([timestep])[0])

    def step_batch(self, timesteps: Sequence[TimeStep]) -> np.ndarray:
        actions, self._env_steps, gradient_steps = act_and_store(
            timesteps,
            self._writer,
            self._env_steps,
            self._choose_actions,
            self._learn_interval,
            self._min_replay_size,
        )
        for _ in range(gradient_steps):
            self._learn()
        return actions

    def reset(self) -> None:
        self._writer.reset()

    @property
    def replay_writer(self) -> replay_lib.TransitionWriter:
        """The replay and frame store, which `--checkpoint_replay` saves beside the checkpoint."""
        return self._writer


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
    env_steps += sum(not timestep.first for timestep in timesteps)
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
