"""Prioritized DQN's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import torch

from deep_rl_zoo import replay_q_agents, training
from deep_rl_zoo.config import field
from deep_rl_zoo.dqn.train import build_network
from deep_rl_zoo.prioritized_dqn import agent
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class PrioritizedDqnConfig(replay_q_agents.EpsilonGreedyConfig):
    """Prioritized DQN hyper-parameters: the flags of every epsilon-greedy replay Q agent
    (`replay_q_agents`), plus those of the prioritized replay (alpha = 0.6, beta 0.4 -> 1 as in Schaul et
    al. 2015's proportional variant).

    Measured here on CartPole-v1, seeds 1-3 (`python benchmarks/dqn_cartpole.py --agent=prioritized_dqn
    --seeds=1,2,3 --max_env_steps=100000`): greedy evaluation means of 475 after 50,000, 70,000 and
    45,000 env steps (44-64 s each). One gradient step on 128 transitions every 4 env steps (a quarter of
    the learner time of one on 64 every env step), Adam lr 5e-4, a target copy every 200 gradient steps
    (800 env steps), epsilon 1 -> 0.01 over 5,000 env steps after 1,000 of warm-up.
    """

    num_iterations: int = field(20, "Iterations of training then evaluation; a checkpoint after each.")
    learning_rate: float = field(5e-4, "Adam learning rate.")
    n_step: int = field(1, "Steps of the bootstrapped return (1 is the Prioritized DQN of the paper).")
    target_network_update_period: int = field(200, "Gradient steps between two target-network copies.")
    priority_exponent: float = field(0.6, "alpha: sampling probability is proportional to priority^alpha.")
    importance_sampling_exponent_begin_value: float = field(0.4, "beta at the start of learning.")
    importance_sampling_exponent_end_value: float = field(1.0, "beta after the annealing (1: unbiased).")
    importance_sampling_exponent_decay_steps: int = field(
        100_000, "Env steps over which beta is annealed, after warm-up (the whole run, in the paper)."
    )
    priority_epsilon: float = field(1e-3, "Added to |TD error| so no transition has priority 0.")

    def __post_init__(self):
        super().__post_init__()
        replay_q_agents.check_prioritized_replay(self)


def build_agents(config: PrioritizedDqnConfig, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and an evaluation actor sharing its online network."""
    return replay_q_agents.build_epsilon_greedy_agents(
        config,
        env,
        device,
        agent.PrioritizedDqn,
        build_network,
        prioritized=True,
        importance_sampling_exponent=replay_q_agents.importance_sampling_schedule(config),
        priority_epsilon=config.priority_epsilon,
    )


def main(config: PrioritizedDqnConfig, on_log: LogCallback | None = None):
    return training.train(
        config,
        agent.PrioritizedDqn.agent_name,
        lambda env, device: build_agents(config, env, device),
        on_log=on_log,
    )
