"""Plays a trained actor-critic agent greedily and records a video:
`python -m deep_rl_zoo.actor_critic.eval_agent --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import evaluation
from deep_rl_zoo.actor_critic.agent import ActorCritic
from deep_rl_zoo.actor_critic.train import ActorCriticConfig
from deep_rl_zoo.config import PolicyEvalConfig, run_script
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.networks.policy import build_actor_critic_network


def main(config: PolicyEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        trained = checkpoint["config"] if checkpoint else {}
        network = build_actor_critic_network(
            env.observation_space.shape,
            int(env.action_space.n),
            trained.get("hidden_sizes", ActorCriticConfig.hidden_sizes),
            trained.get("shared_torso", ActorCriticConfig.shared_torso),
        )
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["network"])
        network.to(device).eval()
        return PolicyGreedyActor(network, device, ActorCritic.agent_name, config.evaluation_samples_actions())

    return evaluation.evaluate(config, ActorCritic.agent_name, build_actor)


if __name__ == "__main__":
    run_script(PolicyEvalConfig, {}, main)
