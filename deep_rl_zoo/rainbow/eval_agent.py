"""Plays a trained Rainbow greedily (mean weights of its noisy layers) and records a video:
`python -m deep_rl_zoo.rainbow.eval_agent --environment_name=Pong --load_checkpoint_file=latest`.

`--eval_exploration_epsilon` adds epsilon-greedy actions on top (by default 0.01 on Atari).
"""

from deep_rl_zoo import replay_q_agents
from deep_rl_zoo.config import QEvalConfig, run_script
from deep_rl_zoo.rainbow.agent import Rainbow
from deep_rl_zoo.rainbow.train import RainbowConfig, build_network


def main(config: QEvalConfig) -> list[float]:
    return replay_q_agents.evaluate_epsilon_greedy(config, RainbowConfig, build_network, Rainbow.agent_name)


if __name__ == "__main__":
    run_script(QEvalConfig, {}, main)
