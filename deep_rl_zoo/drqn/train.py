"""DRQN's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import run_support
from deep_rl_zoo.config import RunConfig, field
from deep_rl_zoo.drqn import agent
from deep_rl_zoo.drqn.obscured import ObscuredObservation
from deep_rl_zoo.errors import require
from deep_rl_zoo.networks.value import DrqnNetwork
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.sequence_replay import SequenceReplay


@dataclasses.dataclass(frozen=True)
class DrqnConfig(RunConfig):
    """DRQN hyper-parameters. Atari defaults (run_atari) follow Hausknecht & Stone 2015 where the paper
    gives them; the classic-control defaults below were tuned here on CartPole-v1.

    They do NOT yet solve CartPole-v1 (greedy mean 475) within 100,000 env steps. Measured on seed 1
    with `run_classic --seed=1 --num_iterations=20`: these defaults (64 sequences every 4 env steps,
    lr 3e-4, target every 250 gradient steps, epsilon over 5,000 steps) reach 447 after 5,000 env steps,
    then fall to 120-140 from 35,000 on (131 at 55,000, where the run was stopped); 106-161 env
    steps/s. The previous defaults (32 sequences every 2 env steps, lr 5e-4, target every 200, epsilon
    over 10,000) oscillated between 120 and 305 for 50,000 env steps (an earlier, loaded measurement;
    timing one gradient step puts them at about a third of that speed); 64 sequences every 8 env steps
    with lr 1e-3 and a target every 100 peaked at 355 and sat at 110-170 from 30,000 to 70,000. Carrying or resetting the LSTM state during evaluation made no difference
    to those returns, so the drop is in the learned Q-values, not in the state the actor carries.
    At 55,000 env steps the greedy episode ends with the pole upright and the cart past x = 2.4 (drift),
    Q is about 41 and 58% of the LSTM outputs sit beyond |0.95|: the linear head must read Q-values of
    tens from outputs bounded by 1. A layer after the LSTM or rescaled targets are the next things to try.
    """

    unroll_length: int = field(8, "Transitions learned from per sequence (after the burn-in).")
    burn_in: int = field(8, "Leading steps of each sequence that only warm up the LSTM state.")
    lstm_size: int = field(128, "Units of the LSTM layer.")
    head_hidden_sizes: tuple[int, ...] = field(
        (128,), "ReLU layers between the LSTM and the linear Q head (empty: the paper's linear head)."
    )
    double_q: bool = field(True, "The online network picks the bootstrap action (double Q-learning).")
    replay_capacity: int = field(50_000, "Env steps the sequence replay holds.")
    min_replay_size: int = field(1000, "Env steps collected before learning starts.")
    batch_size: int = field(64, "Sequences per gradient step.")
    learning_rate: float = field(3e-4, "Adam learning rate.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    n_step: int = field(1, "Steps of the bootstrapped return (1 is the paper's one-step target).")
    learn_interval: int = field(4, "Env steps between two gradient steps.")
    target_network_update_period: int = field(250, "Gradient steps between two target-network copies.")
    exploration_epsilon_begin_value: float = field(1.0, "Epsilon at the start of learning.")
    exploration_epsilon_end_value: float = field(0.01, "Epsilon after the decay.")
    exploration_epsilon_decay_steps: int = field(5000, "Env steps over which epsilon decays, after warm-up.")
    eval_exploration_epsilon: float = field(0.0, "Epsilon of the greedy evaluation.")
    max_grad_norm: float = field(10.0, "Clip the gradient's global norm to this; 0 disables.")
    hidden_sizes: tuple[int, ...] = field((128,), "Hidden layer sizes of the MLP before the LSTM (classic).")
    obscure_probability: float = field(
        0.0, "Blank each observation with this probability (0.5 on Atari = the paper's flickering games)."
    )

    def __post_init__(self):
        super().__post_init__()
        require(
            0.0 <= self.obscure_probability <= 1.0,
            f"--obscure_probability must be in [0, 1], got {self.obscure_probability}",
        )
        for name in (
            "unroll_length",
            "n_step",
            "lstm_size",
            "replay_capacity",
            "batch_size",
            "learn_interval",
            "target_network_update_period",
        ):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        require(self.burn_in >= 0, f"--burn_in must be >= 0, got {self.burn_in}")
        require(self.min_replay_size >= 0, f"--min_replay_size must be >= 0, got {self.min_replay_size}")
        require(
            self.sequence_length <= self.replay_capacity,
            f"--burn_in + --unroll_length + 1 = {self.sequence_length} is larger than "
            f"--replay_capacity={self.replay_capacity}",
        )
        require(
            self.min_replay_size <= self.replay_capacity,
            f"--min_replay_size={self.min_replay_size} is larger than "
            f"--replay_capacity={self.replay_capacity}",
        )
        require(0.0 <= self.discount <= 1.0, f"--discount must be in [0, 1], got {self.discount}")
        require(self.learning_rate > 0, f"--learning_rate must be positive, got {self.learning_rate}")

    @property
    def sequence_length(self) -> int:
        """Steps per sampled sequence: burn-in, then unroll_length transitions need one step more."""
        return self.burn_in + self.unroll_length + 1


def build_network(config_values: dict, observation_shape, num_actions: int) -> DrqnNetwork:
    """The network a config (as saved in a checkpoint: a dict) describes; shared with eval_agent."""
    return DrqnNetwork(
        observation_shape,
        num_actions,
        config_values.get("hidden_sizes", DrqnConfig.hidden_sizes),
        config_values.get("lstm_size", DrqnConfig.lstm_size),
        # Checkpoints saved before this option had the paper's linear head.
        config_values.get("head_hidden_sizes", ()),
    )


def build_agents(config: DrqnConfig, env: gym.Env, device: torch.device) -> run_support.Agents:
    """The learning agent and a recurrent evaluation actor sharing its online network."""
    observation_shape = env.observation_space.shape
    num_actions = int(env.action_space.n)
    network = build_network(dataclasses.asdict(config), observation_shape, num_actions).to(device)
    rng = np.random.default_rng(config.seed)
    frame_store = None
    if len(observation_shape) == 3:
        # Atari: the replay stores frame handles; store and replay advance one step at a time
        # together, so the store needs the replay's span plus the frames before its oldest stack.
        frame_store = replay_lib.FrameStackStore(
            capacity=config.replay_capacity + observation_shape[0],
            frame_shape=tuple(observation_shape[1:]),
            stack_size=observation_shape[0],
        )
    train_agent = agent.Drqn(
        network=network,
        optimizer=torch.optim.Adam(network.parameters(), lr=config.learning_rate, eps=config.adam_eps),
        replay=SequenceReplay(
            config.replay_capacity, config.sequence_length, rng=np.random.default_rng(rng.integers(2**63))
        ),
        exploration_epsilon=LinearSchedule(
            begin_value=config.exploration_epsilon_begin_value,
            end_value=config.exploration_epsilon_end_value,
            begin_t=config.min_replay_size,
            decay_steps=config.exploration_epsilon_decay_steps,
        ),
        num_actions=num_actions,
        discount=config.discount,
        burn_in=config.burn_in,
        min_replay_size=config.min_replay_size,
        learn_interval=config.learn_interval,
        batch_size=config.batch_size,
        target_network_update_period=config.target_network_update_period,
        max_grad_norm=config.max_grad_norm,
        rng=rng,
        device=device,
        frame_store=frame_store,
        double_q=config.double_q,
        n_step=config.n_step,
    )
    eval_agent = agent.RecurrentEpsilonGreedyActor(
        network,
        num_actions,
        config.eval_exploration_epsilon,
        np.random.default_rng(rng.integers(2**63)),
        device,
        agent.Drqn.agent_name,
    )
    return run_support.Agents(train_agent, eval_agent)


def obscuring_wrapper(probability: float) -> Callable[[gym.Env], gym.Env] | None:
    """The wrapper that makes the env partially observable, or None when `probability` is 0."""
    if probability <= 0.0:
        return None
    return lambda env: ObscuredObservation(env, probability)


def main(config: DrqnConfig):
    return run_support.train(
        config,
        agent.Drqn.agent_name,
        lambda env, device: build_agents(config, env, device),
        wrap_env=obscuring_wrapper(config.obscure_probability),
    )
