"""Plays a trained NGU greedily with its exploitative policy j = 0 (carrying its LSTM state and its own
episodic memory) and records a video:
`python -m deep_rl_zoo.ngu.eval_agent --environment_name=MountainCar-v0 --load_checkpoint_file=latest`.
`--obscure_probability` blanks observations as in a flickering training run (R2D2's evaluation flag).
"""

import dataclasses

from deep_rl_zoo import evaluation
from deep_rl_zoo.config import run_script
from deep_rl_zoo.drqn.obscured import obscuring_wrapper
from deep_rl_zoo.ngu.agent import Ngu
from deep_rl_zoo.ngu.train import build_networks, evaluation_actor
from deep_rl_zoo.r2d2.eval_agent import R2d2EvalConfig


@dataclasses.dataclass(frozen=True)
class NguEvalConfig(R2d2EvalConfig):
    """R2D2's evaluation flags (`--obscure_probability`, checked before any work)."""


def main(config: NguEvalConfig, agent_name: str = Ngu.agent_name, build=build_networks) -> list[float]:
    def build_actor(env, device, checkpoint):
        num_actions = int(env.action_space.n)
        saved_config = checkpoint["config"] if checkpoint else {}
        networks = build(saved_config, env.observation_space.shape, num_actions)
        if checkpoint is not None:
            networks.load_state_dict(checkpoint["agent"]["networks"])
        networks.to(device).eval()
        epsilon = evaluation.eval_exploration_epsilon(config)
        return evaluation_actor(saved_config, networks, num_actions, epsilon, config.seed, device, agent_name)

    return evaluation.evaluate(
        # a plain EvalConfig (no flickering flag) evaluates unobscured
        config,
        agent_name,
        build_actor,
        wrap_env=obscuring_wrapper(getattr(config, "obscure_probability", 0.0)),
    )


if __name__ == "__main__":
    run_script(NguEvalConfig, {}, main)
