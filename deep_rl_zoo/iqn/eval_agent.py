"""Plays a trained IQN greedily and records a video:
`python -m deep_rl_zoo.iqn.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.
"""

import numpy as np
import torch

from deep_rl_zoo import evaluation, replay_q_agents
from deep_rl_zoo.config import QEvalConfig, run_script, trained_config
from deep_rl_zoo.greedy_actors import EpsilonGreedyActor
from deep_rl_zoo.iqn.agent import Iqn, SampledTausQNetwork
from deep_rl_zoo.iqn.train import IqnConfig, build_network


def main(config: QEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        num_actions = int(env.action_space.n)
        train_config = trained_config(IqnConfig, checkpoint)
        network = replay_q_agents.load_network(build_network, train_config, checkpoint, env, device)
        num_taus = train_config.num_acting_taus
        acting_network = SampledTausQNetwork(network, num_taus, torch.Generator().manual_seed(config.seed))
        epsilon = evaluation.eval_exploration_epsilon(config)
        rng = np.random.default_rng(config.seed)
        return EpsilonGreedyActor(acting_network, num_actions, epsilon, rng, device, Iqn.agent_name)

    return evaluation.evaluate(config, Iqn.agent_name, build_actor)


if __name__ == "__main__":
    run_script(QEvalConfig, {}, main)
