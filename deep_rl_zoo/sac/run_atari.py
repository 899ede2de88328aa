"""Trains SAC (discrete actions) on an Atari game:
`python -m deep_rl_zoo.sac.run_atari --num_actors=16 --actors_on_gpu`.

Defaults follow Christodoulou 2019 (table 1): Adam 3e-4, batch 64, gamma 0.99, a gradient step every
4 env steps, 20k env steps before learning (here of the actors' initial policy, not of a uniformly
random one), target entropy 0.98 log |A|, and the target networks copied from the online ones every
8,000 env steps (tau 1 every 2,000 gradient steps: the table's 8,000 read as env steps, like its 20k
steps before learning and its gradient step every 4); a replay of 300k transitions (frames kept once) in
place of 1M.

(Polyak averaging by tau = 1/8000 after every gradient step, which this script used before, keeps the
targets a mean 8,000 gradient steps behind against the copy's 1,000: eight times the paper's lag.)

On Pong an actor with a convolutional torso of its own went blind within a few thousand gradient steps in
every run here (its ReLU units silenced, one action distribution for every screen; docs/agents/sac.md).
`--actor_on_critic_features` puts it on the first critic's torso instead; it is not the default until a
run shows it learning a game.
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
    "target_entropy_ratio": 0.98,
    "target_update_rate": 1.0,  # a copy ...
    "target_update_period": 2_000,  # ... every 2,000 gradient steps = 8,000 env steps at 0.25 per env step
}

if __name__ == "__main__":
    run_script(SacConfig, DEFAULTS, main, exclude=frozenset({"hidden_sizes"}))
