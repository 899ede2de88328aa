"""Plays a trained Rainbow greedily (mean weights of its noisy layers) and records a video:
`python -m deep_rl_zoo.rainbow.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.

`--eval_exploration_epsilon` adds epsilon-greedy actions on top (by default 0.01 on Atari).
"""

import numpy as np

from deep_rl_zoo import run_support
from deep_rl_zoo.config import EvalConfig, run_script
from deep_rl_zoo.greedy_actors import EpsilonGreedyActor
from deep_rl_zoo.rainbow.agent import Rainbow
from deep_rl_zoo.rainbow.train import RainbowConfig, build_network


def main(config: EvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        # The network's shape comes from the training run's config; without a checkpoint, the defaults.
        train_config = RainbowConfig()
        if checkpoint is not None:
            names = ("v_min", "v_max", "num_atoms", "hidden_sizes", "noisy_sigma0")
            train_config = RainbowConfig(
                **{k: checkpoint["config"][k] for k in names if k in checkpoint["config"]}
            )
        network = build_network(train_config, env.observation_space.shape, int(env.action_space.n))
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["network"])
        network.to(device).eval()  # eval(): noisy layers use their mean weights
        epsilon = run_support.eval_exploration_epsilon(config)
        rng = np.random.default_rng(config.seed)
        return EpsilonGreedyActor(network, int(env.action_space.n), epsilon, rng, device, Rainbow.agent_name)

    return run_support.evaluate(config, Rainbow.agent_name, build_actor)


if __name__ == "__main__":
    run_script(EvalConfig, {}, main)
