"""Plays a trained QR-DQN greedily and records a video:
`python -m deep_rl_zoo.qr_dqn.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.
"""

import numpy as np

from deep_rl_zoo import replay_q_agents, run_support
from deep_rl_zoo.config import QEvalConfig, run_script
from deep_rl_zoo.greedy_actors import EpsilonGreedyActor
from deep_rl_zoo.qr_dqn.agent import QrDqn
from deep_rl_zoo.qr_dqn.train import QrDqnConfig, build_network


def main(config: QEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        train_config = replay_q_agents.trained_config(QrDqnConfig, checkpoint)
        network = replay_q_agents.load_network(build_network, train_config, checkpoint, env, device)
        epsilon = run_support.eval_exploration_epsilon(config)
        rng = np.random.default_rng(config.seed)
        return EpsilonGreedyActor(network, int(env.action_space.n), epsilon, rng, device, QrDqn.agent_name)

    return run_support.evaluate(config, QrDqn.agent_name, build_actor)


if __name__ == "__main__":
    run_script(QEvalConfig, {}, main)
