"""R2D2's configuration, its learner and actor builders, and the `main` every run script shares."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import distributed, exploration, optimization
from deep_rl_zoo.config import field
from deep_rl_zoo.drqn.obscured import obscuring_wrapper
from deep_rl_zoo.errors import require
from deep_rl_zoo.networks import common
from deep_rl_zoo.networks.value import RecurrentQNetwork
from deep_rl_zoo.r2d2.agent import R2d2, R2d2Actor
from deep_rl_zoo.runtime import LearnerLink
from deep_rl_zoo.sequence_replay import PrioritizedSequenceReplay
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class R2d2Config(distributed.DistributedConfig):
    """R2D2 hyper-parameters. run_atari uses the paper's (Kapturowski et al. 2019, table 2); the defaults
    below are the classic-control ones, chosen here for CartPole-v1.

    Paper's settings kept everywhere: Ape-X epsilons 0.4^(1 + 7 i / (N - 1)), priority exponent 0.9,
    importance-sampling exponent 0.6, priorities 0.9 max + 0.1 mean |td|, 5-step double-Q targets with
    h(x) = sign(x)(sqrt(|x| + 1) - 1) + 0.001 x, burn-in from the stored LSTM state, a target copy every
    fixed number of gradient steps. Sequences are --burn_in steps, then --trace_length learned
    transitions, then the last transition's next observation (T = burn_in + trace_length + 1 steps), a new
    one every --replay_period steps of an actor (Atari: the paper's 40 + 80 + 1, a new one every 40, so
    each transition is learned in two sequences). The LSTM reads the previous action and reward.

    Classic control: burn-in 10, 9 learned transitions, a new sequence every 10 env steps (T = 20, so
    adjacent sequences overlap by half and each transition is learned in one sequence; one in 10, the
    last of each period, in none), in place of Atari's 40 + 80: a CartPole state is fully described by 4
    numbers, so there is little to remember beyond a few steps, and the learner's cost grows with the
    sequence length on a CPU; DRQN here solves CartPole with 8 burn-in + 8 learned steps. The network, learning
    rate and target period are those tuned for DRQN on CartPole (MLP 128, LSTM 128, ReLU 128 before the
    head, Adam 1e-3, discount 0.99).
    """

    learner_sets_the_pace = True  # a replay ratio: see DistributedConfig

    num_actors: int = field(4, "Actor processes, each with its own environment, network copy and epsilon.")
    burn_in: int = field(10, "Leading steps of each sequence that only warm up the stored LSTM state.")
    trace_length: int = field(9, "Transitions learned from in each sequence, after the burn-in.")
    replay_period: int = field(
        10, "Env steps between the starts of an actor's sequences (steps per block an actor sends)."
    )
    lstm_size: int = field(128, "Units of the LSTM layer.")
    hidden_sizes: tuple[int, ...] = field((128,), "Hidden layer sizes of the MLP before the LSTM (classic).")
    head_hidden_sizes: tuple[int, ...] = field((128,), "ReLU layers between the LSTM and the linear Q head.")
    replay_capacity: int = field(100_000, "Env steps the replay holds (kept across iterations).")
    min_replay_size: int = field(1_000, "Env steps stored before the first gradient step.")
    batch_size: int = field(32, "Sequences per gradient step.")
    updates_per_env_step: float = field(0.25, "Gradient steps per env step received (replay ratio).")
    learning_rate: float = field(1e-3, "Adam learning rate.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    n_step: int = field(5, "Steps of the bootstrapped return.")
    target_network_update_period: int = field(100, "Gradient steps between two target-network copies.")
    priority_exponent: float = field(0.9, "alpha: sequences are replayed in proportion to priority^alpha.")
    importance_sampling_exponent: float = field(0.6, "beta of the importance-sampling weights.")
    priority_eta: float = field(0.9, "A sequence's priority: eta max |td| + (1 - eta) mean |td|.")
    value_rescaling_eps: float = field(1e-3, "The linear term of the value rescaling h.")
    actor_epsilon: float = field(
        0.4, "Ape-X actor epsilons: actor_epsilon^(1 + actor_epsilon_alpha i / (N-1))."
    )
    actor_epsilon_alpha: float = field(7.0, "Ape-X actor epsilons' spread (see --actor_epsilon).")
    eval_exploration_epsilon: float = field(0.0, "Epsilon of the greedy evaluation.")
    max_grad_norm: float = field(10.0, "Clip the gradient's global norm to this; 0 disables.")
    obscure_probability: float = field(
        0.0, "Blank each new observation with this probability (DRQN's flickering games; 0.5 in the paper)."
    )

    def __post_init__(self):
        super().__post_init__()
        for name in (
            "trace_length",
            "replay_period",
            "lstm_size",
            "replay_capacity",
            "batch_size",
            "updates_per_env_step",
            "learning_rate",
            "n_step",
            "target_network_update_period",
            "value_rescaling_eps",
        ):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        require(self.burn_in >= 0, f"--burn_in must be >= 0, got {self.burn_in}")
        require(
            self.replay_period <= self.sequence_length,
            f"--replay_period={self.replay_period} is longer than a sequence (--burn_in + --trace_length + 1 "
            f"= {self.sequence_length}): some steps would be in no sequence",
        )
        require(self.min_replay_size >= 0, f"--min_replay_size must be >= 0, got {self.min_replay_size}")
        require(
            self.min_replay_size <= self.replay_capacity,
            f"--min_replay_size={self.min_replay_size} is larger than --replay_capacity={self.replay_capacity}",
        )
        require(
            self.batch_size * self.replay_period + self.sequence_length <= self.replay_capacity,
            f"--replay_capacity={self.replay_capacity} cannot hold --batch_size={self.batch_size} sequences "
            f"of {self.sequence_length} steps starting every --replay_period={self.replay_period}",
        )
        for name in (
            "discount",
            "priority_eta",
            "actor_epsilon",
            "eval_exploration_epsilon",
            "obscure_probability",
        ):
            value = getattr(self, name)
            require(0.0 <= value <= 1.0, f"--{name} must be in [0, 1], got {value}")
        for name in (
            "priority_exponent",
            "importance_sampling_exponent",
            "actor_epsilon_alpha",
            "max_grad_norm",
        ):
            value = getattr(self, name)
            require(value >= 0.0, f"--{name} must be >= 0, got {value}")

    @property
    def sequence_length(self) -> int:
        """T, steps per replayed sequence: the burn-in, the learned transitions and the last one's next
        observation."""
        return self.burn_in + self.trace_length + 1


def build_network(config_values: dict, observation_shape, num_actions: int) -> RecurrentQNetwork:
    """The network a config (as saved in a checkpoint: a dict) describes; shared with eval_agent."""
    return RecurrentQNetwork(
        observation_shape,
        num_actions,
        tuple(config_values.get("hidden_sizes", R2d2Config.hidden_sizes)),
        config_values.get("lstm_size", R2d2Config.lstm_size),
        tuple(config_values.get("head_hidden_sizes", R2d2Config.head_hidden_sizes)),
    )


def _stack_size(observation_shape) -> int:
    """Frames per observation on Atari (the replay keeps only the newest of each); 1 otherwise."""
    return int(observation_shape[0]) if common.is_image_observation(observation_shape) else 1


def build_learner(config: R2d2Config, env: gym.Env, device: torch.device) -> distributed.DistributedAgents:
    """The learner (online and target networks, prioritized sequence replay) and a greedy evaluation actor."""
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    network = build_network(dataclasses.asdict(config), shape, num_actions).to(device)
    rng = np.random.default_rng(config.seed)
    replay = PrioritizedSequenceReplay(
        config.replay_capacity,
        config.sequence_length,
        config.priority_exponent,
        np.random.default_rng(rng.integers(2**63)),
        stack_size=_stack_size(shape),
        period=config.replay_period,
    )
    learner = R2d2(
        network=network,
        optimizer=optimization.adam(network.parameters(), config.learning_rate, config.adam_eps),
        replay=replay,
        burn_in=config.burn_in,
        batch_size=config.batch_size,
        min_replay_size=config.min_replay_size,
        updates_per_env_step=config.updates_per_env_step,
        discount=config.discount,
        n_step=config.n_step,
        target_network_update_period=config.target_network_update_period,
        importance_sampling_exponent=config.importance_sampling_exponent,
        priority_eta=config.priority_eta,
        rescaling_eps=config.value_rescaling_eps,
        max_grad_norm=config.max_grad_norm,
        device=device,
    )
    eval_actor = evaluation_actor(
        network,
        num_actions,
        config.eval_exploration_epsilon,
        np.random.default_rng(rng.integers(2**63)),
        device,
    )
    return distributed.DistributedAgents(learner, eval_actor)


def evaluation_actor(
    network: RecurrentQNetwork,
    num_actions: int,
    epsilon: float,
    rng: np.random.Generator,
    device: torch.device,
) -> R2d2Actor:
    """Plays (epsilon-)greedily with `network`, feeding it the previous action and reward as the actors
    do, and sends nothing; used by the training run's evaluation and by eval_agent."""
    return R2d2Actor(
        network=network,
        link=None,
        num_actions=num_actions,
        epsilon=epsilon,
        image_observations=False,
        rng=rng,
        device=device,
        agent_name=R2d2.agent_name,
    )


def build_actor(config: R2d2Config, env: gym.Env, device: torch.device, link: LearnerLink, seed: int):
    """Runs in each actor process: a copy of the network, acting with the actor's own Ape-X epsilon."""
    shape, num_actions = env.observation_space.shape, int(env.action_space.n)
    network = build_network(dataclasses.asdict(config), shape, num_actions).to(device).requires_grad_(False)
    actor = R2d2Actor(
        network=network,
        link=link,
        num_actions=num_actions,
        epsilon=exploration.apex_actor_epsilon(
            link.actor_index, config.num_actors, config.actor_epsilon, config.actor_epsilon_alpha
        ),
        period=config.replay_period,
        sequence_length=config.sequence_length,
        image_observations=common.is_image_observation(shape),
        rng=np.random.default_rng(seed),
        device=device,
        agent_name=R2d2.agent_name,
    )
    return actor, network


def main(config: R2d2Config, on_log: LogCallback | None = None):
    return distributed.train_distributed(
        config,
        R2d2.agent_name,
        lambda env, device: build_learner(config, env, device),
        build_actor,
        wrap_env=obscuring_wrapper(config.obscure_probability),
        on_log=on_log,
    )
