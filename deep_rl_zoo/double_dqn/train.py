"""Double DQN's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import torch

from deep_rl_zoo import replay_q_agents, training
from deep_rl_zoo.config import field
from deep_rl_zoo.double_dqn import agent
from deep_rl_zoo.dqn.train import build_network
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class DoubleDqnConfig(replay_q_agents.EpsilonGreedyConfig):
    """Double DQN hyper-parameters: the flags of every epsilon-greedy replay Q agent
    (`replay_q_agents`). Atari defaults (run_atari) follow van Hasselt et al. 2015 where they differ from
    Nature DQN.

    The classic-control defaults are DQN's (`replay_q_agents.ReplayQConfig`); a test pins them, so a
    re-tune of DQN's cannot change them silently. Measured here on CartPole-v1, seeds 1-3 (`python
    benchmarks/dqn_cartpole.py --agent=double_dqn --seeds=1,2,3 --max_env_steps=100000`): greedy
    evaluation means of 475 after 65,000, 40,000 and 10,000 env steps (11-78 s each). One gradient step
    on 128 transitions every 4 env steps (a quarter of the learner time of one on 64 every env step),
    Adam lr 2e-3, a target copy every 125 gradient steps (500 env steps), epsilon 1 -> 0.01 over 5,000
    env steps after 1,000 of warm-up: DQN's classic values. With lr 5e-4 and a target copy every 200
    gradient steps instead, the same seeds needed 95,000, 75,000 and 100,000 env steps.
    """

    num_iterations: int = field(20, "Iterations of training then evaluation; a checkpoint after each.")
    n_step: int = field(1, "Steps of the bootstrapped return (1 is the Double DQN of the paper).")


def build_agents(config: DoubleDqnConfig, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and an evaluation actor sharing its online network."""
    return replay_q_agents.build_epsilon_greedy_agents(config, env, device, agent.DoubleDqn, build_network)


def main(config: DoubleDqnConfig, on_log: LogCallback | None = None):
    return training.train(
        config,
        agent.DoubleDqn.agent_name,
        lambda env, device: build_agents(config, env, device),
        on_log=on_log,
    )
