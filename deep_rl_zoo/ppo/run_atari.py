"""Trains PPO on an Atari game: `python -m deep_rl_zoo.ppo.run_atari --num_actors=16 --actors_on_gpu`.

Defaults follow the PPO paper's Atari setting (Schulman et al. 2017, table 5): 8 actors x 128 steps,
3 epochs of minibatches of 256, Adam 2.5e-4 annealed, clip 0.1, entropy 0.01, gamma 0.99, lambda 0.95.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.ppo.train import PpoConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 40,
    "num_train_steps": 250_000,  # 1M frames per iteration: 10M frames in all
    "num_eval_steps": 30_000,
    "num_actors": 8,
    "unroll_length": 128,
    "num_epochs": 3,
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
