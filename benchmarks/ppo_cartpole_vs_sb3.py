"""Wall time of 100,000 CartPole-v1 env steps: our PPO (default run_classic flags) against Stable-Baselines3.

Stable-Baselines3 is not a dependency of the zoo and this script installs nothing: point `--sb3_python`
at the interpreter of a scratch environment that has it, e.g.

    python3 -m venv /tmp/sb3venv && /tmp/sb3venv/bin/pip install torch==2.13.0 stable-baselines3 gymnasium
    python benchmarks/ppo_cartpole_vs_sb3.py --sb3_python=/tmp/sb3venv/bin/python [--rounds=2]

What runs, each in a fresh subprocess with one torch thread per process, on the CPU:
- SB3: `PPO("MlpPolicy")` with rl-baselines3-zoo's tuned CartPole-v1 hyper-parameters (8 envs x 32
  steps, 20 epochs of minibatches of 256, linear learning-rate and clip decay), timed around
  `model.learn(100_000)` only. Its final greedy policy is then scored on 10 episodes, untimed.
- Ours: `ppo.train.main` with PpoConfig's defaults and `stop_when_solved=False`, so it trains the full
  100,000 env steps (10 iterations of 10,000). Timed around the whole `main`: that includes starting
  the actor processes and, after every iteration, a 5,000-step greedy evaluation, a CSV row and a
  checkpoint, none of which SB3's figure contains, so the ratio is conservative; the training phases
  alone (from the CSV's steps/s) are shown too.
  "solved at" is the env steps of the first iteration whose greedy evaluation (>= 10 whole episodes)
  reached 475.

The shared machine is noisy, so the runs alternate in one invocation (SB3 then ours, then ours then
SB3, ...) and the ratio is total(ours) / total(SB3) over all rounds.
"""

import sys

import sb3_comparison  # benchmarks/ is this script's directory, so on sys.path

ENV_STEPS = 100_000

SB3_CHILD = """
import json, sys, time
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
import gymnasium as gym
seed, env_steps = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(1)
# rl-baselines3-zoo, hyperparams/ppo.yml, CartPole-v1 (n_timesteps 1e5).
model = PPO(
    "MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=seed), n_steps=32, batch_size=256,
    gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
    learning_rate=lambda progress: progress * 1e-3, clip_range=lambda progress: progress * 0.2,
    seed=seed, device="cpu", verbose=0,
)
start = time.perf_counter()
model.learn(total_timesteps=env_steps)
wall_s = time.perf_counter() - start
mean, _ = evaluate_policy(model, gym.make("CartPole-v1"), n_eval_episodes=10, deterministic=True, warn=False)
print(json.dumps({"wall_s": wall_s, "final_eval": float(mean)}))
"""

OURS_CHILD = """
import csv, json, os, sys, tempfile, time
from deep_rl_zoo.ppo import train
if __name__ == "__main__":
    seed, env_steps = int(sys.argv[1]), int(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="ppo_vs_sb3_") as work_dir:
        csv_path = os.path.join(work_dir, "results.csv")
        config = train.PpoConfig(
            seed=seed,
            num_iterations=10,
            num_train_steps=env_steps // 10,
            num_eval_steps=5_000,
            stop_when_solved=False,
            checkpoint_dir=os.path.join(work_dir, "checkpoints"),
            runs_dir=os.path.join(work_dir, "runs"),
            results_csv_path=csv_path,
            use_tensorboard=False,
            show_progress=False,
        )
        start = time.perf_counter()
        state = train.main(config)
        wall_s = time.perf_counter() - start
        with open(csv_path) as f:
            rows = list(csv.DictReader(f))
    solved = [int(r["train_env_steps"]) for r in rows
              if float(r["eval_mean_episode_return"]) >= 475 and int(r["eval_num_episodes"]) >= 10]
    steps = [int(r["train_env_steps"]) for r in rows]
    phase_steps = [b - a for a, b in zip([0] + steps[:-1], steps)]
    train_s = sum(n / float(r["train_steps_per_second"]) for n, r in zip(phase_steps, rows))
    print(json.dumps({"wall_s": wall_s, "train_s": train_s, "env_steps": state.train_env_steps,
                      "final_eval": float(rows[-1]["eval_mean_episode_return"]),
                      "solved_at": solved[0] if solved else None}))
"""


def main() -> int:
    args = sb3_comparison.parse_args(__doc__.splitlines()[0])
    return sb3_comparison.compare(
        args,
        ENV_STEPS,
        run_sb3=lambda seed: sb3_comparison.run_child(args.sb3_python, SB3_CHILD, str(seed), str(ENV_STEPS)),
        run_ours=lambda seed: sb3_comparison.run_child(sys.executable, OURS_CHILD, str(seed), str(ENV_STEPS)),
        describe_ours=lambda r: (
            f"main {r['wall_s']:.1f} s (training phases {r['train_s']:.1f} s), final greedy eval "
            f"{r['final_eval']:.1f}, solved at {r['solved_at'] or '-'} env steps"
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
