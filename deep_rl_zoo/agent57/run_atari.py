"""Trains Agent57 on an Atari game: `python -m deep_rl_zoo.agent57.run_atari --environment_name=Pitfall`.

Defaults: NGU's Atari ones (`ngu.run_atari`, R2D2's settings) with the paper's 32 policies (the bandit
lets every actor play every policy, so NGU's reason for fewer does not apply) plus the meta-controller's
(window 160, beta 1, epsilon 0.5), the appendix's discount family (0.9999 for the exploitative j = 0,
0.997 at j = 7, down to 0.99 at j = 31), and NGU's table's learner settings (transformed Retrace 0.95, Adam
epsilon 1e-4, a target copy every 1,500 steps, no importance-sampling weights). Changed as for NGU (16
actors; the paper's larger replay, longer traces and its 256 actors do not fit a workstation).
"""

from deep_rl_zoo.agent57.train import Agent57Config, main
from deep_rl_zoo.config import run_script
from deep_rl_zoo.ngu.run_atari import DEFAULTS as NGU_ATARI_DEFAULTS

DEFAULTS = {
    **NGU_ATARI_DEFAULTS,
    "environment_name": "Pitfall",
    "num_policies": 32,
    "discount_family": "agent57",  # the appendix: gamma_0 = 0.9999, gamma_7 = 0.997, gamma_31 = 0.99
    "gamma_exploit": 0.9999,
    "gamma_max": 0.997,
    "gamma_min": 0.99,
}

if __name__ == "__main__":
    run_script(
        Agent57Config,
        DEFAULTS,
        main,
        exclude=frozenset(
            {
                "hidden_sizes",
                "unroll_length",
                "discount",
                "embedding_hidden_sizes",
                "rnd_hidden_sizes",
                "rnd_feature_size",
            }
        ),
    )
