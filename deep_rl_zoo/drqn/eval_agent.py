"""Plays a trained DRQN greedily (carrying its LSTM state) and records a video:
`python -m deep_rl_zoo.drqn.eval_agent --environment_name=Pong --environment_frame_stack=1
--load_checkpoint_file=latest`.
"""

import dataclasses

import numpy as np

from deep_rl_zoo import evaluation, replay_q_agents
from deep_rl_zoo.config import QEvalConfig, field, run_script, trained_config
from deep_rl_zoo.drqn.agent import Drqn, RecurrentEpsilonGreedyActor
from deep_rl_zoo.drqn.train import OLD_CHECKPOINT_DEFAULTS, DrqnConfig, build_network, obscuring_wrapper


@dataclasses.dataclass(frozen=True)
class DrqnEvalConfig(QEvalConfig):
    obscure_probability: float = field(0.0, "Blank each observation with this probability, as in training.")


def main(config: DrqnEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        num_actions = int(env.action_space.n)
        train_config = trained_config(DrqnConfig, checkpoint, OLD_CHECKPOINT_DEFAULTS)
        network = replay_q_agents.load_network(build_network, train_config, checkpoint, env, device)
        epsilon = evaluation.eval_exploration_epsilon(config)
        rng = np.random.default_rng(config.seed)
        return RecurrentEpsilonGreedyActor(network, num_actions, epsilon, rng, device, Drqn.agent_name)

    return evaluation.evaluate(
        config, Drqn.agent_name, build_actor, wrap_env=obscuring_wrapper(config.obscure_probability)
    )


if __name__ == "__main__":
    run_script(DrqnEvalConfig, {}, main)
