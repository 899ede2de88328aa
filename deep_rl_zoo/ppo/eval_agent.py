"""Plays a trained PPO agent and records a video of the first episode: discrete agents take their most
probable action (a sample on Atari: --eval_sample_actions), continuous ones the Gaussian's mean
(clipped to the action bounds).
`python -m deep_rl_zoo.ppo.eval_agent --environment_name=CartPole-v1 --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import evaluation, unrolls
from deep_rl_zoo.config import PolicyEvalConfig, run_script, trained_config
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.ppo.agent import Ppo
from deep_rl_zoo.ppo.train import PpoConfig, build_network


def main(config: PolicyEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        # Rebuild the trained architecture (and its normaliser) from the run's own flags.
        network = build_network(trained_config(PpoConfig, checkpoint), env)
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["network"])
        network.to(device).eval()
        return unrolls.ClippedActionActor(
            PolicyGreedyActor(network, device, Ppo.agent_name, config.evaluation_samples_actions()),
            env.action_space,
        )

    return evaluation.evaluate(config, Ppo.agent_name, build_actor, action_space="any")


if __name__ == "__main__":
    run_script(PolicyEvalConfig, {}, main)
