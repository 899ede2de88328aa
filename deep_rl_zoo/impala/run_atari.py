"""Trains IMPALA on an Atari game: `python -m deep_rl_zoo.impala.run_atari --num_actors=16 --actors_on_gpu`.

Defaults follow the IMPALA paper's Atari setting (Espeholt et al. 2018, table G.1): unrolls of 20
steps, batches of 32 unrolls, gamma 0.99, baseline cost 0.5, entropy cost 0.01, gradient norm clipped at
40, rewards clipped, learning rate 6e-4 annealed to 0 (Adam here, RMSProp in the paper). Pass
`--lstm_size=256` for the paper's LSTM variant.

The torso is the paper's shallow one (its figure 3, left: two convolutions and a 256-unit layer), not
the 15-layer ResNet its best Atari-57 results use (`--image_torso=deep`). The paper reports both; the
ResNet takes about 20x the CPU time per frame, forward and backward, so on a CPU it decides the speed:
on Pong, 2 cores of an AVX2 EPYC shared with another run, 32 env steps/s with the ResNet against 241
with the shallow torso (31.0 against 4.1 CPU seconds per 1,000 env steps; `python
benchmarks/atari_speed_table.py --agents=impala --env_steps=4096 --zoo_flags=--image_torso=deep`, then
`shallow`), so 3M env steps take about a day with it and a few hours without. On a GPU learner choose
`--image_torso=deep`.

On a 2-core CPU's budget of 3M env steps, Pong (seed 1) left random play only with smaller batches:
`--batch_size=4 --num_actors=4` (80 env steps per gradient step, as A2C's) reached -18.0 over 30 games at
3M, rising from 1.5M on (results/atari/Pong/IMPALA_Pong_batch4_s1); the paper's 32 was still at random
play, its policy uniform, at 750k, where that run was stopped. The same command with
`--noanneal_learning_rate` reached -9.9 over 21 games at 3M (best -7.9 at 2.75M;
results/atari/Pong/IMPALA_Pong_batch4_noanneal_s1): the anneal to 0 over a 3M-step command's own horizon
cost most of it. None reaches 0 there: see docs/agents/impala.md.
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
    "image_torso": "shallow",  # the ResNet is ~20x the CPU time per frame: see above
}

if __name__ == "__main__":
    run_script(ImpalaConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
