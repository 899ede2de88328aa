"""Plays a trained Agent57 greedily with policy j = 0 (beta 0, so Q = Q_e; LSTM states carried, its own
episodic memory) and records a video:
`python -m deep_rl_zoo.agent57.eval_agent --environment_name=MountainCar-v0 --load_checkpoint_file=latest`
(`--obscure_probability` as NGU's).
"""

from deep_rl_zoo.agent57.agent import Agent57
from deep_rl_zoo.agent57.train import build_networks
from deep_rl_zoo.config import run_script
from deep_rl_zoo.ngu import eval_agent as ngu_eval


def main(config: ngu_eval.NguEvalConfig) -> list[float]:
    return ngu_eval.main(config, Agent57.agent_name, build_networks)


if __name__ == "__main__":
    run_script(ngu_eval.NguEvalConfig, {}, main)
