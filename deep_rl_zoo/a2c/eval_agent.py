"""Plays a trained A2C (or, with --agent_name=A2C-grad, A2C-grad) agent greedily and records a video:
`python -m deep_rl_zoo.a2c.eval_agent --environment_name=CartPole-v1 --load_checkpoint_file=latest`.
"""

import dataclasses

from deep_rl_zoo import evaluation
from deep_rl_zoo.a2c.agent import A2c, A2cGrad
from deep_rl_zoo.a2c.train import A2cConfig, build_network
from deep_rl_zoo.config import PolicyEvalConfig, field, run_script, trained_config
from deep_rl_zoo.errors import ForeignCheckpointError, require
from deep_rl_zoo.greedy_actors import PolicyGreedyActor

_AGENT_NAMES = (A2c.agent_name, A2cGrad.agent_name)


@dataclasses.dataclass(frozen=True)
class A2cEvalConfig(PolicyEvalConfig):
    agent_name: str = field("A2C", "Whose checkpoints to play: A2C or A2C-grad.")

    def __post_init__(self):
        super().__post_init__()
        require(
            self.agent_name in _AGENT_NAMES,
            f"--agent_name must be one of {_AGENT_NAMES}, got {self.agent_name!r}",
        )


def main(config: A2cEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        network = build_network(trained_config(A2cConfig, checkpoint), env)
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["network"])
        network.to(device).eval()
        return PolicyGreedyActor(network, device, config.agent_name, config.evaluation_samples_actions())

    try:
        return evaluation.evaluate(config, config.agent_name, build_actor)
    except ForeignCheckpointError as e:
        if e.written_by not in _AGENT_NAMES:
            raise
        # The sibling's file: this script plays it too, when told whose it is.
        raise ForeignCheckpointError(f"{e}: play it with --agent_name={e.written_by}", e.written_by) from None


if __name__ == "__main__":
    run_script(A2cEvalConfig, {}, main)
