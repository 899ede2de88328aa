"""Double DQN's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import run_support
from deep_rl_zoo.config import field
from deep_rl_zoo.double_dqn import agent
from deep_rl_zoo.dqn.train import DqnConfig
from deep_rl_zoo.greedy_actors import EpsilonGreedyActor
from deep_rl_zoo.networks.value import build_q_network
from deep_rl_zoo.schedules import LinearSchedule


@dataclasses.dataclass(frozen=True)
class DoubleDqnConfig(DqnConfig):
    """Double DQN hyper-parameters: DQN's flags and validation. Atari defaults (run_atari) follow van
    Hasselt et al. 2015 where they differ from Nature DQN.

    The classic-control defaults are all declared here, not inherited, so that a re-tune of DQN's
    cannot change them silently. Measured here on CartPole-v1, seeds 1-3 (`python
    benchmarks/dqn_cartpole.py --agent=double_dqn --seeds=1,2,3 --max_env_steps=100000`): greedy
    evaluation means of 475 after 65,000, 40,000 and 10,000 env steps (11-78 s each). One gradient step
    on 128 transitions every 4 env steps (a quarter of the learner time of one on 64 every env step),
    Adam lr 2e-3, a target copy every 125 gradient steps (500 env steps), epsilon 1 -> 0.01 over 5,000
    env steps after 1,000 of warm-up: DQN's classic values. With lr 5e-4 and a target copy every 200
    gradient steps instead, the same seeds needed 95,000, 75,000 and 100,000 env steps.
    """

    num_iterations: int = field(20, "Iterations of training then evaluation; a checkpoint after each.")
    replay_capacity: int = field(50_000, "Transitions the replay holds.")
    min_replay_size: int = field(1000, "Transitions collected before learning starts.")
    batch_size: int = field(128, "Transitions per gradient step.")
    learning_rate: float = field(2e-3, "Adam learning rate.")
    adam_eps: float = field(1e-8, "Adam epsilon.")
    discount: float = field(0.99, "Discount factor gamma.")
    n_step: int = field(1, "Steps of the bootstrapped return (1 is the Double DQN of the paper).")
    learn_interval: int = field(4, "Env steps between two gradient steps.")
    target_network_update_period: int = field(125, "Gradient steps between two target-network copies.")
    exploration_epsilon_begin_value: float = field(1.0, "Epsilon at the start of learning.")
    exploration_epsilon_end_value: float = field(0.01, "Epsilon after the decay.")
    exploration_epsilon_decay_steps: int = field(5000, "Env steps over which epsilon decays, after warm-up.")
    eval_exploration_epsilon: float = field(0.0, "Epsilon of the greedy evaluation.")
    max_grad_norm: float = field(10.0, "Clip the gradient's global norm to this; 0 disables.")
    hidden_sizes: tuple[int, ...] = field((128, 128), "Hidden layer sizes of the MLP (classic control).")


def build_agents(config: DoubleDqnConfig, env: gym.Env, device: torch.device) -> run_support.Agents:
    """The learning agent and an evaluation actor sharing its online network."""
    observation_shape = env.observation_space.shape
    num_actions = int(env.action_space.n)
    network = build_q_network(observation_shape, num_actions, config.hidden_sizes).to(device)
    rng = np.random.default_rng(config.seed)
    frame_store = replay_lib.frame_store_for(observation_shape, config.replay_capacity, config.n_step)
    train_agent = agent.DoubleDqn(
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
        agent.DoubleDqn.agent_name,
    )
    return run_support.Agents(train_agent, eval_agent)


def main(config: DoubleDqnConfig):
    return run_support.train(
        config, agent.DoubleDqn.agent_name, lambda env, device: build_agents(config, env, device)
    )
