"""Env steps per second of PPO training on Pong: the zoo's `ppo.run_atari` against Stable-Baselines3's PPO.

Same hyper-parameters on both sides (the PPO paper's Atari setting, which `ppo.run_atari` defaults to):
8 envs x 128-step rollouts, 4 epochs of minibatches of 256, Adam 2.5e-4 decayed linearly to 0 over the
run, clip 0.1, entropy 0.01, value weight 0.5 on the mean squared error (the zoo's 1.0 on half of it),
gamma 0.99, lambda 0.95, gradient norm clipped to 0.5, the Nature CNN on 4 stacked 84x84 frames.

- SB3: `PPO("CnnPolicy", VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=8), 4))`, its Atari
  wrappers (no-op starts, frame skip 4 with max-pool, life loss terminal, fire reset, 84x84 grey,
  reward clipping), timed around `learn(env_steps)`. Profile: time in `collect_rollouts` (of which
  in the vectorised env's `step`), and in `train`.
- The zoo: `python -m deep_rl_zoo.ppo.run_atari --environment_name=Pong` with its defaults (the layout
  the run prints: 8 envs spread over at most one actor process per core) and one iteration of `env_steps` training steps, no evaluation; the rate is the training
  phase's `train_steps_per_second` from its results.csv. Profile: time inside the learner's update
  (`Ppo.learn`), the rest of the training phase being the actors' unrolls and their transfer (the
  actors wait while the learner learns: synchronous PPO). `--zoo_flags` adds flags (e.g.
  `--zoo_flags="--num_actors=1 --num_envs=8"`: one actor stepping 8 vector envs).

Each run is a fresh process; the contenders alternate over `--rounds` (SB3 first in even rounds). SB3
keeps torch's default thread count (every core) unless `--sb3_threads` says otherwise. Target: the
zoo >= 2x SB3's env steps/s. See `sb3_atari.py` for the scratch venv.

    python benchmarks/atari_ppo_vs_sb3.py [--sb3_python=...] [--rounds=2] [--env_steps=10240]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import atari_learner_speed  # noqa: E402  (benchmarks/ is not a package)
import numpy as np  # noqa: E402
import sb3_atari  # noqa: E402

SB3_CHILD = (
    """
import json, sys, time
import ale_py, gymnasium as gym, torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.vec_env import VecFrameStack
gym.register_envs(ale_py)
seed, env_steps = int(sys.argv[1]), int(sys.argv[2])
env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=8, seed=seed), n_stack=4)
model = PPO(
    "CnnPolicy", env, n_steps=128, n_epochs=4, batch_size=256, learning_rate=lambda left: 2.5e-4 * left,
    clip_range=0.1, ent_coef=0.01, vf_coef=0.5, gamma=0.99, gae_lambda=0.95, max_grad_norm=0.5,
    seed=seed, device="cpu", verbose=0,
)
profile = {"rollouts: env step": 0.0, "rollouts: rest (policy forward, buffer)": 0.0, "train": 0.0}
REST, ENV, TRAIN = "rollouts: rest (policy forward, buffer)", "rollouts: env step", "train"
"""
    + sb3_atari.SB3_TIMED_LEARN
)

ZOO_CHILD = sb3_atari.zoo_child(
    "ppo", "Ppo.learn", "learner update (Ppo.learn)", "actors' unrolls and transfer"
)


def flops_per_env_step() -> float:
    """PPO's arithmetic per env step, counted on the zoo's learner (`atari_learner_speed --part=bound`)."""
    return atari_learner_speed.ppo_flops_per_env_step(
        *atari_learner_speed.build_ppo(np.random.default_rng(0))
    )


def main() -> int:
    args = sb3_atari.parse_args(__doc__.splitlines()[0], default_env_steps=10_240)
    return sb3_atari.compare(
        args,
        run_sb3=lambda python, seed: sb3_atari.run_child(
            python, SB3_CHILD, [str(seed), str(args.env_steps)], args.sb3_threads
        ),
        run_zoo=lambda seed: sb3_atari.run_zoo(ZOO_CHILD, seed, args.env_steps, args.zoo_flags.split()),
        flops_per_env_step=flops_per_env_step(),
    )


if __name__ == "__main__":
    sys.exit(main())
