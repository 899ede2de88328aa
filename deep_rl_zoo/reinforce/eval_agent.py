"""Plays a trained REINFORCE agent greedily and records a video:
`python -m deep_rl_zoo.reinforce.eval_agent --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import evaluation
from deep_rl_zoo.config import PolicyEvalConfig, run_script
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks.policy import build_actor_network
from deep_rl_zoo.reinforce.agent import Reinforce
from deep_rl_zoo.reinforce.train import ReinforceConfig


def main(config: PolicyEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        hidden_sizes = (
            checkpoint["config"].get("hidden_sizes") if checkpoint else ReinforceConfig.hidden_sizes
        )
        network = build_actor_network(env.observation_space.shape, int(env.action_space.n), hidden_sizes)
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["network"])
        network.to(device).eval()
        return PolicyGreedyActor(network, device, Reinforce.agent_name, config.evaluation_samples_actions())

    return evaluation.evaluate(config, Reinforce.agent_name, build_actor)


if __name__ == "__main__":
    run_script(PolicyEvalConfig, {}, main)
