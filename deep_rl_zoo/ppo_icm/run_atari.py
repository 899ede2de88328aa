"""Trains PPO-ICM on an Atari game:
`python -m deep_rl_zoo.ppo_icm.run_atari --environment_name=MontezumaRevenge --num_actors=16 --actors_on_gpu`.

ICM's setting is Pathak et al. 2017's (arXiv:1705.05363): eta 0.01, beta 0.2, Adam 1e-3, raw intrinsic
reward (not normalised); the policy's is PPO's Atari setting (Schulman et al. 2017, table 5: 8 actors x
128 steps, 3 epochs of minibatches of 256, clip 0.1, entropy 0.01, gamma 0.99, lambda 0.95). Life loss
is not terminal and extrinsic rewards are clipped, as in Burda et al.'s curiosity experiments.

On Pong these defaults reached a greedy mean of +7.5 at 500k env steps and +18.5 over 25 games at 1M
(seed 1, `--bfloat16`; results/atari/Pong/PPO-ICM_Pong_s1, docs/agents/ppo_icm.md).
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.ppo_icm.train import PpoIcmConfig, main

DEFAULTS = {
    "environment_name": "MontezumaRevenge",
    "num_iterations": 40,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 20_000,
    "max_episode_steps": 4_500,  # 18,000 frames
    "terminal_on_life_loss": False,
    "clip_reward": True,
    "num_parallel_envs": 8,  # spread over actor processes to suit the cores (2 x 4 on 2 cores)
    "unroll_length": 128,
    "num_epochs": 3,
    "minibatch_size": 256,
    "learning_rate": 1e-3,
    "clip_epsilon": 0.1,
    "discount": 0.99,
    "entropy_coef": 0.01,
    "shared_torso": True,
    "eta": 0.01,
    "normalize_intrinsic_reward": False,
    "normalize_extrinsic_rewards": False,
}

if __name__ == "__main__":
    run_script(
        PpoIcmConfig,
        DEFAULTS,
        main,
        exclude=frozenset({"hidden_sizes", "shared_torso", "normalize_observations", "icm_hidden_sizes"}),
    )
