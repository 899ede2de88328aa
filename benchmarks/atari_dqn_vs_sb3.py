"""Env steps per second of DQN training on Pong: the zoo's `dqn.run_atari` against Stable-Baselines3's DQN.

Same settings on both sides: one env, one gradient step on 32 transitions every 4 env steps, Adam 1e-4
(eps 1.5e-4), Huber loss, gradient norm clipped to 10, gamma 0.99, a target copy every 10,000 env steps,
the Nature CNN on 4 stacked 84x84 frames. What is timed is the learning regime of a long run: the
replay holds `--replay_capacity` transitions (default 10,000; the run_atari default of 200,000 changes
memory, not speed), learning starts after 1,000 env steps, and epsilon has decayed to its final 0.1
by then (so about 90% of the actions take a forward pass, as for the bulk of a real run).

- SB3: `DQN("CnnPolicy", VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=1), 4))` with its
  Atari wrappers, `train_freq=4, gradient_steps=1, target_update_interval=10_000`, timed around
  `learn(env_steps)`. Profile: `train` (the gradient steps), the env's `step`, and the rest of
  `collect_rollouts` (action selection, replay writes).
- The zoo: `python -m deep_rl_zoo.dqn.run_atari --environment_name=Pong` with its defaults but for the
  replay size, warm-up and epsilon decay above, one iteration of `env_steps`, no evaluation; the rate is
  the training phase's `train_steps_per_second` from its results.csv. Profile: inside `Dqn._learn` (the
  gradient steps: replay sample, frame gather, forwards, backward, Adam) and the rest (env step,
  action selection, replay writes). `--zoo_flags` adds flags.

Each run is a fresh process; the contenders alternate over `--rounds`. SB3 keeps torch's default thread
count (every core) unless `--sb3_threads` says otherwise. Target: the zoo >= 2x SB3's env steps/s.
See `sb3_atari.py` for the scratch venv.

    python benchmarks/atari_dqn_vs_sb3.py [--sb3_python=...] [--rounds=2] [--env_steps=6000]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import atari_learner_speed  # noqa: E402  (benchmarks/ is not a package)
import numpy as np  # noqa: E402
import sb3_atari  # noqa: E402

REPLAY_CAPACITY = 10_000
WARM_UP = 1_000

SB3_CHILD = (
    """
import json, sys, time
import ale_py, gymnasium as gym, torch
from stable_baselines3 import DQN
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.vec_env import VecFrameStack
gym.register_envs(ale_py)
seed, env_steps, capacity, warm_up = (int(a) for a in sys.argv[1:5])
env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=1, seed=seed), n_stack=4)
model = DQN(
    "CnnPolicy", env, buffer_size=capacity, learning_starts=warm_up, batch_size=32, learning_rate=1e-4,
    train_freq=4, gradient_steps=1, target_update_interval=10_000, gamma=0.99, max_grad_norm=10,
    exploration_initial_eps=1.0, exploration_final_eps=0.1, exploration_fraction=warm_up / env_steps,
    policy_kwargs=dict(optimizer_kwargs=dict(eps=1.5e-4)), seed=seed, device="cpu", verbose=0,
)
profile = {"train (gradient steps)": 0.0, "env step": 0.0, "rest (act, replay writes)": 0.0}
REST, ENV, TRAIN = "rest (act, replay writes)", "env step", "train (gradient steps)"
"""
    + sb3_atari.SB3_TIMED_LEARN
)

ZOO_CHILD = sb3_atari.zoo_child(
    "dqn", "Dqn._learn", "gradient steps (Dqn._learn)", "rest (env step, act, replay writes)"
)


def flops_per_env_step(env_steps: int) -> float:
    """DQN's arithmetic per env step averaged over a run of `env_steps`, counted on the zoo's agent
    (`atari_learner_speed --part=bound`): a gradient step every 4 env steps after the warm-up, and a
    forward wherever epsilon leaves the action to the network (it falls from 1 to 0.1 over the warm-up,
    then stays)."""
    dqn, config = atari_learner_speed.build_dqn(np.random.default_rng(0), warm_up=40)
    gradient_step, forward = atari_learner_speed.dqn_flops(dqn)
    learning = env_steps - WARM_UP
    forwards = 0.45 * WARM_UP + 0.9 * learning
    return (learning / config.learn_interval * gradient_step + forwards * forward) / env_steps


def main() -> int:
    args = sb3_atari.parse_args(__doc__.splitlines()[0], default_env_steps=6_000)
    sizes = [str(args.env_steps), str(REPLAY_CAPACITY), str(WARM_UP)]
    zoo_sizes = [
        f"--replay_capacity={REPLAY_CAPACITY}",
        f"--min_replay_size={WARM_UP}",
        f"--exploration_epsilon_decay_steps={WARM_UP}",
    ]
    if args.env_steps <= WARM_UP:
        raise SystemExit(f"--env_steps must be above the warm-up of {WARM_UP:,} env steps")
    return sb3_atari.compare(
        args,
        run_sb3=lambda python, seed: sb3_atari.run_child(
            python, SB3_CHILD, [str(seed), *sizes], args.sb3_threads
        ),
        run_zoo=lambda seed: sb3_atari.run_zoo(
            ZOO_CHILD, seed, args.env_steps, [*zoo_sizes, *args.zoo_flags.split()]
        ),
        flops_per_env_step=flops_per_env_step(args.env_steps),
    )


if __name__ == "__main__":
    sys.exit(main())
