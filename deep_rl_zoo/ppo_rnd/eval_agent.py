"""Plays a trained PPO-RND agent greedily (its most probable action; a sample on Atari) and records a
video of the first episode:
`python -m deep_rl_zoo.ppo_rnd.eval_agent --environment_name=MountainCar-v0 --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import evaluation
from deep_rl_zoo.config import PolicyEvalConfig, run_script, trained_config
from deep_rl_zoo.greedy_actors import PolicyGreedyActor
from deep_rl_zoo.ppo_rnd.agent import PpoRnd
from deep_rl_zoo.ppo_rnd.train import PpoRndConfig, acting_policy, build_network


def main(config: PolicyEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        # Rebuild the trained architecture (and its normaliser) from the run's own flags.
        network = build_network(
            trained_config(PpoRndConfig, checkpoint, environment_name=config.environment_name), env
        )
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["network"])
        network.to(device).eval()
        return PolicyGreedyActor(
            acting_policy(network), device, PpoRnd.agent_name, config.evaluation_samples_actions()
        )

    return evaluation.evaluate(config, PpoRnd.agent_name, build_actor)


if __name__ == "__main__":
    run_script(PolicyEvalConfig, {"environment_name": "MountainCar-v0"}, main)
