"""Trains DQN on an Atari game: `python -m deep_rl_zoo.dqn.run_atari --environment_name=Pong`.

Defaults follow the Nature DQN (Mnih et al. 2015), with a smaller replay so it fits a laptop; pass
`--replay_capacity=1000000` for the paper's setting (about 7 GB thanks to storing each frame once).
Also changed: Adam (lr 1e-4, eps 1.5e-4) in place of the paper's RMSProp, and the gradient's global norm
clipped at 10 on top of the Huber loss (`--max_grad_norm=0` turns the clip off).

For a fast Pong rather than the paper's DQN, `--flagfile=configs/dqn_pong_fast.flags` (tuned after
Tianshou's Atari DQN: 3-step returns, fewer gradient steps, a lower epsilon floor) reached a greedy
mean of 18.2 over 15 games at 2M env steps in 84 minutes on a 2-core AVX-512 EPYC with avx512_bf16
(results/atari/Pong/DQN_Pong_fast_s1; benchmarks/README.md, "Time to a score").
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.dqn.train import DqnConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 20,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 125_000,
    "replay_capacity": 200_000,
    "min_replay_size": 50_000,
    "batch_size": 32,
    "learning_rate": 1e-4,
    "adam_eps": 1.5e-4,
    "learn_interval": 4,
    "target_network_update_period": 2500,  # 10,000 env steps at one gradient step per 4
    "exploration_epsilon_decay_steps": 1_000_000,
    "exploration_epsilon_end_value": 0.1,
    "eval_exploration_epsilon": 0.05,
    "max_grad_norm": 10.0,
}

if __name__ == "__main__":
    run_script(DqnConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
