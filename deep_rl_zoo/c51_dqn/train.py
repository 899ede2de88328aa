"""C51's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import torch

from deep_rl_zoo import replay_q_agents, training
from deep_rl_zoo.c51_dqn import agent
from deep_rl_zoo.config import field
from deep_rl_zoo.networks.value import build_c51_network
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class C51Config(replay_q_agents.EpsilonGreedyConfig):
    """C51 hyper-parameters: the flags of every epsilon-greedy replay Q agent (`replay_q_agents`), plus
    the support of the return distribution (51 atoms as in Bellemare et al. 2017); the support
    [-100, 100] covers CartPole's and LunarLander's discounted returns.

    Measured here on CartPole-v1, seeds 1-3 (`python benchmarks/dqn_cartpole.py --agent=c51_dqn
    --seeds=1,2,3 --max_env_steps=100000`): greedy evaluation means of 475 after 55,000, 40,000 and
    60,000 env steps (37-62 s each). One gradient step on 128 transitions every 4 env steps (a quarter of
    the learner time of one on 64 every env step), Adam lr 5e-4, a target copy every 200 gradient steps
    (800 env steps), epsilon 1 -> 0.01 over 5,000 env steps after 1,000 of warm-up.
    """

    num_iterations: int = field(20, "Iterations of training then evaluation; a checkpoint after each.")
    learning_rate: float = field(5e-4, "Adam learning rate.")
    n_step: int = field(1, "Steps of the bootstrapped return (1 is the C51 of the paper).")
    target_network_update_period: int = field(200, "Gradient steps between two target-network copies.")
    num_atoms: int = field(51, "Atoms of the categorical return distribution.")
    v_min: float = field(-100.0, "Smallest atom (a return).")
    v_max: float = field(100.0, "Largest atom (a return).")

    def __post_init__(self):
        super().__post_init__()
        replay_q_agents.check_categorical_support(self)


def build_network(config: C51Config, observation_shape: tuple[int, ...], num_actions: int) -> torch.nn.Module:
    """The network a config describes; `eval_agent` rebuilds it from a checkpoint's config."""
    atoms = torch.linspace(config.v_min, config.v_max, config.num_atoms)
    return build_c51_network(observation_shape, num_actions, atoms, config.hidden_sizes)


def build_agents(config: C51Config, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and an evaluation actor sharing its online network."""
    return replay_q_agents.build_epsilon_greedy_agents(config, env, device, agent.C51Dqn, build_network)


def main(config: C51Config, on_log: LogCallback | None = None):
    return training.train(
        config, agent.C51Dqn.agent_name, lambda env, device: build_agents(config, env, device), on_log=on_log
    )
