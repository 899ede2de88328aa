"""Plays a trained Double DQN greedily and records a video:
`python -m deep_rl_zoo.double_dqn.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import replay_q_agents
from deep_rl_zoo.config import QEvalConfig, run_script
from deep_rl_zoo.double_dqn.agent import DoubleDqn
from deep_rl_zoo.double_dqn.train import DoubleDqnConfig
from deep_rl_zoo.dqn.train import build_network


def main(config: QEvalConfig) -> list[float]:
    return replay_q_agents.evaluate_epsilon_greedy(
        config, DoubleDqnConfig, build_network, DoubleDqn.agent_name
    )


if __name__ == "__main__":
    run_script(QEvalConfig, {}, main)
