"""Plays a trained REINFORCE-with-baseline agent greedily and records a video:
`python -m deep_rl_zoo.reinforce_baseline.eval_agent --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import evaluation
from deep_rl_zoo.config import PolicyEvalConfig, run_script
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks.policy import build_actor_network
from deep_rl_zoo.reinforce_baseline.agent import ReinforceBaseline
from deep_rl_zoo.reinforce_baseline.train import ReinforceBaselineConfig


def main(config: PolicyEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        default_sizes = ReinforceBaselineConfig.hidden_sizes
        hidden_sizes = checkpoint["config"].get("hidden_sizes") if checkpoint else default_sizes
        network = build_actor_network(env.observation_space.shape, int(env.action_space.n), hidden_sizes)
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["policy_network"])
        network.to(device).eval()
        return PolicyGreedyActor(
            network, device, ReinforceBaseline.agent_name, config.evaluation_samples_actions()
        )

    return evaluation.evaluate(config, ReinforceBaseline.agent_name, build_actor)


if __name__ == "__main__":
    run_script(PolicyEvalConfig, {}, main)
