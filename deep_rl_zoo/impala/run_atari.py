"""Trains IMPALA on an Atari game: `python -m deep_rl_zoo.impala.run_atari --num_actors=16 --actors_on_gpu`.

Defaults follow the IMPALA paper's Atari setting (Espeholt et al. 2018, table G.1) with the deep ResNet
torso: unrolls of 20 steps, batches of 32 unrolls, gamma 0.99, baseline cost 0.5, entropy cost 0.01,
gradient norm clipped at 40, rewards clipped, learning rate 6e-4 annealed to 0 (Adam here, RMSProp in
the paper). Pass `--lstm_size=256` for the paper's LSTM variant.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.impala.train import ImpalaConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 50,
    "num_train_steps": 250_000,  # 1M frames per iteration: 50M frames in all
    "num_eval_steps": 30_000,
    "num_actors": 16,
    "unroll_length": 20,
    "batch_size": 32,
    "learning_rate": 6e-4,
    "adam_eps": 1e-4,
    "discount": 0.99,
    "value_coef": 0.5,
    "entropy_coef": 0.01,
    "max_grad_norm": 40.0,
}

if __name__ == "__main__":
    run_script(ImpalaConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
