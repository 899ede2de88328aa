"""Trains NGU on an Atari game: `python -m deep_rl_zoo.ngu.run_atari --environment_name=MontezumaRevenge`.

Defaults: R2D2's Atari ones (`r2d2.run_atari`: sequences of 80 with burn-in 40, Nature CNN + LSTM 512,
Adam 1e-4 eps 1e-3, 64 sequences per batch, no reward clipping, 30-minute episodes, 1M-step replay,
a gradient step per 200 env steps received) and NGU's own (Badia et al. 2020): beta 0.3, gamma 0.99 ..
0.997, k = 10, episodic memory of 30,000, L = 5, RND and the embedding on the frames.
Changed for a workstation: 16 actors, and so 8 policies rather than the paper's 32 over 256 actors
(actor i plays j = i mod N: with 32 policies only j = 0 .. 15 would be played, one actor each, and the
greedy j = 0 would be learned from actor 0's epsilon 0.4 alone; with 8, j = 0 has actors 0 and 8,
epsilons 0.4 and 0.4^(1 + 7 * 8 / 15) ~ 0.013), 5-step transformed double-Q targets rather than
Retrace, ICM's 1,152-feature embedding rather than the paper's 32.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.ngu.train import NguConfig, main
from deep_rl_zoo.r2d2.run_atari import DEFAULTS as R2D2_ATARI_DEFAULTS

DEFAULTS = {
    **{name: value for name, value in R2D2_ATARI_DEFAULTS.items() if name != "discount"},
    "environment_name": "MontezumaRevenge",
    "num_policies": 8,
}

if __name__ == "__main__":
    run_script(
        NguConfig,
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
