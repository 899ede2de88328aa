"""Plays a trained QR-DQN greedily and records a video:
`python -m deep_rl_zoo.qr_dqn.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import replay_q_agents
from deep_rl_zoo.config import QEvalConfig, run_script
from deep_rl_zoo.qr_dqn.agent import QrDqn
from deep_rl_zoo.qr_dqn.train import QrDqnConfig, build_network


def main(config: QEvalConfig) -> list[float]:
    return replay_q_agents.evaluate_epsilon_greedy(config, QrDqnConfig, build_network, QrDqn.agent_name)


if __name__ == "__main__":
    run_script(QEvalConfig, {}, main)
