"""A resume at Atari scale continues bit-exactly: a DQN run's checkpoint and its `--checkpoint_replay` file
round-trip through disk without losing anything the next gradient steps depend on.

    python benchmarks/atari_resume_exact.py --checkpoint=checkpoints/DQN_Pong/DQN_Pong_0.ckpt

The checkpoint is that of a real `dqn.run_atari --checkpoint_replay` run (its replay full and wrapped, its
frames real Pong screens). Agent A loads it and plays `--steps_before` env steps of Pong, learning as the
run does, so that what it holds is its own, not a copy of the files. A is then saved the way the run saves
(checkpoint, then replay, both written atomically), and agent B is loaded from those files as `--resume`
loads them. Both then take the same `--steps_after` timesteps (A's own play, recorded) and must choose the
same actions and compute the same losses, bit for bit: replay contents and write position, the stored
frames, the n-step windows, the optimizer, the target network, the exploration schedule and the random
generators all came back. `unit_tests/test_replay_checkpoint.py` checks the same on a small replay.

The run's flags are `dqn.run_atari`'s defaults with the seed given here; pass the ones your run changed
with --set name=value. One learner thread, as the run had.
"""

import argparse
import pathlib
import sys
import tempfile

import numpy as np
import torch

from deep_rl_zoo import checkpoint, environments, gym_env, main_loop, process_setup
from deep_rl_zoo.dqn import run_atari, train
from deep_rl_zoo.types_ import TimeStep

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # also when loaded by path, not run
import dqn_cartpole  # noqa: E402  (benchmarks/: its --set parsing)


def recorded_stream(env, num_steps: int, seed: int) -> list[TimeStep]:
    """`num_steps` real timesteps of `env` from a fresh episode, played with seeded random actions (the
    agents' choices do not steer it: both must see the very same stream)."""
    rng = np.random.default_rng(seed)
    observation, info = env.reset(seed=seed)
    timesteps = [TimeStep(observation, 0.0, False, False, True, info)]
    while len(timesteps) < num_steps:
        if timesteps[-1].last:
            observation, info = env.reset()
            timesteps.append(TimeStep(observation, 0.0, False, False, True, info))
            continue
        observation, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        timesteps.append(TimeStep(observation, float(reward), bool(terminated), bool(truncated), False, info))
    return timesteps


def learn_from(agent, timesteps: list[TimeStep]) -> list[tuple[int, float]]:
    """Feeds `timesteps` to `agent`, resetting it where an episode starts, as the run's loop does; returns
    (action, loss) of every step on which it learned."""
    trace, learned = [], agent.statistics["learner_steps"]
    for timestep in timesteps:
        if timestep.first:
            agent.reset()
        action = agent.step(timestep)
        if agent.statistics["learner_steps"] > learned:
            learned = agent.statistics["learner_steps"]
            trace.append((int(action), float(agent.statistics["loss"])))
    return trace


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True, help="A dqn.run_atari --checkpoint_replay checkpoint.")
    parser.add_argument("--environment_name", default="Pong")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps_before", type=int, default=1000, help="A's own play before it is saved.")
    parser.add_argument("--steps_after", type=int, default=400, help="Steps A and B both take afterwards.")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="A flag the run changed."
    )
    args = parser.parse_args()
    flags = {**run_atari.DEFAULTS, "environment_name": args.environment_name, "seed": args.seed}
    flags.update(dqn_cartpole.parse_overrides(args.set))  # typed by DqnConfig's fields
    config = train.DqnConfig(**flags, checkpoint_replay=True, num_threads=1, show_progress=False)
    process_setup.seed_everything(config.seed, config.num_threads)
    environment_id = gym_env.resolve_environment_name(config.environment_name)
    path = args.checkpoint
    if not pathlib.Path(checkpoint.replay_path(path)).is_file():
        parser.error(f"no replay file beside {path}: was the run started with --checkpoint_replay?")

    def load_agent(from_path: str):
        env = environments.make_train_environment(config, config.seed, agent_name="DQN")
        agent = train.build_agents(config, env, torch.device("cpu")).train_agent
        agent.load_state_dict(checkpoint.load_checkpoint(from_path, "DQN", environment_id)["agent"])
        agent.replay_contents.load_state_arrays(checkpoint.load_arrays(checkpoint.replay_path(from_path)))
        return agent, env

    agent_a, env = load_agent(path)
    print(f"loaded {path}: replay of {agent_a.replay_contents.replay.size:,} transitions", flush=True)
    # A's own play, learning as the run does: what it holds from here on is its own, not the files'.
    played = main_loop.run_env_loop(env, agent_a, seed=config.seed + 12345)
    for _ in range(args.steps_before):
        next(played)
    with tempfile.TemporaryDirectory(prefix="resume-exact-") as folder:
        saved = str(pathlib.Path(folder) / f"DQN_{args.environment_name}_1.ckpt")
        checkpoint.save_checkpoint(saved, "DQN", environment_id, 1, agent_a.state_dict(), {})
        checkpoint.save_arrays(checkpoint.replay_path(saved), agent_a.replay_contents.state_arrays())
        agent_b, _ = load_agent(saved)
    stream = recorded_stream(env, args.steps_after, seed=config.seed + 54321)
    # One after the other, as a run and its resumption would be.
    expected = learn_from(agent_a, stream)
    actual = learn_from(agent_b, stream)
    print(f"A played {args.steps_before} steps before the save; then {len(expected)} learning steps each")
    same = len(expected) > 0 and actual == expected
    print(("PASS" if same else "FAIL") + ": B's actions and losses equal A's, bit for bit")
    if not same:
        pairs = enumerate(zip(expected, actual, strict=False))
        differ = next((i for i, (x, y) in pairs if x != y), min(len(expected), len(actual)))
        print(f"first difference at learning step {differ} (A {len(expected)} steps, B {len(actual)})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
