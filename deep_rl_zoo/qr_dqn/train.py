"""QR-DQN's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import run_support
from deep_rl_zoo.config import RunConfig, field
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import EpsilonGreedyActor
from deep_rl_zoo.networks.value import QrQNetwork
from deep_rl_zoo.qr_dqn import agent
from deep_rl_zoo.schedules import LinearSchedule


@dataclasses.dataclass(frozen=True)
class QrDqnConfig(RunConfig):
    """QR-DQN hyper-parameters. Atari defaults (run_atari) follow Dabney et al. 2017; the classic-control
    defaults below were tuned here on CartPole-v1 (3-step returns, a faster target refresh)."""

    num_quantiles: int = field(51, "N, the number of fixed quantile fractions (2i + 1) / 2N.")
    huber_delta: float = field(1.0, "kappa of the quantile Huber loss; 0 for the plain quantile loss.")
    replay_capacity: int = field(50_000, "Transitions the replay holds.")
    min_replay_size: int = field(1000, "Transitions collected before learning starts.")
    batch_size: int = field(64, "Transitions per gradient step.")
    learning_rate: float = field(5e-4, "Adam learning rate.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    n_step: int = field(3, "Steps of the bootstrapped return.")
    learn_interval: int = field(1, "Env steps between two gradient steps.")
    target_network_update_period: int = field(200, "Gradient steps between two target-network copies.")
    exploration_epsilon_begin_value: float = field(1.0, "Epsilon at the start of learning.")
    exploration_epsilon_end_value: float = field(0.01, "Epsilon after the decay.")
    exploration_epsilon_decay_steps: int = field(
        10_000, "Env steps over which epsilon decays, after warm-up."
    )
    eval_exploration_epsilon: float = field(0.0, "Epsilon of the greedy evaluation.")
    max_grad_norm: float = field(10.0, "Clip the gradient's global norm to this; 0 disables.")
    checkpoint_replay: bool = run_support.checkpoint_replay_field()
    hidden_sizes: tuple[int, ...] = field((128, 128), "Hidden layer sizes of the MLP (classic control).")

    def __post_init__(self):
        super().__post_init__()
        for name in (
            "num_quantiles",
            "replay_capacity",
            "batch_size",
            "n_step",
            "learn_interval",
            "target_network_update_period",
        ):
            require(getattr(self, name) > 0, f"--{name} must be positive, got {getattr(self, name)}")
        require(self.huber_delta >= 0, f"--huber_delta must be >= 0, got {self.huber_delta}")
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


def build_network(config_values: dict, observation_shape, num_actions: int) -> QrQNetwork:
    """The network a config (as saved in a checkpoint: a dict) describes; shared with eval_agent."""
    return QrQNetwork(
        observation_shape,
        num_actions,
        config_values.get("num_quantiles", QrDqnConfig.num_quantiles),
        config_values.get("hidden_sizes", QrDqnConfig.hidden_sizes),
    )


def build_agents(config: QrDqnConfig, env: gym.Env, device: torch.device) -> run_support.Agents:
    """The learning agent and an evaluation actor sharing its online network."""
    observation_shape = env.observation_space.shape
    num_actions = int(env.action_space.n)
    network = build_network(dataclasses.asdict(config), observation_shape, num_actions).to(device)
    rng = np.random.default_rng(config.seed)
    frame_store = replay_lib.frame_store_for(observation_shape, config.replay_capacity, config.n_step)
    train_agent = agent.QrDqn(
        network=network,
        optimizer=torch.optim.Adam(network.parameters(), lr=config.learning_rate, eps=config.adam_eps),
        replay=replay_lib.UniformReplay(
            config.replay_capacity, rng=np.random.default_rng(rng.integers(2**63))
        ),
        transition_accumulator=replay_lib.TransitionAccumulator(n=config.n_step, discount=config.discount),
        exploration_epsilon=LinearSchedule(
            begin_value=config.exploration_epsilon_begin_value,
            end_value=config.exploration_epsilon_end_value,
            begin_t=config.min_replay_size,
            decay_steps=config.exploration_epsilon_decay_steps,
        ),
        num_actions=num_actions,
        num_quantiles=config.num_quantiles,
        min_replay_size=config.min_replay_size,
        learn_interval=config.learn_interval,
        batch_size=config.batch_size,
        target_network_update_period=config.target_network_update_period,
        max_grad_norm=config.max_grad_norm,
        rng=rng,
        device=device,
        frame_store=frame_store,
        huber_delta=config.huber_delta or None,
    )
    eval_agent = EpsilonGreedyActor(
        network,
        num_actions,
        config.eval_exploration_epsilon,
        np.random.default_rng(rng.integers(2**63)),
        device,
        agent.QrDqn.agent_name,
    )
    return run_support.Agents(train_agent, eval_agent)


def main(config: QrDqnConfig):
    return run_support.train(
        config, agent.QrDqn.agent_name, lambda env, device: build_agents(config, env, device)
    )
