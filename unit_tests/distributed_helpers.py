"""What the tests of the distributed agents share: tiny configs, the smoke runs their scripts have in
common (resume, greedy evaluation, Atari), and the fakes their actor and learner tests use.

R2D2, NGU and Agent57 (recurrent replay) share the sequence settings; PPO-RND and PPO-ICM (curiosity on
PPO) share the unroll settings. Each agent's test file names only what differs.
"""

import csv
import os
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from deep_rl_zoo import checkpoint, unrolls
from deep_rl_zoo.sequence_replay import PrioritizedSequenceReplay
from deep_rl_zoo.types_ import TimeStep

CPU = torch.device("cpu")


def run_options(tmp_path: Path) -> dict[str, Any]:
    """A test run's folders under `tmp_path`, no TensorBoard and no progress bar."""
    return dict(
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
    )


def tiny_config(config_class: type, tmp_path: Path, *values: dict[str, Any]) -> Any:
    """`config_class` with `run_options`, then `values` merged left to right (a later one wins)."""
    merged = run_options(tmp_path)
    for layer in values:
        merged.update(layer)
    return config_class(**merged)


# ----------------------------------------------------------------------------------------------------
# Recurrent replay: R2D2, NGU, Agent57

# Two actors, sequences of 8 (a burn-in of 2, 5 learned transitions) every 4 steps, learning from 16
# stored steps on: two short iterations.
TINY_SEQUENCE_RUN = dict(
    num_iterations=2,
    num_train_steps=60,
    num_eval_steps=50,
    num_actors=2,
    burn_in=2,
    trace_length=5,
    replay_period=4,
    min_replay_size=16,
    batch_size=2,
    replay_capacity=1000,
    stop_when_solved=False,
)

# One actor on Pong with games of 30 env steps and a small LSTM: one iteration of 48 env steps.
TINY_SEQUENCE_ATARI = dict(
    environment_name="Pong",
    num_iterations=1,
    num_train_steps=48,
    num_eval_steps=20,
    max_episode_steps=30,
    num_actors=1,
    burn_in=2,
    trace_length=5,
    replay_period=4,
    lstm_size=16,
    head_hidden_sizes=(),
    replay_capacity=1000,
    min_replay_size=16,
    batch_size=2,
    updates_per_env_step=0.25,
)

# Learner arguments the R2D2, NGU and Agent57 learner tests share: batches of 2 sequences, a gradient
# step per 2 env steps, the paper's priority and importance-sampling exponents.
SEQUENCE_LEARNER = dict(
    batch_size=2,
    updates_per_env_step=0.5,
    importance_sampling_exponent=0.6,
    priority_eta=0.9,
    rescaling_eps=1e-3,
    max_grad_norm=10.0,
    device=CPU,
)


def novelty_learner(learner_class: type, networks: torch.nn.Module, **overrides: Any) -> Any:
    """An NGU or Agent57 learner over `networks`: two policies (beta 0 and 0.5, gamma 0.9 and 0.5), a
    replay of 100 steps in sequences of 4, no burn-in, n = 2, learning from 4 stored steps on."""
    values = dict(
        SEQUENCE_LEARNER,
        networks=networks,
        optimizer=torch.optim.Adam(networks.parameters(), lr=1e-3),
        replay=PrioritizedSequenceReplay(100, 4, 0.9, np.random.default_rng(0), period=2),
        betas=[0.0, 0.5],
        gammas=[0.9, 0.5],
        burn_in=0,
        min_replay_size=4,
        n_step=2,
        target_network_update_period=100,
    )
    values.update(overrides)
    return learner_class(**values)


def recurrent_replay_atari_smoke(
    tmp_path: Path,
    agent_name: str,
    train_module: Any,
    config_class: type,
    atari_defaults: dict[str, Any],
    eval_module: Any,
    eval_config_class: type | None = None,
    **overrides: Any,
) -> None:
    """The smoke run of R2D2's, NGU's and Agent57's `run_atari`: one tiny iteration on Pong
    (`TINY_SEQUENCE_ATARI`), whose checkpoint has learner steps, then a greedy game of it with video."""
    config = tiny_config(config_class, tmp_path, atari_defaults, TINY_SEQUENCE_ATARI, overrides)
    state = train_module.main(config)
    assert state.train_env_steps >= 48
    payload = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / f"{agent_name}_Pong" / f"{agent_name}_Pong_0.ckpt"),
        agent_name,
        "PongNoFrameskip-v4",
    )
    assert payload["agent"]["learner_steps"] > 0
    returns = evaluate_latest(
        eval_module,
        tmp_path,
        eval_config_class,
        environment_name="Pong",
        num_episodes=1,
        max_episode_steps=30,
    )
    assert len(returns) == 1


class RecordingLink:
    """An actor's `LearnerLink` with no learner behind it: keeps what the actor sends, counts pulls."""

    parameter_version = 1

    def __init__(self, actor_index: int):
        self.actor_index = actor_index
        self.sent: list[Any] = []  # payloads, in order
        self.statistics: list[dict | None] = []  # the statistics sent with each
        self.pulls = 0

    def send(self, payload: Any, statistics: dict | None = None) -> None:
        self.sent.append(payload)
        self.statistics.append(statistics)

    def pull_parameters(self) -> bool:
        self.pulls += 1
        return False


class PositionVelocityEnv:
    """What the NGU / Agent57 builders read of an env: 2-D observations, 3 actions (MountainCar's)."""

    class _Space:
        shape = (2,)
        n = 3

    observation_space = _Space()
    action_space = _Space()


def timestep(observation, first=False, reward=0.0, terminated=False, truncated=False) -> TimeStep:
    """A float32 observation's timestep, with an empty info."""
    return TimeStep(np.asarray(observation, np.float32), reward, terminated, truncated, first, {})


# ----------------------------------------------------------------------------------------------------
# Curiosity on PPO: PPO-RND, PPO-ICM

# Two actors, unrolls of 16, two epochs of minibatches of 16: two iterations of 64 env steps.
TINY_UNROLL_RUN = dict(
    num_iterations=2,
    num_train_steps=64,
    num_eval_steps=200,
    num_actors=2,
    unroll_length=16,
    minibatch_size=16,
    num_epochs=2,
    stop_when_solved=False,
)

# One actor on MontezumaRevenge with unrolls of 16 and minibatches of 8: one iteration.
TINY_UNROLL_ATARI = dict(
    num_iterations=1,
    num_eval_steps=20,
    num_actors=1,
    unroll_length=16,
    minibatch_size=8,
)


def mountain_car_unroll(actor_index, length=8, seed=0, reward=0.0) -> unrolls.Unroll:
    """An unroll of random MountainCar-shaped observations and actions, `reward` at every step, whose
    episode ends at s_{T/2 + 1} (the next pair is a reset, not valid)."""
    rng = np.random.default_rng(seed + actor_index)
    valid = np.ones(length, bool)
    terminated = np.zeros(length, bool)
    terminated[length // 2] = True
    valid[length // 2 + 1] = False
    return unrolls.Unroll(
        actor_index=actor_index,
        observation=rng.uniform(-1, 1, (length + 1, 2)).astype(np.float32),
        action=rng.integers(0, 3, length),
        reward=np.full(length, reward, np.float32),
        terminated=terminated,
        truncated=np.zeros(length, bool),
        valid=valid,
    )


def stacked(payloads: list[unrolls.Unroll]) -> unrolls.UnrollBatch:
    """The unrolls as the learner stacks them, with their own rewards."""
    return unrolls.stack_unrolls(payloads, [u.reward for u in payloads], CPU)


def one_actor_of_two_envs_learns_as_two_actors(make_learner) -> None:
    """PPO-RND's and PPO-ICM's learners on the same two unrolls, sent by two one-env actors or by one
    actor of two envs (`--num_actors=1 --num_envs=2`): the same update, parameters and per-env reward
    statistics alike. `make_learner(**flags)` builds a learner from the same torch seed."""
    payloads = [mountain_car_unroll(0, reward=-1.0), mountain_car_unroll(1, reward=-1.0)]
    two_actors = make_learner(num_actors=2)
    one_actor = make_learner(num_actors=1, num_envs=2)
    for learner in (two_actors, one_actor):
        learner.learn(list(payloads))
        assert learner.statistics["learner_steps"] == 1
    _assert_same_state(two_actors.state_dict(), one_actor.state_dict(), "learner")


def _assert_same_state(a: Any, b: Any, where: str) -> None:
    """Equal nested state dicts: tensors and arrays element for element, the rest by ==."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_same_state(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def curiosity_atari_smoke(
    tmp_path: Path,
    agent_name: str,
    train_module: Any,
    config_class: type,
    atari_defaults: dict[str, Any],
    eval_module: Any,
    **overrides: Any,
) -> tuple[Any, dict, list[str]]:
    """The smoke run of PPO-RND's and PPO-ICM's `run_atari` on MontezumaRevenge (`TINY_UNROLL_ATARI`
    and `overrides`, which set the budget and `--debug_screenshots_interval`), then a greedy game of its
    checkpoint, which `eval_agent` rebuilds from the checkpoint's flags. Every debug screenshot is the
    emulator's colour screen of an actor's game. Returns the run's state, the checkpoint's agent state
    and the screenshots' file names, for the agent's own checks."""
    config = tiny_config(config_class, tmp_path, atari_defaults, TINY_UNROLL_ATARI, overrides)
    state = train_module.main(config)
    run_name = f"{agent_name}_MontezumaRevenge"
    agent = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / run_name / f"{run_name}_0.ckpt"),
        agent_name,
        "MontezumaRevengeNoFrameskip-v4",
    )["agent"]
    returns = evaluate_latest(
        eval_module,
        tmp_path,
        video=False,
        environment_name="MontezumaRevenge",
        num_episodes=1,
        max_episode_steps=50,
        recording_video_dir="",
    )
    assert len(returns) == 1
    folder = tmp_path / "runs" / run_name / "screenshots"  # next to the run's curves
    shots = sorted(os.listdir(folder))
    assert shots and all(name.endswith(".png") and "actor_0" in name for name in shots)
    from PIL import Image

    assert Image.open(folder / shots[0]).size == (160, 210)  # the emulator's RGB screen
    return state, agent, shots


# ----------------------------------------------------------------------------------------------------
# Script runs every distributed agent has


def train_then_resume(
    train_module: Any, config: Callable[..., Any], agent_name: str, **first_only: Any
) -> tuple[dict, dict]:
    """Trains `config(num_iterations=1, **first_only)`, then resumes that run for a second iteration
    (`config(num_iterations=2, resume=True)`), which continues the run's env-step count. Returns the
    agent states of the two iterations' checkpoints."""
    first = config(num_iterations=1, **first_only)
    state = train_module.main(first)
    resumed_state = train_module.main(config(num_iterations=2, resume=True))
    assert resumed_state.next_iteration == 2 and resumed_state.train_env_steps > state.train_env_steps
    run_name = f"{agent_name}_{first.environment_name}"
    folder = os.path.join(first.checkpoint_dir, run_name)
    return tuple(
        checkpoint.load_checkpoint(
            os.path.join(folder, f"{run_name}_{iteration}.ckpt"), agent_name, first.environment_name
        )["agent"]
        for iteration in (0, 1)
    )


def evaluate_latest(
    eval_module: Any, tmp_path: Path, config_class: type | None = None, video: bool = True, **fields: Any
) -> list[float]:
    """`eval_module.main` on the newest checkpoint under tmp_path/checkpoints; with `video`, the first
    game's mp4 goes to tmp_path/video and must be there. Returns the games' returns.

    `config_class` defaults to the one the script's `main` takes (e.g. `PolicyEvalConfig`)."""
    if config_class is None:
        config_class = typing.get_type_hints(eval_module.main)["config"]
    if video:
        fields["recording_video_dir"] = str(tmp_path / "video")
    returns = eval_module.main(
        config_class(load_checkpoint_file="latest", checkpoint_dir=str(tmp_path / "checkpoints"), **fields)
    )
    if video:
        assert any(name.endswith(".mp4") for name in os.listdir(tmp_path / "video"))
    return returns


def best_greedy_mean(
    train_module: Any, config_class: type, defaults: dict[str, Any], tmp_path: Path, num_iterations: int
) -> float:
    """The learning run of PPO-RND's and PPO-ICM's tests: the classic defaults for `num_iterations`
    iterations of 25k env steps; returns the best greedy evaluation mean in its results.csv."""
    csv_path = tmp_path / "results.csv"
    overrides = dict(num_iterations=num_iterations, num_train_steps=25_000, results_csv_path=str(csv_path))
    train_module.main(tiny_config(config_class, tmp_path, defaults, overrides))
    with open(csv_path) as f:
        return max(float(row["eval_mean_episode_return"]) for row in csv.DictReader(f))


def train_until(
    main: Callable[[Any], Any],
    make_config: Callable[..., Any],
    results_csv: Path,
    reached: Callable[[list[dict[str, str]]], bool],
    max_iterations: int,
) -> list[dict[str, str]]:
    """The shape of the asynchronous agents' learning tests: trains one iteration, then resumes one more
    at a time (`make_config(num_iterations=k, resume=k > 1)`) until `reached(rows of results.csv)` or
    `max_iterations`; returns the rows. Asynchronous actors do not replay the same episodes under the same
    seed, so a fixed budget sized for the typical run fails now and then under load; going on until the
    milestone keeps the typical case as quick as before and still fails when it never comes."""
    for num_iterations in range(1, max_iterations + 1):
        main(make_config(num_iterations=num_iterations, resume=num_iterations > 1))
        with open(results_csv) as f:
            rows = list(csv.DictReader(f))
        if reached(rows):
            break
    return rows


def evaluations(rows: list[dict[str, str]]) -> list[float]:
    """The greedy evaluation means in results.csv's `rows`, iteration by iteration."""
    return [float(row["eval_mean_episode_return"]) for row in rows]


def rounded(values: list[float]) -> str:
    """`values` to one decimal, for a failure message."""
    return ", ".join(f"{value:.1f}" for value in values)


def train_until_mountaincar_flag(
    train_module: Any, config_class: type, agent_name: str, tmp_path: Path, max_iterations: int = 4
) -> tuple[float, int]:
    """The learning milestone of NGU's and Agent57's tests: the classic defaults on MountainCar-v0, 10k
    env steps per iteration, until some iteration's *training* mean return is above -200 (an actor
    reached the flag), at most `max_iterations` (`train_until`). Returns (best training mean, iterations)."""

    def best(rows):
        return max(float(row["train_mean_episode_return"]) for row in rows)

    rows = train_until(
        train_module.main,
        lambda **iterations: tiny_config(
            config_class,
            tmp_path,
            dict(num_train_steps=10_000, num_eval_steps=1_000, stop_when_solved=False),
            iterations,
        ),
        tmp_path / "runs" / f"{agent_name}_MountainCar-v0" / "results.csv",
        lambda rows: best(rows) > -200,
        max_iterations,
    )
    return best(rows), len(rows)
