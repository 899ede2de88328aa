"""Plays a trained DQN greedily and records a video:
`python -m deep_rl_zoo.dqn.eval_agent --environment_name=Pong --load_checkpoint_file=best`.

`--load_checkpoint_file` takes `latest` (the newest run's last iteration), `best` (its best evaluation), a
run folder such as `checkpoints/DQN_Pong`, or a file such as `checkpoints/DQN_Pong/DQN_Pong_3.ckpt`.
"""

from deep_rl_zoo import replay_q_agents
from deep_rl_zoo.config import QEvalConfig, run_script
from deep_rl_zoo.dqn.agent import Dqn
from deep_rl_zoo.dqn.train import DqnConfig, build_network


def main(config: QEvalConfig) -> list[float]:
    return replay_q_agents.evaluate_epsilon_greedy(config, DqnConfig, build_network, Dqn.agent_name)


if __name__ == "__main__":
    run_script(QEvalConfig, {}, main)
