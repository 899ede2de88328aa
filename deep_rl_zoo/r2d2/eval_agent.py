"""Plays a trained R2D2 greedily (carrying its LSTM state) and records a video:
`python -m deep_rl_zoo.r2d2.eval_agent --environment_name=CartPole-v1 --load_checkpoint_file=latest`.
"""

import dataclasses

import numpy as np

from deep_rl_zoo import evaluation
from deep_rl_zoo.config import QEvalConfig, field, run_script
from deep_rl_zoo.drqn.obscured import obscuring_wrapper
from deep_rl_zoo.errors import require
from deep_rl_zoo.r2d2.agent import R2d2
from deep_rl_zoo.r2d2.train import build_network, evaluation_actor


@dataclasses.dataclass(frozen=True)
class R2d2EvalConfig(QEvalConfig):
    obscure_probability: float = field(0.0, "Blank each observation with this probability, as in training.")

    def __post_init__(self):
        super().__post_init__()
        p = self.obscure_probability
        require(0.0 <= p <= 1.0, f"--obscure_probability must be in [0, 1], got {p}")


def main(config: R2d2EvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        num_actions = int(env.action_space.n)
        saved_config = checkpoint["config"] if checkpoint else {}
        network = build_network(saved_config, env.observation_space.shape, num_actions)
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["network"])
        network.to(device).eval()
        epsilon = evaluation.eval_exploration_epsilon(config)
        rng = np.random.default_rng(config.seed)
        return evaluation_actor(network, num_actions, epsilon, rng, device)

    return evaluation.evaluate(
        config, R2d2.agent_name, build_actor, wrap_env=obscuring_wrapper(config.obscure_probability)
    )


if __name__ == "__main__":
    run_script(R2d2EvalConfig, {}, main)
