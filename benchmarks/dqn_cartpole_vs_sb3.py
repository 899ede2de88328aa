"""Wall time of 50,000 CartPole-v1 env steps: our DQN's default `run_classic` flags against Stable-Baselines3.

Stable-Baselines3 is not a dependency of the zoo and this script installs nothing: point `--sb3_python`
at the interpreter of a scratch environment that has it, e.g.

    python3 -m venv /tmp/sb3venv && /tmp/sb3venv/bin/pip install torch==2.13.0 stable-baselines3 gymnasium
    python benchmarks/dqn_cartpole_vs_sb3.py --sb3_python=/tmp/sb3venv/bin/python [--rounds=2]

What runs, each in a fresh subprocess with one torch thread, on the CPU:
- SB3: `DQN("MlpPolicy")` with rl-baselines3-zoo's tuned CartPole-v1 hyper-parameters (below), timed
  around `model.learn(50_000)` only; SB3 evaluates nothing during `learn`. Its final greedy policy is
  then scored on 10 episodes, untimed.
- Ours: `dqn.train.main` with DqnConfig's defaults and `stop_when_solved=False`, so it trains the full
  50,000 env steps (10 iterations of 5,000). Timed around the whole `main`, which includes what
  `run_classic` always does and SB3 does not: a 5,000-step greedy evaluation, a CSV row and a checkpoint
  after every iteration. So the ratio is conservative; the training phases alone are also shown.

The shared machine is noisy, so the runs alternate in the same invocation (rounds of SB3 then ours,
then ours then SB3, ...) and the ratio is total(ours) / total(SB3) over all rounds.
"""

import json
import sys

import sb3_comparison  # benchmarks/ is this script's directory, so on sys.path

ENV_STEPS = 50_000

# rl-baselines3-zoo, hyperparams/dqn.yml, CartPole-v1 (n_timesteps 5e4).
SB3_HYPERPARAMETERS = dict(
    learning_rate=2.3e-3,
    batch_size=64,
    buffer_size=100_000,
    learning_starts=1000,
    gamma=0.99,
    target_update_interval=10,
    train_freq=256,
    gradient_steps=128,
    exploration_fraction=0.16,
    exploration_final_eps=0.04,
    policy_kwargs=dict(net_arch=[256, 256]),
)

SB3_CHILD = """
import json, sys, time
import gymnasium as gym, torch
from stable_baselines3 import DQN
from stable_baselines3.common.evaluation import evaluate_policy
seed, env_steps, hyperparameters = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
torch.set_num_threads(1)
model = DQN("MlpPolicy", gym.make("CartPole-v1"), seed=seed, device="cpu", verbose=0, **hyperparameters)
start = time.perf_counter()
model.learn(total_timesteps=env_steps)
wall_s = time.perf_counter() - start
mean, _ = evaluate_policy(model, gym.make("CartPole-v1"), n_eval_episodes=10, deterministic=True, warn=False)
print(json.dumps({"wall_s": wall_s, "final_eval": float(mean)}))
"""

OURS_CHILD = """
import csv, json, os, sys, tempfile, time
from deep_rl_zoo.dqn import train
seed, env_steps = int(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory(prefix="dqn_vs_sb3_") as work_dir:
    csv_path = os.path.join(work_dir, "results.csv")
    config = train.DqnConfig(
        seed=seed,
        num_iterations=env_steps // train.DqnConfig.num_train_steps,
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
train_s = sum(config.num_train_steps / float(r["train_steps_per_second"]) for r in rows)
evals = [float(r["eval_mean_episode_return"]) for r in rows]
print(json.dumps({"wall_s": wall_s, "train_s": train_s, "env_steps": state.train_env_steps,
                  "final_eval": evals[-1], "best_eval": max(evals)}))
"""


def main() -> int:
    args = sb3_comparison.parse_args(__doc__.splitlines()[0])
    return sb3_comparison.compare(
        args,
        ENV_STEPS,
        run_sb3=lambda seed: sb3_comparison.run_child(
            args.sb3_python, SB3_CHILD, str(seed), str(ENV_STEPS), json.dumps(SB3_HYPERPARAMETERS)
        ),
        run_ours=lambda seed: sb3_comparison.run_child(sys.executable, OURS_CHILD, str(seed), str(ENV_STEPS)),
        describe_ours=lambda r: (
            f"main {r['wall_s']:.1f} s (training phases {r['train_s']:.1f} s), "
            f"final greedy eval {r['final_eval']:.1f}, best {r['best_eval']:.1f}"
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
