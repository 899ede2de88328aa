"""Trains NGU on an Atari game: `python -m deep_rl_zoo.ngu.run_atari --environment_name=MontezumaRevenge`.

Defaults, the paper's (Badia et al. 2020, table of hyper-parameters) unless said: 4 stacked frames, no
life-loss terminal, no reward clipping (h takes its place), 30-minute episodes, Nature CNN + LSTM 512,
Adam lr 1e-4 eps 1e-4 (embedding and RND 5e-4), gradient-norm clip 40 (each network on its own),
64 sequences per batch, a target copy every 1,500 gradient steps, priority exponent 0.9 and no
importance-sampling weights (exponent 0), transformed Retrace with lambda 0.95 and an epsilon-greedy
target policy (0.01), beta 0.3, gamma 0.99 .. 0.997, k = 10, episodic memory of 30,000, L = 5, RND and
the embedding on the frames, learning the last 5 transitions of each replayed sequence, evaluation
epsilon 0.001. Sequences as R2D2's (`r2d2.run_atari`).

Changed for a workstation: 16 actors, and so 8 policies rather than the paper's 32 over 256 actors
(actor i plays j = i mod N: with 32 policies only j = 0 .. 15 would be played, one actor each, and the
greedy j = 0 would be learned from actor 0's epsilon 0.4 alone; with 8, j = 0 has actors 0 and 8,
epsilons 0.4 and 0.4^(1 + 7 * 8 / 15) ~ 0.013), a 1M-step replay and a gradient step per 200 env steps
received (as `r2d2.run_atari`, which says why), ICM's 1,152-feature embedding rather than the paper's
32, a ReLU layer of 512 before a plain Q head (no dueling head).
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.ngu.train import NguConfig, main
from deep_rl_zoo.r2d2.run_atari import DEFAULTS as R2D2_ATARI_DEFAULTS

# R2D2's environment, network, sequence and replay-size settings, stated here where NGU's differ.
SHARED_WITH_R2D2 = (
    "num_iterations",
    "num_train_steps",
    "num_eval_steps",
    "max_episode_steps",
    "terminal_on_life_loss",
    "clip_reward",
    "num_actors",
    "burn_in",
    "trace_length",
    "replay_period",
    "lstm_size",
    "head_hidden_sizes",
    "replay_capacity",
    "min_replay_size",
    "batch_size",
    "updates_per_env_step",
    "learning_rate",
    "n_step",
    "eval_exploration_epsilon",
    "max_grad_norm",
)

DEFAULTS = {
    **{name: R2D2_ATARI_DEFAULTS[name] for name in SHARED_WITH_R2D2},
    "environment_name": "MontezumaRevenge",
    "num_policies": 8,
    "adam_eps": 1e-4,  # R2D2: 1e-3
    "target_network_update_period": 1500,  # R2D2: 2,500
    "importance_sampling_exponent": 0.0,  # R2D2's table: 0.6
    "q_target": "retrace",  # R2D2: 5-step double-Q
    "retrace_lambda": 0.95,
    "retrace_target_epsilon": 0.01,
    "auxiliary_steps": 5,  # the paper's: the embedding and RND learn the last 5 frames of each sequence
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
