"""Trains PPO on an Atari game: `python -m deep_rl_zoo.ppo.run_atari --num_actors=16 --actors_on_gpu`.

Defaults follow the PPO paper's Atari setting (Schulman et al. 2017, table 5) as the reference
implementations run it (OpenAI baselines, Stable-Baselines3 / RL Zoo, CleanRL): 8 actors x 128 steps,
4 epochs of 4 minibatches of 256, Adam 2.5e-4 annealed linearly to 0, clip 0.1, entropy 0.01,
gamma 0.99, lambda 0.95, gradient norm clipped to 0.5, advantages normalised per minibatch, rewards
clipped and a lost life terminal for learning only, frames scaled by 1/255 once (in the torso), and a
Nature CNN torso initialised orthogonally with gain sqrt(2) (policy head 0.01, value head 1).

Two settings differ from the paper and follow RL Zoo and CleanRL instead: 4 epochs rather than 3, and
`value_coef` 1.0 on the zoo's 0.5 * squared error, which is SB3's vf_coef 0.5 on the mean squared error.
Evaluation samples actions from the policy (`--noeval_sample_actions` for arg-max; docs/findings.md).
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.ppo.train import PpoConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 40,
    "num_train_steps": 250_000,  # 1M frames per iteration: 10M env steps (40M frames) in all
    "num_eval_steps": 30_000,
    "num_parallel_envs": 8,
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
