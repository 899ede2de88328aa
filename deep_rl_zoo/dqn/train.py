"""DQN's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import run_support
from deep_rl_zoo.config import RunConfig, field
from deep_rl_zoo.dqn import agent
from deep_rl_zoo.errors import require
from deep_rl_zoo.greedy_actors import EpsilonGreedyActor
from deep_rl_zoo.networks.value import build_q_network
from deep_rl_zoo.schedules import LinearSchedule


@dataclasses.dataclass(frozen=True)
class DqnConfig(RunConfig):
    """DQN hyper-parameters. Atari defaults follow Mnih et al. 2015; classic-control defaults were tuned
    here on CartPole-v1 (see README's results table and benchmarks/dqn_cartpole.py).

    Classic-control tuning (CartPole-v1, seeds 1-3, benchmarks/dqn_cartpole.py): one gradient step on
    128 transitions every 4 env steps (a quarter of the learner time of one step on 64 every env step),
    Adam lr 2e-3 to make up for the fewer steps, a target copy every 125 gradient steps (500 env steps),
    epsilon down to 0.01 within 5,000 env steps. They reach a greedy mean of 475 within 50,000 env steps
    on 4 of seeds 1-5 (35k-50k; seed 2 never). In all the settings tried (lr 5e-4 to 2.3e-3, 2 or 4 env
    steps per gradient step, batch 64 to 256, 128x128 or 256x256, discount 0.95 to 0.99), greedy
    returns fell back to about 100-150 after 10,000-15,000 env steps and took 10,000-30,000 more to
    recover: that dip, not the first rise, is what the budget is spent on.
    """

    replay_capacity: int = field(50_000, "Transitions the replay holds.")
    min_replay_size: int = field(1000, "Transitions collected before learning starts.")
    batch_size: int = field(128, "Transitions per gradient step.")
    learning_rate: float = field(2e-3, "Adam learning rate.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    n_step: int = field(1, "Steps of the bootstrapped return (1 is the DQN of the paper).")
    learn_interval: int = field(4, "Env steps between two gradient steps.")
    target_network_update_period: int = field(125, "Gradient steps between two target-network copies.")
    exploration_epsilon_begin_value: float = field(1.0, "Epsilon at the start of learning.")
    exploration_epsilon_end_value: float = field(0.01, "Epsilon after the decay.")
    exploration_epsilon_decay_steps: int = field(5000, "Env steps over which epsilon decays, after warm-up.")
    eval_exploration_epsilon: float = field(0.0, "Epsilon of the greedy evaluation.")
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
            f"--min_replay_size={self.min_replay_size} is larger than --replay_capacity={self.replay_capacity}",
        )
        require(0.0 <= self.discount <= 1.0, f"--discount must be in [0, 1], got {self.discount}")
        require(self.learning_rate > 0, f"--learning_rate must be positive, got {self.learning_rate}")


def build_agents(config: DqnConfig, env: gym.Env, device: torch.device) -> run_support.Agents:
    """The learning agent and an evaluation actor sharing its online network."""
    observation_shape = env.observation_space.shape
    num_actions = int(env.action_space.n)
    network = build_q_network(observation_shape, num_actions, config.hidden_sizes).to(device)
    rng = np.random.default_rng(config.seed)
    frame_store = replay_lib.frame_store_for(observation_shape, config.replay_capacity, config.n_step)
    train_agent = agent.Dqn(
        network=network,
        optimizer=torch.optim.Adam(
            network.parameters(), lr=config.learning_rate, eps=config.adam_eps, fused=True
        ),
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
        min_replay_size=config.min_replay_size,
        learn_interval=config.learn_interval,
        batch_size=config.batch_size,
        target_network_update_period=config.target_network_update_period,
        max_grad_norm=config.max_grad_norm,
        rng=rng,
        device=device,
        frame_store=frame_store,
    )
    eval_agent = EpsilonGreedyActor(
        network,
        num_actions,
        config.eval_exploration_epsilon,
        np.random.default_rng(rng.integers(2**63)),
        device,
        agent.Dqn.agent_name,
    )
    return run_support.Agents(train_agent, eval_agent)


def main(config: DqnConfig):
    return run_support.train(
        config, agent.Dqn.agent_name, lambda env, device: build_agents(config, env, device)
    )
