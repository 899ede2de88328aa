"""Plays a trained C51 greedily and records a video:
`python -m deep_rl_zoo.c51_dqn.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import replay_q_agents
from deep_rl_zoo.c51_dqn.agent import C51Dqn
from deep_rl_zoo.c51_dqn.train import C51Config, build_network
from deep_rl_zoo.config import QEvalConfig, run_script


def main(config: QEvalConfig) -> list[float]:
    return replay_q_agents.evaluate_epsilon_greedy(config, C51Config, build_network, C51Dqn.agent_name)


if __name__ == "__main__":
    run_script(QEvalConfig, {}, main)
