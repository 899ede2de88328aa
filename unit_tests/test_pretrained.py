"""Pretrained files (deep_rl_zoo.pretrained): a training checkpoint slimmed to weights, in float16, that
every eval_agent plays as it plays the checkpoint itself; and every file committed under pretrained/
loads and plays."""

import dataclasses
import glob
import importlib
import os

import gymnasium as gym
import pytest
import torch

from deep_rl_zoo import checkpoint, pretrained
from deep_rl_zoo.config import PolicyEvalConfig
from deep_rl_zoo.errors import CheckpointError
from deep_rl_zoo.ppo import eval_agent as ppo_eval_agent
from deep_rl_zoo.ppo.train import PpoConfig, build_network

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ppo_cartpole_checkpoint(path: str, normalize_observations: bool = True) -> torch.nn.Module:
    """A PPO CartPole checkpoint as training writes it: network, optimiser state, rng, loop state, flags."""
    torch.manual_seed(0)
    env = gym.make("CartPole-v1")
    config = PpoConfig(normalize_observations=normalize_observations, runs_dir="/home/someone/runs")
    network = build_network(config, env)
    if normalize_observations:  # a normaliser that has seen many states: its count is past float16's range
        network.normalizer.update(torch.randn(70_000, 4) * 3 + 1)
    optimizer = torch.optim.Adam(network.parameters())
    network(torch.randn(8, 4)).pi_logits.sum().backward()
    optimizer.step()  # an optimiser state with tensors in it, as after training
    agent_state = {"network": network.state_dict(), "optimizer": optimizer.state_dict(), "env_steps": 1000}
    loop_state = {"run_dir": "/home/someone/runs/PPO_CartPole-v1", "env_steps": 1000}
    checkpoint.save_checkpoint(
        path, "PPO", "CartPole-v1", 3, agent_state, loop_state, dataclasses.asdict(config)
    )
    return network


def test_export_keeps_weights_drops_training_state_and_machine_paths(tmp_path):
    source, output = str(tmp_path / "PPO_CartPole-v1_3.ckpt"), str(tmp_path / "pretrained.ckpt")
    network = _ppo_cartpole_checkpoint(source)
    pretrained.export(source, output)
    payload = checkpoint.load_checkpoint(output, "PPO", "CartPole-v1")  # the ordinary loader takes it
    assert set(payload["agent"]) == {"network"}  # no optimiser, no env-step counter
    assert payload["loop"] == {"pretrained": True, "float16": True}  # nothing to resume from
    assert "runs_dir" not in payload["config"] and payload["config"]["normalize_observations"] is True
    weights = payload["agent"]["network"]
    assert weights["network.actor.policy_head.weight"].dtype == torch.float16
    # The normaliser's count (70,001 states) would be inf in float16: buffers keep their dtype.
    assert weights["normalizer.count"].dtype == network.state_dict()["normalizer.count"].dtype
    torch.testing.assert_close(weights["normalizer.mean"], network.state_dict()["normalizer.mean"])
    assert os.path.getsize(output) < os.path.getsize(source) / 2  # Adam's two moments are gone too


def test_float16_file_plays_like_the_float32_network(tmp_path):
    source, output = str(tmp_path / "PPO_CartPole-v1_3.ckpt"), str(tmp_path / "pretrained.ckpt")
    network = _ppo_cartpole_checkpoint(source)
    pretrained.export(source, output)
    rebuilt = build_network(PpoConfig(normalize_observations=True), gym.make("CartPole-v1"))
    rebuilt.load_state_dict(checkpoint.load_checkpoint(output, "PPO", "CartPole-v1")["agent"]["network"])
    assert next(rebuilt.parameters()).dtype == torch.float32  # cast back on loading
    states = torch.randn(256, 4, generator=torch.Generator().manual_seed(1)) * 3 + 1
    with torch.no_grad():
        expected, got = network(states).pi_logits, rebuilt(states).pi_logits
    torch.testing.assert_close(got, expected, atol=2e-3, rtol=2e-3)  # float16 rounding of the weights only


def test_eval_agent_plays_a_pretrained_file(tmp_path):
    source, output = str(tmp_path / "PPO_CartPole-v1_3.ckpt"), str(tmp_path / "PPO_CartPole-v1_s1.ckpt")
    _ppo_cartpole_checkpoint(source)
    pretrained.export(source, output)
    returns = ppo_eval_agent.main(
        PolicyEvalConfig(load_checkpoint_file=output, num_episodes=1, recording_video_dir="")
    )
    assert len(returns) == 1 and returns[0] >= 1.0


def test_export_refuses_what_is_not_a_checkpoint(tmp_path):
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="truncated or not a checkpoint"):
        pretrained.export(str(bad), str(tmp_path / "out.ckpt"))
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        pretrained.export(str(tmp_path / "missing.ckpt"), str(tmp_path / "out.ckpt"))
    assert pretrained.main(["--checkpoint", str(bad), "--output", str(tmp_path / "out.pt")]) == 2
    assert not (tmp_path / "out.ckpt").exists()


PRETRAINED_FILES = sorted(glob.glob(os.path.join(REPO, "pretrained", "*.ckpt")))
EVAL_SCRIPTS = {
    "PPO": "ppo",
    "A2C-grad": "a2c",
    "DQN": "dqn",
    "DoubleDQN": "double_dqn",
    "Rainbow": "rainbow",
}  # agent name -> package, for the files committed


@pytest.mark.smoke
@pytest.mark.parametrize("path", PRETRAINED_FILES, ids=os.path.basename)
def test_every_committed_pretrained_file_plays(path, tmp_path):
    """Each file under pretrained/ loads through its agent's eval_agent and plays whole episodes' steps."""
    payload = checkpoint.load_checkpoint(
        path, *(lambda p: (p["agent_name"], p["environment_name"]))(torch.load(path, weights_only=True))
    )
    assert payload["loop"].get("pretrained") is True
    eval_module = importlib.import_module(f"deep_rl_zoo.{EVAL_SCRIPTS[payload['agent_name']]}.eval_agent")
    config_type = eval_module.main.__annotations__["config"]
    # A package that plays more than one agent (a2c: A2C and A2C-grad) is told whose file this is.
    names = {f.name for f in dataclasses.fields(config_type)}
    config = config_type(
        **({"agent_name": payload["agent_name"]} if "agent_name" in names else {}),
        environment_name=payload["environment_name"],
        load_checkpoint_file=path,
        num_eval_steps=300,
        recording_video_dir=str(tmp_path),
    )
    eval_module.main(config)
    assert glob.glob(str(tmp_path / "*.mp4"))  # the video a newcomer watches
