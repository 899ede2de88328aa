"""Plays a trained Rainbow greedily (mean weights of its noisy layers) and records a video:
`python -m deep_rl_zoo.rainbow.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.

`--eval_exploration_epsilon` adds epsilon-greedy actions on top (by default 0.01 on Atari).
"""

import numpy as np

from deep_rl_zoo import replay_q_agents, run_support
from deep_rl_zoo.config import QEvalConfig, run_script
from deep_rl_zoo.greedy_actors import EpsilonGreedyActor
from deep_rl_zoo.rainbow.agent import Rainbow
from deep_rl_zoo.rainbow.train import RainbowConfig, build_network


def main(config: QEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        train_config = replay_q_agents.trained_config(RainbowConfig, checkpoint)
        # eval mode: noisy layers use their mean weights.
        network = replay_q_agents.load_network(build_network, train_config, checkpoint, env, device)
        epsilon = run_support.eval_exploration_epsilon(config)
        rng = np.random.default_rng(config.seed)
        return EpsilonGreedyActor(network, int(env.action_space.n), epsilon, rng, device, Rainbow.agent_name)

    return run_support.evaluate(config, Rainbow.agent_name, build_actor)


if __name__ == "__main__":
    run_script(QEvalConfig, {}, main)
