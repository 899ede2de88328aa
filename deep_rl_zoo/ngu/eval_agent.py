"""Plays a trained NGU greedily with its exploitative policy j = 0 (carrying its LSTM state and its own
episodic memory) and records a video:
`python -m deep_rl_zoo.ngu.eval_agent --environment_name=MountainCar-v0 --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import run_support
from deep_rl_zoo.config import EvalConfig, run_script
from deep_rl_zoo.ngu.agent import Ngu
from deep_rl_zoo.ngu.train import build_networks, evaluation_actor


def main(config: EvalConfig, agent_name: str = Ngu.agent_name, build=build_networks) -> list[float]:
    def build_actor(env, device, checkpoint):
        num_actions = int(env.action_space.n)
        saved_config = checkpoint["config"] if checkpoint else {}
        networks = build(saved_config, env.observation_space.shape, num_actions)
        if checkpoint is not None:
            networks.load_state_dict(checkpoint["agent"]["networks"])
        networks.to(device).eval()
        epsilon = run_support.eval_exploration_epsilon(config)
        return evaluation_actor(saved_config, networks, num_actions, epsilon, config.seed, device, agent_name)

    return run_support.evaluate(config, agent_name, build_actor)


if __name__ == "__main__":
    run_script(EvalConfig, {}, main)
