"""Plays a trained IMPALA agent (its most probable action, a sample on Atari; LSTM state carried
through each episode) and records a video of the first episode:
`python -m deep_rl_zoo.impala.eval_agent --environment_name=CartPole-v1 --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import evaluation
from deep_rl_zoo.config import PolicyEvalConfig, run_script, trained_config
from deep_rl_zoo.impala.agent import Impala, ImpalaGreedyActor
from deep_rl_zoo.impala.train import ImpalaConfig, build_network


def main(config: PolicyEvalConfig) -> list[float]:
    def build_actor(env, device, checkpoint):
        # Rebuild the trained architecture (torso sizes, LSTM) from the run's own flags.
        network = build_network(trained_config(ImpalaConfig, checkpoint), env)
        if checkpoint is not None:
            network.load_state_dict(checkpoint["agent"]["network"])
        network.to(device).eval()
        return ImpalaGreedyActor(network, device, Impala.agent_name, config.evaluation_samples_actions())

    return evaluation.evaluate(config, Impala.agent_name, build_actor)


if __name__ == "__main__":
    run_script(PolicyEvalConfig, {}, main)
