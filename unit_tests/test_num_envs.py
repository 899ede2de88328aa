"""--num_envs for the replay Q agents: per-env frame streams and n-step windows in one replay, the
batched step against single-env runs, the gradient-step schedule, and refusals of bad input."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from deep_rl_zoo import errors, main_loop, replay, replay_q_agents, vector_env
from deep_rl_zoo.dqn import train as dqn_train
from deep_rl_zoo.types_ import TimeStep


def _frame(value: int) -> np.ndarray:
    return np.full((1, 1), value, np.uint8)


def test_interleaved_streams_rebuild_each_envs_own_stacks():
    # The docstring's example: env 0 adds a0=10, a1=11, a2=12 and env 1 adds b0=20, b1=21, b2=22,
    # alternately. Stack of handle 4 (a2): 4 -> 2 -> 0, then padded with a0 = [10, 10, 11, 12].
    store = replay.FrameStackStore(capacity=16, frame_shape=(1, 1), stack_size=4)
    handles = []
    for t in range(3):
        handles.append(store.add(_frame(10 + t), first=t == 0, stream=0))
        handles.append(store.add(_frame(20 + t), first=t == 0, stream=1))
    assert handles == [0, 1, 2, 3, 4, 5]
    stacks = store.stacks(np.array([4, 5, 1]))[:, :, 0, 0]
    np.testing.assert_array_equal(stacks, [[10, 10, 11, 12], [20, 20, 21, 22], [20, 20, 20, 20]])
    with pytest.raises(ValueError, match="stream 2"):
        store.add(_frame(30), first=False, stream=2)  # a stream's first frame must be first


def _random_episodes(rng: np.random.Generator, num_steps: int, frame_base: int) -> list[TimeStep]:
    """One env's timesteps: episodes of 1-6 steps ending in termination or truncation at random."""
    timesteps, value = [], frame_base
    while len(timesteps) < num_steps:
        length = int(rng.integers(1, 7))
        timesteps.append(TimeStep(np.full((4, 1, 1), value, np.uint8), 0.0, False, False, True, {}))
        for step in range(1, length + 1):
            value += 1
            end = step == length
            terminated = end and bool(rng.integers(2))
            timesteps.append(
                TimeStep(
                    np.full((4, 1, 1), value, np.uint8),
                    float(step),
                    terminated,
                    end and not terminated,
                    False,
                    {},
                )
            )
        value += 1
    return timesteps[:num_steps]


def _transitions(writer: replay.TransitionWriter) -> list[tuple]:
    """Every stored transition with its frame stacks rebuilt, as hashable tuples."""
    size = writer.replay.size
    batch = writer.replay.state_arrays()
    items = replay.Transition(*(batch[f"field/{name}"] for name in replay.Transition._fields))
    s_tm1 = writer.frame_store.stacks(items.s_tm1)
    s_t = writer.frame_store.stacks(items.s_t)
    return [
        (
            s_tm1[k].tobytes(),
            int(items.a_tm1[k]),
            float(items.r_t[k]),
            float(items.discount_t[k]),
            s_t[k].tobytes(),
        )
        for k in range(size)
    ]


def test_two_streams_store_what_two_single_env_writers_store():
    # n = 3 windows and stacks of 4 on two envs with different episode boundaries, interleaved in one
    # writer: the replay holds exactly the union of what two one-env writers store.
    rng = np.random.default_rng(0)
    streams = [_random_episodes(rng, 40, 0), _random_episodes(rng, 40, 128)]

    def writer() -> replay.TransitionWriter:
        return replay.TransitionWriter(
            replay.UniformReplay(200, np.random.default_rng(0)),
            replay.TransitionAccumulator(n=3, discount=0.5),
            replay.FrameStackStore(capacity=200, frame_shape=(1, 1), stack_size=4),
        )

    shared = writer()
    for t in range(40):
        for stream in (0, 1):
            shared.add(streams[stream][t], action=stream, stream=stream)
    expected = []
    for stream in (0, 1):
        alone = writer()
        for timestep in streams[stream]:
            alone.add(timestep, action=stream)
        expected += _transitions(alone)
    assert sorted(_transitions(shared)) == sorted(expected)
    assert len(expected) > 40  # both envs stored plenty


def test_learning_steps_due_keeps_one_gradient_step_per_learn_interval_env_steps():
    # 8 envs, interval 4: env steps 0 -> 8 cross the multiples 4 and 8: 2 steps. 6 -> 9 crosses 8: 1.
    assert replay_q_agents.learning_steps_due(0, 8, 4, replay_size=100, min_replay_size=50) == 2
    assert replay_q_agents.learning_steps_due(6, 9, 4, replay_size=100, min_replay_size=50) == 1
    assert replay_q_agents.learning_steps_due(6, 9, 4, replay_size=10, min_replay_size=50) == 0  # warm-up
    assert replay_q_agents.learning_steps_due(8, 8, 4, replay_size=100, min_replay_size=50) == 0  # firsts


def _dqn_atari_agent(num_envs: int):
    config = dqn_train.DqnConfig(
        environment_name="Pong",
        num_envs=num_envs,
        replay_capacity=500,
        min_replay_size=500,  # no learning: the network, hence the greedy actions, stay fixed
        batch_size=32,
        exploration_epsilon_begin_value=0.0,
        exploration_epsilon_end_value=0.0,
        n_step=1,
        seed=4,
    )
    torch.manual_seed(0)  # the same network in every run
    env = vector_env.AtariVectorEnvironment("Pong", num_envs, max_episode_steps=12, num_threads=1)
    return dqn_train.build_agents(config, env, torch.device("cpu")).train_agent, env


def test_dqn_with_two_envs_stores_what_two_single_env_runs_store():
    # Env 1 of a 2-env run is seeded seed + 1, like the 1-env run seeded seed + 1. Games of 12 steps,
    # so episode ends and resets fall inside the 30 rounds.
    agent, env = _dqn_atari_agent(2)
    loop = main_loop.run_vector_env_loop(env, agent, seed=10)
    for _ in range(2 * 30):
        next(loop)
    together = _transitions(agent.replay_contents)
    expected = []
    for seed in (10, 11):
        agent, env = _dqn_atari_agent(1)
        loop = main_loop.run_vector_env_loop(env, agent, seed=seed)
        for _ in range(30):
            next(loop)
        expected += _transitions(agent.replay_contents)
    assert sorted(together) == sorted(expected)
    assert len(expected) == 2 * (30 - 1 - 2)  # 29 rounds of steps, less the two reset rounds, per env


def test_num_envs_below_one_is_a_config_error():
    with pytest.raises(errors.ConfigError, match="--num_envs must be positive, got 0"):
        dqn_train.DqnConfig(num_envs=0)


def test_agents_without_a_batched_step_refuse_num_envs():
    from deep_rl_zoo.drqn import train as drqn_train
    from deep_rl_zoo.reinforce import train as reinforce_train

    with pytest.raises(errors.ConfigError, match="REINFORCE acts in one env at a time"):
        reinforce_train.main(
            reinforce_train.ReinforceConfig(num_envs=2, num_iterations=1, show_progress=False)
        )
    with pytest.raises(errors.ConfigError, match="--num_envs=2: DRQN"):
        drqn_train.main(drqn_train.DrqnConfig(num_envs=2, num_iterations=1, show_progress=False))


@pytest.mark.slow
def test_num_envs_error_is_one_line_with_exit_code_2():
    result = subprocess.run(
        [sys.executable, "-m", "deep_rl_zoo.dqn.run_classic", "--num_envs=0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --num_envs must be positive, got 0"


# ----------------------------------------------------------------------------------------------------
# Distributed actors (UnrollActor) with --num_envs


class _FakeLink:
    """Collects what an actor sends; parameters never change."""

    def __init__(self, actor_index: int):
        self.actor_index, self.parameter_version, self.sent = actor_index, 1, []

    def send(self, payload) -> None:
        self.sent.append(payload)

    def wait_for_new_parameters(self) -> None:
        pass

    def pull_parameters(self) -> None:
        pass


def _sign_policy() -> torch.nn.Module:
    """CartPole's push-towards-the-fall controller, logits +-1e4 * tanh(1000 * (angle + angular
    velocity)): beyond 1e-5 from 0 they are +-100 or more, so every sample is the arg-max whatever the
    generator draws (e^-100 is 0 next to 1 in float64)."""
    from deep_rl_zoo.networks import policy

    network = policy.MlpActor(4, 2, hidden_sizes=(1,))
    with torch.no_grad():
        network.torso[0].weight.copy_(torch.tensor([[0.0, 0.0, 1000.0, 1000.0]]))
        network.torso[0].bias.zero_()
        network.policy_head.weight.copy_(torch.tensor([[-1e4], [1e4]]))
        network.policy_head.bias.zero_()
    return network


def _unroll_actor(link: _FakeLink, seed: int):
    import gymnasium as gym

    from deep_rl_zoo import unrolls

    return unrolls.UnrollActor(
        policy=_sign_policy(),
        link=link,
        action_space=gym.spaces.Discrete(2),
        observation_space=gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
        unroll_length=8,
        rng=np.random.default_rng(seed),
        device=torch.device("cpu"),
        agent_name="PPO",
    )


def test_unroll_actor_with_two_envs_sends_what_two_one_env_actors_send():
    from deep_rl_zoo import gym_env

    # Actor 3 with 2 envs (seeds 20, 21; episodes cut at 5 steps, so unrolls hold resets) against two
    # one-env actors: env i's unrolls are equal field by field, and carry actor_index 3 * 2 + i.
    def env(seed: int):
        return gym_env.create_classic_environment("CartPole-v1", seed=seed, max_episode_steps=5)

    link = _FakeLink(actor_index=3)
    actor = _unroll_actor(link, seed=0)
    loop = main_loop.run_vector_env_loop(
        vector_env.SerialVectorEnvironment([env(20), env(21)]), actor, seed=20
    )
    for _ in range(2 * 8 * 3 + 2):
        next(loop)
    assert len(link.sent) == 3 and all(len(message) == 2 for message in link.sent)
    for i, seed in enumerate((20, 21)):
        alone = _FakeLink(actor_index=0)
        loop = main_loop.run_env_loop(env(seed), _unroll_actor(alone, seed=1), seed=seed)
        for _ in range(8 * 3 + 1 + 3):  # 24 timesteps fill 3 unrolls (+ the 3 reset timesteps)
            next(loop)
        assert len(alone.sent) == 3
        for together, single in zip([message[i] for message in link.sent], alone.sent, strict=True):
            assert together.actor_index == 3 * 2 + i
            for field in ("observation", "action", "reward", "terminated", "truncated", "valid"):
                np.testing.assert_array_equal(getattr(together, field), getattr(single, field))
            assert not together.valid.all()  # an episode ended inside: the reset pair is masked


@pytest.mark.smoke
def test_ppo_with_two_envs_per_actor_learns_from_actors_times_envs_unrolls(tmp_path):
    from deep_rl_zoo.ppo import run_atari
    from deep_rl_zoo.ppo import train as ppo_train

    config = ppo_train.PpoConfig(
        **{
            **run_atari.DEFAULTS,
            "num_envs": 2,
            "num_actors": 1,
            "unroll_length": 8,
            "minibatch_size": 8,
            "num_iterations": 1,
            "num_train_steps": 32,
            "num_eval_steps": 20,
            "max_episode_steps": 40,
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "runs_dir": str(tmp_path / "runs"),
            "use_tensorboard": False,
            "show_progress": False,
        }
    )
    state = ppo_train.main(config)
    assert state.train_env_steps == 32  # 2 updates of 1 actor x 2 envs x 8 steps
    assert (
        ppo_train.PpoConfig(num_envs=2, num_actors=2, unroll_length=16, minibatch_size=64).minibatch_size
        == 64
    )


def test_distributed_agents_without_batched_actors_refuse_num_envs(tmp_path):
    from deep_rl_zoo.impala import train as impala_train

    with pytest.raises(errors.ConfigError, match="--num_envs=2: IMPALA's actors step one env each"):
        impala_train.main(impala_train.ImpalaConfig(num_envs=2, runs_dir=str(tmp_path / "runs")))
    assert not (tmp_path / "runs").exists()
