"""IQN end to end: the cosine-embedding network, sampled fractions, smoke runs, resume, bad input,
building the Pong agent the acting benchmark uses, and learning."""

import csv
import dataclasses
import os

import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint, environments
from deep_rl_zoo.iqn import run_atari, train
from deep_rl_zoo.iqn.agent import SampledTausQNetwork
from deep_rl_zoo.networks.value import IqnNetwork
from deep_rl_zoo.types_ import TimeStep


def tiny_classic_config(tmp_path, **overrides) -> train.IqnConfig:
    values = dict(
        num_iterations=2,
        num_train_steps=300,
        num_eval_steps=200,
        num_online_taus=4,
        num_target_taus=5,
        num_acting_taus=6,
        replay_capacity=1000,
        min_replay_size=100,
        batch_size=16,
        checkpoint_dir=str(tmp_path / "checkpoints"),
        runs_dir=str(tmp_path / "runs"),
        use_tensorboard=False,
        show_progress=False,
        stop_when_solved=False,
    )
    values.update(overrides)
    return train.IqnConfig(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_network_gives_one_value_per_fraction_and_action():
    network = IqnNetwork((4,), num_actions=3, hidden_sizes=(8,), embedding_size=6)
    taus = torch.tensor([[0.1, 0.5], [0.9, 0.1]])
    output = network(torch.zeros(2, 4), taus)
    assert output.q_dist.shape == (2, 2, 3)
    # The quantile depends on tau only through the embedding: same state and tau, same value.
    torch.testing.assert_close(output.q_dist[0, 0], output.q_dist[1, 1])
    with pytest.raises(ValueError, match="taus"):
        network(torch.zeros(2, 4), torch.zeros(3, 2))


def test_acting_averages_fresh_fractions_reproducibly():
    network = IqnNetwork((4,), num_actions=2, hidden_sizes=(8,))
    a = SampledTausQNetwork(network, 7, torch.Generator().manual_seed(3))(torch.ones(1, 4))
    b = SampledTausQNetwork(network, 7, torch.Generator().manual_seed(3))(torch.ones(1, 4))
    assert a.q_dist.shape == (1, 7, 2)
    torch.testing.assert_close(a.q_values, b.q_values)


def test_learning_samples_separate_online_target_and_acting_counts(tmp_path, monkeypatch):
    config = tiny_classic_config(tmp_path, learn_interval=1)  # so the last step below is a gradient step
    agents = train.build_agents(
        config, environments.make_environment(config, 0, train=True), torch.device("cpu")
    )
    agent = agents.train_agent
    seen = []
    for net in (agent._network, agent._target_network):
        net.register_forward_hook(lambda module, args, output: seen.append(args[1].shape[1]))
    observation = np.zeros(4, dtype=np.float32)
    agent.step(TimeStep(observation, 0.0, False, False, True, {}))
    for _ in range(config.min_replay_size + config.n_step):  # n-step transitions lag n - 1 steps
        agent.step(TimeStep(observation, 1.0, False, False, False, {}))
    # Last gradient step: online N = 4, target selector K = 6, target N' = 5; acting uses K = 6.
    assert seen[-3:] == [4, 6, 5]
    assert 6 in seen[:-3]


@pytest.mark.smoke
def test_run_atari_smoke_and_the_pong_agent_of_the_acting_benchmark(tmp_path):
    config = train.IqnConfig(
        **{
            **run_atari.DEFAULTS,
            "num_iterations": 1,
            "num_train_steps": 60,
            "num_eval_steps": 20,
            "max_episode_steps": 30,
            "replay_capacity": 200,
            "min_replay_size": 30,
            "batch_size": 4,
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "runs_dir": str(tmp_path / "runs"),
            "use_tensorboard": False,
            "show_progress": False,
        }
    )
    env = environments.make_environment(config, 0, train=True)
    agents = train.build_agents(config, env, torch.device("cpu"))
    assert agents.train_agent._writer.frame_store is not None  # frames kept once, stacks rebuilt on sampling
    observation, info = env.reset(seed=0)
    action = agents.eval_agent.step(TimeStep(observation, 0.0, False, False, True, info))
    assert 0 <= action < env.action_space.n
    env.close()
    state = train.main(config)
    assert state.train_env_steps == 60
    assert os.path.isfile(tmp_path / "checkpoints" / "IQN_Pong" / "IQN_Pong_0.ckpt")


@pytest.mark.smoke
def test_resume_restores_the_fraction_generator(tmp_path):
    train.main(tiny_classic_config(tmp_path, num_iterations=1))
    resumed = train.main(tiny_classic_config(tmp_path, num_iterations=2, resume=True))
    assert resumed.train_env_steps == 600
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / "IQN_CartPole-v1" / "IQN_CartPole-v1_0.ckpt"), "IQN", "CartPole-v1"
    )
    config = tiny_classic_config(tmp_path)
    agents = train.build_agents(
        config, environments.make_environment(config, 0, train=True), torch.device("cpu")
    )
    agents.train_agent.load_state_dict(saved["agent"])
    assert torch.equal(agents.train_agent._tau_generator.get_state(), saved["agent"]["tau_generator"])


@pytest.mark.learning
def test_iqn_learns_cartpole(tmp_path):
    """IQN's default classic flags reach a greedy mean of 150 (random play: about 22) after 5,000 env steps.

    Guards the whole IQN loop (sampled fractions for online, selection and target, quantile Huber loss)
    on a CI budget, with one evaluation of 1,500 env steps. Seeds 1-3 measured (deterministic per seed)
    with torch's default Adam: 299, 245, 295, so 150 holds on each with a margin of 60% or more; with the
    fused Adam every agent now uses (rounding differs in the last bit), seeds 1 and 2 give 335.5 and 187.3
    (2026-12-01): seed 2's margin is down to 25%, still over the line.
    Seed 1 is the config's default.
    """
    defaults = train.IqnConfig()
    config = dataclasses.replace(
        tiny_classic_config(tmp_path),
        num_iterations=1,
        num_train_steps=5000,
        num_eval_steps=1500,
        num_online_taus=defaults.num_online_taus,
        num_target_taus=defaults.num_target_taus,
        num_acting_taus=defaults.num_acting_taus,
        replay_capacity=defaults.replay_capacity,
        min_replay_size=defaults.min_replay_size,
        batch_size=defaults.batch_size,
        stop_when_solved=True,
    )
    state = train.main(config)
    best = max(
        float(r["eval_mean_episode_return"]) for r in read_csv(os.path.join(state.run_dir, "results.csv"))
    )
    assert best >= 150, f"best greedy evaluation mean {best} after {state.train_env_steps} env steps"
