"""Plays a trained C51 greedily and records a video:
`python -m deep_rl_zoo.c51_dqn.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.
"""

import numpy as np
import torch

from deep_rl_zoo import run_support
from deep_rl_zoo.c51_dqn.agent import C51Dqn
from deep_rl_zoo.c51_dqn.train import C51Config
from deep_rl_zoo.config import EvalConfig, run_script
from deep_rl_zoo.greedy_actors import EpsilonGreedyActor
from deep_rl_zoo.networks.value import build_c51_network


def main(config: EvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        # The network's shape comes from the training run's config; without a checkpoint, C51's defaults.
        train_config = checkpoint["config"] if checkpoint else {}
        get = lambda name: train_config.get(name, getattr(C51Config, name))  # noqa: E731
        atoms = torch.linspace(get("v_min"), get("v_max"), get("num_atoms"))
        network = build_c51_network(
            env.observation_space.shape, int(env.action_space.n), atoms, get("hidden_sizes")
        )
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["network"])
        network.to(device).eval()
        epsilon = run_support.eval_exploration_epsilon(config)
        rng = np.random.default_rng(config.seed)
        return EpsilonGreedyActor(network, int(env.action_space.n), epsilon, rng, device, C51Dqn.agent_name)

    return run_support.evaluate(config, C51Dqn.agent_name, build_actor)


if __name__ == "__main__":
    run_script(EvalConfig, {}, main)
