"""Rainbow end to end: smoke runs of every script, resume, bad input, noisy and dueling layers, no
epsilon, mean-weight evaluation, KL priorities, and a learning test."""

import csv
import dataclasses
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from deep_rl_zoo import checkpoint, environments
from deep_rl_zoo.networks.value import DuelingHead, NoisyLinear, build_rainbow_network, reset_noise
from deep_rl_zoo.rainbow import train
from deep_rl_zoo.rainbow.agent import MeanNetworkActor
from deep_rl_zoo.types_ import TimeStep

NAME = "Rainbow"


def tiny_classic_config(tmp_path, **overrides) -> train.RainbowConfig:
    values = dict(
        environment_name="CartPole-v1",
        num_iterations=2,
        num_train_steps=300,
        num_eval_steps=200,
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
    return train.RainbowConfig(**values)


def read_csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.smoke
def test_resume_continues_where_the_run_stopped(tmp_path):
    first = train.main(tiny_classic_config(tmp_path, num_iterations=2))
    saved = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / f"{NAME}_CartPole-v1" / f"{NAME}_CartPole-v1_1.ckpt"),
        NAME,
        "CartPole-v1",
    )
    resumed = train.main(tiny_classic_config(tmp_path, num_iterations=3, resume=True))
    assert resumed.run_dir == first.run_dir and resumed.train_env_steps == 900
    final = checkpoint.load_checkpoint(
        str(tmp_path / "checkpoints" / f"{NAME}_CartPole-v1" / f"{NAME}_CartPole-v1_2.ckpt"),
        NAME,
        "CartPole-v1",
    )
    assert final["agent"]["env_steps"] == saved["agent"]["env_steps"] + 300
    assert final["agent"]["learner_steps"] > saved["agent"]["learner_steps"]
    # The noise of the noisy layers continues from the saved generator state, as without the stop.
    torch.set_rng_state(saved["agent"]["torch_rng"])
    expected = torch.rand(3)
    torch.manual_seed(12345)
    agent = train.build_agents(tiny_classic_config(tmp_path), gym.make("CartPole-v1"), torch.device("cpu"))
    agent.train_agent.load_state_dict(saved["agent"])
    assert torch.equal(torch.rand(3), expected)


# ----------------------------------------------------------------------------------------------------
# Noisy and dueling layers


def test_noisy_linear_is_factorised_and_its_mean_is_used_in_eval_mode():
    torch.manual_seed(0)
    layer = NoisyLinear(3, 2, sigma0=0.5)
    x = torch.ones(1, 3)
    # Initial sigma is sigma0 / sqrt(in) = 0.5 / sqrt(3) for every weight and bias.
    torch.testing.assert_close(layer.weight_sigma, torch.full((2, 3), 0.5 / 3**0.5))
    noisy = layer(x)
    # The stored eps_in, eps_out are already f(e) = sign(e) sqrt(|e|); weight noise is their outer product.
    weight = layer.weight_mu + layer.weight_sigma * torch.outer(layer.eps_out, layer.eps_in)
    torch.testing.assert_close(noisy, x @ weight.T + layer.bias_mu + layer.bias_sigma * layer.eps_out)
    torch.testing.assert_close(layer(x), noisy)  # the noise stays until it is redrawn
    layer.reset_noise()
    assert not torch.allclose(layer(x), noisy)
    layer.eval()
    torch.testing.assert_close(layer(x), x @ layer.weight_mu.T + layer.bias_mu)


def test_dueling_head_advantages_have_zero_mean_over_actions():
    torch.manual_seed(0)
    head = DuelingHead(4, 8, num_actions=3, num_atoms=5)
    features = torch.randn(2, 4)
    out = head(features)  # [2, 3, 5]
    value = head.value(features).view(2, 1, 5)
    # out[a] = V + A[a] - mean(A): averaged over actions it is V.
    torch.testing.assert_close(out.mean(dim=1, keepdim=True), value)
    assert DuelingHead(4, 8, num_actions=3)(features).shape == (2, 3)  # scalar Q when num_atoms = 1


def test_rainbow_network_shapes_and_noise_for_mlp_and_cnn():
    atoms = torch.linspace(-10.0, 10.0, 51)
    for shape, dtype in [((4,), torch.float32), ((4, 84, 84), torch.uint8)]:
        network = build_rainbow_network(shape, 6, atoms, (32, 16))
        x = torch.zeros(2, *shape, dtype=dtype)
        first = network(x)
        assert first.q_logits.shape == (2, 6, 51) and first.q_values.shape == (2, 6)
        reset_noise(network)
        assert not torch.allclose(network(x).q_logits, first.q_logits)  # all heads are noisy
        assert sum(isinstance(m, NoisyLinear) for m in network.modules()) == 4  # 2 streams x 2 layers


def test_eval_actor_uses_mean_weights_and_leaves_training_mode_alone(tmp_path):
    config = tiny_classic_config(tmp_path)
    env = environments.make_environment(config, 0, train=True)
    agents = train.build_agents(config, env, torch.device("cpu"))
    network = agents.train_agent._network
    assert isinstance(agents.eval_agent, MeanNetworkActor) and network.training
    observation, _ = env.reset(seed=0)
    timestep = TimeStep(observation, 0.0, False, False, True, {})
    actions = set()
    for _ in range(5):
        reset_noise(network)  # noise must not change the evaluation action
        actions.add(agents.eval_agent.step(timestep))
    assert len(actions) == 1 and network.training
    with torch.no_grad():
        network.eval()
        expected = int(network(torch.as_tensor(observation).unsqueeze(0)).q_values.argmax())
        network.train()
    assert actions == {expected}


def test_learning_sets_kl_priorities(tmp_path, monkeypatch):
    config = tiny_classic_config(tmp_path, min_replay_size=16, batch_size=16)
    env = environments.make_environment(config, 0, train=True)
    agent = train.build_agents(config, env, torch.device("cpu")).train_agent
    seen = []
    real_update = agent._replay.update_priorities
    monkeypatch.setattr(
        agent._replay, "update_priorities", lambda i, p: (seen.append(np.array(p)), real_update(i, p))
    )
    observation, _ = env.reset(seed=0)
    agent.reset()
    timestep = TimeStep(observation, 0.0, False, False, True, {})
    while not seen:
        observation, reward, terminated, truncated, _ = env.step(agent.step(timestep))
        timestep = TimeStep(observation, float(reward), terminated, truncated, False, {})
        if timestep.last:
            agent.step(timestep)
            observation, _ = env.reset()
            agent.reset()
            timestep = TimeStep(observation, 0.0, False, False, True, {})
    # A KL divergence is >= 0, and with a random network's predictions it is not 0.
    assert seen[0].shape == (16,) and np.all(seen[0] >= config.priority_epsilon) and seen[0].max() > 1e-3


@pytest.mark.learning
def test_rainbow_learns_cartpole(tmp_path):
    """Rainbow's default classic flags hold a greedy mean of 100 (random play with the initial noisy
    network: about 10-22) over its last three evaluations, at 10,000-15,000 env steps.

    Guards the whole Rainbow loop (noisy acting, n-step prioritized replay, double categorical target,
    KL priorities) on a CI budget. Seeds 1-3 measured (deterministic per seed), greedy means every 2,500
    env steps:
      seed 1:   10, 172, 136, 150, 140, 139   (last three: 143)
      seed 2:  104, 144, 136, 126, 125, 120   (last three: 124)
      seed 3:  121, 204, 204, 214, 232, 164   (last three: 203)
    Rainbow plateaus here before climbing to 475 at 20,000-50,000 env steps (README), so the test asks
    for a plateau well above random, averaged over three evaluations, rather than one lucky evaluation:
    it used to take the best of six against 150, which seed 2 fails (best 144) and seed 1 passed only
    through its one evaluation above 150. Seed 1 is the config's default.
    """
    defaults = train.RainbowConfig()
    config = dataclasses.replace(
        tiny_classic_config(tmp_path),
        seed=1,
        num_iterations=6,
        num_train_steps=2500,
        num_eval_steps=1500,
        replay_capacity=defaults.replay_capacity,
        min_replay_size=defaults.min_replay_size,
        batch_size=defaults.batch_size,
        stop_when_solved=True,
    )
    state = train.main(config)
    rows = read_csv(os.path.join(state.run_dir, "results.csv"))
    last_three = [float(r["eval_mean_episode_return"]) for r in rows[-3:]]
    assert np.mean(last_three) >= 100, (
        f"greedy evaluation means {last_three} at {state.train_env_steps} env steps"
    )
