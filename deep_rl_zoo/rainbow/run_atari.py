"""Trains Rainbow on an Atari game: `python -m deep_rl_zoo.rainbow.run_atari --environment_name=Pong`.

Defaults follow Hessel et al. 2017 (Adam lr 6.25e-5, eps 1.5e-4; 3-step returns; 51 atoms on [-10, 10];
alpha 0.5, beta 0.4 -> 1; sigma_0 0.5; learning from 80k frames; a target copy every 32k frames), with
a smaller replay so it fits a laptop; pass `--replay_capacity=1000000` for the paper's setting.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.rainbow.train import RainbowConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "replay_capacity": 200_000,
    "min_replay_size": 20_000,  # 80k frames
    "batch_size": 32,
    "learning_rate": 6.25e-5,
    "adam_eps": 1.5e-4,
    "n_step": 3,
    "learn_interval": 4,
    "target_network_update_period": 2000,  # 8,000 env steps = 32k frames at one gradient step per 4
    "num_atoms": 51,
    "v_min": -10.0,  # returns of clipped rewards
    "v_max": 10.0,
    "noisy_sigma0": 0.5,
    "priority_exponent": 0.5,
    "importance_sampling_exponent_begin_value": 0.4,
    "importance_sampling_exponent_decay_steps": 5_000_000,  # num_iterations * num_train_steps
    "max_grad_norm": 10.0,
}

if __name__ == "__main__":
    run_script(RainbowConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
