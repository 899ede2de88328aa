"""Learning curve of PPO with a Gaussian policy on HalfCheetah-v5 within a CPU budget, against a random policy.

Runs `ppo.train.main(config, action_space="continuous")` in this process, like
`python -m deep_rl_zoo.ppo.run_continuous`, and prints the greedy evaluation return after every
iteration next to the mean return of uniformly random actions over the same number of episodes
(HalfCheetah's episodes are 1,000 env steps; random actions score about -300) and that of all-zero
actions (about 0): the untrained greedy policy plays its Gaussian's mean, near 0, so progress is the
gain over about 0, not over -300.

`--setting=paper` (the default) starts from run_continuous's DEFAULTS and applies the MuJoCo setting
its docstring gives (the PPO paper's: 4 actors x 512 = 2,048 steps per update, 10 epochs of minibatches
of 64, Adam 3e-4 annealed to 0 over the run, gamma 0.99, lambda 0.95, clip 0.2);
`--setting=defaults` keeps run_continuous's DEFAULTS (tuned on Pendulum-v1: gamma 0.9, Adam 1e-3,
4 x 256 steps, minibatches of 128). Only the budget comes from the command line (and `--set` overrides):

    python benchmarks/ppo_halfcheetah_curve.py [--num_iterations=15 --num_train_steps=40960] \
        [--num_eval_steps=5000] [--seed=1] [--setting=paper|defaults] [--set entropy_coef=0.001]

`num_train_steps` is best a multiple of the 2,048 (or 1,024) env steps of one update: an iteration
ends only after a whole update. The learning rate anneals over num_iterations x num_train_steps, so
the budget is part of the setting, not only a stopping point.
"""

import argparse
import csv
import dataclasses
import os
import sys
import tempfile
import time
import typing
from pathlib import Path

import gymnasium as gym
import numpy as np

try:
    from deep_rl_zoo.ppo import run_continuous, train
except ImportError:  # run as a script from a checkout that was not `pip install -e`-ed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deep_rl_zoo.ppo import run_continuous, train

ENVIRONMENT_NAME = "HalfCheetah-v5"
# run_continuous's docstring: Schulman et al. 2017 (arXiv:1707.06347), table 3.
PAPER_SETTING = {
    "discount": 0.99,
    "gae_lambda": 0.95,
    "learning_rate": 3e-4,
    "anneal_learning_rate": True,
    "unroll_length": 512,
    "num_epochs": 10,
    "minibatch_size": 64,
    "clip_epsilon": 0.2,
}


def parse_overrides(items: list[str]) -> dict:
    """`name=value` strings -> PpoConfig field values of the right type."""
    hints = typing.get_type_hints(train.PpoConfig)
    overrides = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in hints:
            raise SystemExit(f"--set: PpoConfig has no field {name!r}")
        hint = hints[name]
        if typing.get_origin(hint) is tuple:
            overrides[name] = tuple(int(x) for x in value.split(","))
        elif hint is bool:
            overrides[name] = value.lower() in ("1", "true", "yes")
        else:
            overrides[name] = hint(value)
    return overrides


def baseline_return(num_episodes: int, seed: int, zero_actions: bool = False) -> float:
    """Mean undiscounted return over `num_episodes` whole episodes of uniformly random actions, or of
    all-zero actions: what the untrained greedy policy plays (its Gaussian's mean is near 0)."""
    env = gym.make(ENVIRONMENT_NAME)
    env.action_space.seed(seed)
    returns = []
    for episode in range(num_episodes):
        env.reset(seed=seed + episode)
        episode_return, done = 0.0, False
        while not done:
            action = (
                np.zeros(env.action_space.shape, np.float32) if zero_actions else env.action_space.sample()
            )
            _, reward, terminated, truncated, _ = env.step(action)
            episode_return += float(reward)
            done = terminated or truncated
        returns.append(episode_return)
    env.close()
    return float(np.mean(returns))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=("paper", "defaults"), default="paper")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num_iterations", type=int, default=15)
    parser.add_argument("--num_train_steps", type=int, default=40_960, help="Env steps per iteration.")
    parser.add_argument("--num_eval_steps", type=int, default=5_000, help="5 HalfCheetah episodes.")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="Override a flag.")
    args = parser.parse_args()

    values = dict(run_continuous.DEFAULTS)
    if args.setting == "paper":
        values.update(PAPER_SETTING)
    values.update(
        environment_name=ENVIRONMENT_NAME,
        seed=args.seed,
        num_iterations=args.num_iterations,
        num_train_steps=args.num_train_steps,
        num_eval_steps=args.num_eval_steps,
        stop_when_solved=False,  # HalfCheetah's threshold (4,800) is far beyond a CPU budget anyway
        use_tensorboard=False,
        show_progress=False,
    )
    values.update(parse_overrides(args.set))

    num_eval_episodes = max(1, args.num_eval_steps // 1000)
    random_return = baseline_return(num_eval_episodes, seed=10_000 + args.seed)
    zero_return = baseline_return(num_eval_episodes, seed=10_000 + args.seed, zero_actions=True)
    print(
        f"over {num_eval_episodes} episodes: random actions {random_return:.1f}, zero actions {zero_return:.1f}",
        flush=True,
    )

    with tempfile.TemporaryDirectory(prefix="ppo_halfcheetah_") as work_dir:
        csv_path = os.path.join(work_dir, "results.csv")
        config = train.PpoConfig(
            **values,
            checkpoint_dir=os.path.join(work_dir, "checkpoints"),
            runs_dir=os.path.join(work_dir, "runs"),
            results_csv_path=csv_path,
        )
        shown = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        print("config:", {k: v for k, v in shown.items() if k not in ("checkpoint_dir", "runs_dir", "tag")})
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        train.main(config, action_space="continuous")
        wall_s = time.perf_counter() - start
        load_after = os.getloadavg()[0]
        with open(csv_path) as f:
            rows = list(csv.DictReader(f))

    print()
    print("| iteration | env steps | eval return (episodes) | train return | train steps/s |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['iteration']} | {int(row['train_env_steps']):,} "
            f"| {float(row['eval_mean_episode_return']):.1f} ({row['eval_num_episodes']}) "
            f"| {float(row['train_mean_episode_return']):.1f} | {float(row['train_steps_per_second']):.0f} |"
        )
    final = float(rows[-1]["eval_mean_episode_return"])
    best = max(float(row["eval_mean_episode_return"]) for row in rows)
    print(
        f"\nrandom {random_return:.1f}, zero actions {zero_return:.1f}, final eval {final:.1f}, best eval {best:.1f} after "
        f"{int(rows[-1]['train_env_steps']):,} env steps; wall {wall_s:.0f} s "
        f"(1-minute load {load_before:.1f} -> {load_after:.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
