"""Plays a trained Prioritized DQN greedily and records a video:
`python -m deep_rl_zoo.prioritized_dqn.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.
"""

from deep_rl_zoo import replay_q_agents
from deep_rl_zoo.config import QEvalConfig, run_script
from deep_rl_zoo.dqn.train import build_network
from deep_rl_zoo.prioritized_dqn.agent import PrioritizedDqn
from deep_rl_zoo.prioritized_dqn.train import PrioritizedDqnConfig


def main(config: QEvalConfig) -> list[float]:
    return replay_q_agents.evaluate_epsilon_greedy(
        config, PrioritizedDqnConfig, build_network, PrioritizedDqn.agent_name
    )


if __name__ == "__main__":
    run_script(QEvalConfig, {}, main)
