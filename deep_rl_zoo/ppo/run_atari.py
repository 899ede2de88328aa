"""Trains PPO on an Atari game: `python -m deep_rl_zoo.ppo.run_atari --num_actors=16 --actors_on_gpu`.

Defaults follow the PPO paper's Atari setting (Schulman et al. 2017, table 5) as the reference
implementations run it (OpenAI baselines, Stable-Baselines3 / RL Zoo, CleanRL): 8 actors x 128 steps,
4 epochs of 4 minibatches of 256, Adam 2.5e-4 annealed linearly to 0, clip 0.1, entropy 0.01,
gamma 0.99, lambda 0.95, gradient norm clipped to 0.5, advantages normalised per minibatch, rewards
clipped and a lost life terminal for learning only, frames scaled by 1/255 once (in the torso), and a
Nature CNN torso initialised orthogonally with gain sqrt(2) (policy head 0.01, value head 1).

What differed from them before (a run of the defaults stayed at -21 on Pong after 500k env steps,
with approx KL ~1e-4, clip fraction 0, a near-uniform policy in every update logged, and 79% of the
torso's features dead): the torso kept PyTorch's default initialisation, sqrt(6) times smaller per
layer than the references' orthogonal sqrt(2), so its features on Pong screens averaged 0.008
instead of 0.16 and the logits' spread across screens was 3e-6 instead of 9e-5. The first 12 updates
alone do not tell the two apart (seed 1, one process with 8 envs, the network's draw not fixed):
approx KL 1.5e-5..7.6e-4 and clip fraction 0..0.018 with the default torso, 2.5e-4..2.6e-3 and up to
0.055 with the orthogonal one (3 epochs), both near the low end of what Stable-Baselines3's PPO
shows on Pong (approx KL 4e-4..3e-3, clip fraction up to 0.10 over its first 11 updates); whether
the stall is gone is for a run of 1-2M env steps to show. 4 epochs instead of the paper's 3: what SB3's RL Zoo
and CleanRL run. `value_coef` 1.0 on the zoo's 0.5 * squared error is SB3's vf_coef 0.5 on the mean
squared error (CleanRL's 0.5 on half the squared error weighs the critic half as much).
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.ppo.train import PpoConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 40,
    "num_train_steps": 250_000,  # 1M frames per iteration: 10M env steps (40M frames) in all
    "num_eval_steps": 30_000,
    "num_actors": 8,
    "unroll_length": 128,
    "num_epochs": 4,
    "minibatch_size": 256,
    "learning_rate": 2.5e-4,
    "discount": 0.99,
    "gae_lambda": 0.95,
    "clip_epsilon": 0.1,
    "value_coef": 1.0,
    "entropy_coef": 0.01,
    "shared_torso": True,
}

if __name__ == "__main__":
    run_script(
        PpoConfig,
        DEFAULTS,
        main,
        exclude=frozenset({"hidden_sizes", "shared_torso", "normalize_observations", "initial_action_std"}),
    )
