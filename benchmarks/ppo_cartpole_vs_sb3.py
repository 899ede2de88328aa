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

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
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


def run_child(python: str, code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    script = Path("/tmp") / f"ppo_vs_sb3_child_{os.getpid()}.py"  # spawned actors need a real file
    script.write_text(code)
    try:
        completed = subprocess.run([python, str(script), *args], capture_output=True, text=True, env=env)
    finally:
        script.unlink()
    if completed.returncode != 0:
        raise SystemExit(f"{python} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sb3_python", required=True, help="Python of a scratch env with stable-baselines3.")
    parser.add_argument("--rounds", type=int, default=2, help="Rounds of one SB3 and one of our runs.")
    parser.add_argument("--seed", type=int, default=1, help="Seed of round 0; round i uses seed + i.")
    args = parser.parse_args()
    if not os.access(args.sb3_python, os.X_OK):
        raise SystemExit(f"--sb3_python={args.sb3_python} is not an executable (see this script's docstring)")

    sb3, ours = [], []
    for round_index in range(args.rounds):
        seed = args.seed + round_index
        order = ("sb3", "ours") if round_index % 2 == 0 else ("ours", "sb3")
        for name in order:
            if name == "sb3":
                result = run_child(args.sb3_python, SB3_CHILD, str(seed), str(ENV_STEPS))
                sb3.append(result)
                print(
                    f"round {round_index} SB3 : learn {result['wall_s']:.1f} s, "
                    f"final greedy eval {result['final_eval']:.1f}",
                    flush=True,
                )
            else:
                result = run_child(sys.executable, OURS_CHILD, str(seed), str(ENV_STEPS))
                ours.append(result)
                print(
                    f"round {round_index} ours: main {result['wall_s']:.1f} s (training phases "
                    f"{result['train_s']:.1f} s), final greedy eval "
                    f"{result['final_eval']:.1f}, solved at {result['solved_at'] or '-'} env steps",
                    flush=True,
                )
    sb3_total = sum(r["wall_s"] for r in sb3)
    ours_total = sum(r["wall_s"] for r in ours)
    ours_train_total = sum(r["train_s"] for r in ours)
    ratio = ours_total / sb3_total
    print(
        f"\n{ENV_STEPS:,} env steps x {args.rounds} rounds: SB3 {sb3_total:.1f} s, ours {ours_total:.1f} s "
        f"(training phases only {ours_train_total:.1f} s)"
    )
    for index, (a, b) in enumerate(zip(ours, sb3, strict=True)):
        round_ratio, train_ratio = a["wall_s"] / b["wall_s"], a["train_s"] / b["wall_s"]
        print(f"round {index}: ours / SB3 = {round_ratio:.2f} (training phases {train_ratio:.2f})")
    train_ratio = ours_train_total / sb3_total
    print(
        f"wall-time ratio ours / SB3 = {ratio:.2f} (training phases only: {train_ratio:.2f}); "
        f"target <= 0.50: {'PASS' if ratio <= 0.5 else 'FAIL'}"
    )
    return 0 if ratio <= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
