"""Plays a trained SAC (discrete) agent with its most probable action (a sample on Atari) and records a
video of the first episode:
`python -m deep_rl_zoo.sac.eval_agent --environment_name=CartPole-v1 --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import evaluation
from deep_rl_zoo.config import PolicyEvalConfig, run_script, trained_config
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.sac.agent import Sac
from deep_rl_zoo.sac.train import SacConfig, build_policy_network, load_trained_part


def main(config: PolicyEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        # Rebuild the trained policy's architecture from the run's own flags.
        network = build_policy_network(trained_config(SacConfig, checkpoint), env)
        if checkpoint is not None:
            load_trained_part(network, checkpoint, "policy")
        network.to(device).eval()
        return PolicyGreedyActor(network, device, Sac.agent_name, config.evaluation_samples_actions())

    return evaluation.evaluate(config, Sac.agent_name, build_actor)


if __name__ == "__main__":
    run_script(PolicyEvalConfig, {}, main)
