"""Trains SAC (discrete actions) on an Atari game:
`python -m deep_rl_zoo.sac.run_atari --num_actors=16 --actors_on_gpu`.

Defaults follow Christodoulou 2019 (table 1), but for the three below: Adam 3e-4, batch 64, gamma 0.99, a
gradient step every 4 env steps, 20k env steps before learning (here of the actors' initial policy, not of
a uniformly random one), and the target networks copied from the online ones every
8,000 env steps (tau 1 every 2,000 gradient steps: the table's 8,000 read as env steps, like its 20k
steps before learning and its gradient step every 4); a replay of 300k transitions (frames kept once) in
place of 1M.

(Polyak averaging by tau = 1/8000 after every gradient step, which this script used before, keeps the
targets a mean 8,000 gradient steps behind against the copy's 1,000: eight times the paper's lag.)

Three settings differ from the paper's, each because of Pong runs here (docs/agents/sac.md):
- the actor is a linear head on the first critic's torso, trained without touching it
  (`actor_on_critic_features`; the paper: a network of its own). An actor with a torso of its own went
  blind in each of five starts, its ReLU units silenced within a few thousand gradient steps; on the
  critic's torso it kept seeing, and its sampled evaluation rose from -20.1 at 100k env steps to -15.2 at
  400k (SAC_Pong_shared_s1);
- target entropy 0.89 log |A| (the paper: 0.98), CleanRL's, which found 0.98 unstable past 100k env steps;
- Adam's epsilon 1e-4 (PyTorch's default 1e-8), CleanRL's, which keeps Adam from blowing a gradient far
  below it up into a full step.
"""

from deep_rl_zoo.config import run_script
from deep_rl_zoo.sac.train import SacConfig, main

DEFAULTS = {
    "environment_name": "Pong",
    "num_iterations": 40,
    "num_train_steps": 250_000,  # 1M frames per iteration
    "num_eval_steps": 30_000,
    "num_actors": 16,
    "unroll_length": 64,
    "replay_capacity": 300_000,
    "min_replay_size": 20_000,
    "batch_size": 64,
    "updates_per_env_step": 0.25,
    "learning_rate": 3e-4,
    "discount": 0.99,
    "target_entropy_ratio": 0.89,  # the paper: 0.98 (see above)
    "adam_eps": 1e-4,
    "actor_on_critic_features": True,
    "target_update_rate": 1.0,  # a copy ...
    "target_update_period": 2_000,  # ... every 2,000 gradient steps = 8,000 env steps at 0.25 per env step
}

if __name__ == "__main__":
    run_script(SacConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
