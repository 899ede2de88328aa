"""DQN's configuration and the `main` that `run_classic` and `run_atari` share."""

import dataclasses

import gymnasium as gym
import torch

from deep_rl_zoo import main_loop, replay_q_agents, training
from deep_rl_zoo.dqn import agent
from deep_rl_zoo.networks.value import build_q_network
from deep_rl_zoo.trackers import LogCallback


@dataclasses.dataclass(frozen=True)
class DqnConfig(replay_q_agents.EpsilonGreedyConfig):
    """DQN hyper-parameters: the flags of every epsilon-greedy replay Q agent (`replay_q_agents`), whose
    defaults are DQN's. Atari defaults follow Mnih et al. 2015; classic-control defaults were tuned
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


def build_network(config: DqnConfig, observation_shape: tuple[int, ...], num_actions: int) -> torch.nn.Module:
    """The Q-network a config describes; `eval_agent` rebuilds it from a checkpoint's config."""
    return build_q_network(observation_shape, num_actions, config.hidden_sizes)


def build_agents(config: DqnConfig, env: gym.Env, device: torch.device) -> training.Agents:
    """The learning agent and an evaluation actor sharing its online network."""
    return replay_q_agents.build_epsilon_greedy_agents(config, env, device, agent.Dqn, build_network)


def main(config: DqnConfig, on_log: LogCallback | None = None) -> main_loop.LoopState:
    """Trains DQN as `run_classic` and `run_atari` do, with `config` for their flags; returns where the
    run stopped (its folder, env steps, best evaluation). `on_log(prefix, values, env_step)` receives
    every group of scalars the run logs. The Python API: docs/python_api.md."""
    return training.train(
        config, agent.Dqn.agent_name, lambda env, device: build_agents(config, env, device), on_log=on_log
    )


def load_network(checkpoint_path: str, env: gym.Env, device: str | torch.device = "cpu") -> torch.nn.Module:
    """The Q-network a DQN checkpoint holds, for `env` made as the run made its envs (e.g.
    `gym_env.create_classic_environment`), in eval mode; `greedy_actors.greedy_action(network,
    observation, device)` plays it greedily. See docs/python_api.md."""
    return replay_q_agents.load_trained_network(
        checkpoint_path, env, agent.Dqn.agent_name, DqnConfig, build_network, device
    )
