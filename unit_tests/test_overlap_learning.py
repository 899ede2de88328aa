"""`--overlap_learning`: a replay Q agent's gradient steps in a second thread while it goes on acting.

What a user relies on: the agent learns exactly what it would learn without overlap from the same
actions (the same batches, priorities and gradient steps), its actions come from the parameters
before the gradient steps in flight (one launch behind), and a seed still gives one run. Each agent is
built by its own `train.build_agents` on CartPole, driven through `main_loop.run_env_loop`; with
epsilon held at 1 the actions do not depend on the network, so a serial agent and an overlapped one
see the same episodes and must end with bit-identical networks.
"""

import importlib

import gymnasium as gym
import pytest
import torch

from deep_rl_zoo import main_loop, process_setup

SMALL = dict(
    environment_name="CartPole-v1",
    seed=3,
    num_threads=1,
    hidden_sizes=(32, 32),
    replay_capacity=500,
    min_replay_size=40,
    batch_size=16,
    learn_interval=4,
    target_network_update_period=5,
)
RANDOM_ACTIONS = dict(exploration_epsilon_begin_value=1.0, exploration_epsilon_end_value=1.0)
EPSILON_GREEDY = ["dqn", "double_dqn", "prioritized_dqn", "c51_dqn", "qr_dqn"]


def build(package: str, overlap: bool, **overrides):
    train = importlib.import_module(f"deep_rl_zoo.{package}.train")
    config_class = next(
        value
        for name, value in vars(train).items()
        if name.endswith("Config") and getattr(value, "__module__", "") == train.__name__
    )
    config = config_class(**SMALL, overlap_learning=overlap, **overrides)
    process_setup.seed_everything(config.seed, config.num_threads)  # as a run does: the networks' init
    env = gym.make("CartPole-v1")
    return train.build_agents(config, env, torch.device("cpu")).train_agent, env


def parameters(network: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in network.state_dict().values()]


def assert_same(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


@pytest.mark.parametrize("package", EPSILON_GREEDY)
def test_overlapped_learning_takes_the_serial_gradient_steps_and_acts_one_launch_behind(package):
    serial, serial_env = build(package, overlap=False, **RANDOM_ACTIONS)
    overlapped, overlapped_env = build(package, overlap=True, **RANDOM_ACTIONS)
    launches = []
    launch = overlapped._launch
    overlapped._launch = lambda steps: (launches.append(steps), launch(steps))
    serial_loop = main_loop.run_env_loop(serial_env, serial, seed=5)
    overlapped_loop = main_loop.run_env_loop(overlapped_env, overlapped, seed=5)
    for _ in range(300):  # about a dozen CartPole episodes, so resets fall among queued timesteps
        before = parameters(serial._network)  # the serial network before this step's gradient steps
        (serial_timestep, serial_action), (timestep, action) = next(serial_loop), next(overlapped_loop)
        assert action == serial_action and timestep.reward == serial_timestep.reward
        if launches and launches[-1] is not None:
            # Launched at this step: acting now uses the online network as it was before the launch,
            # which is the serial network before this step learned (the one-launch lag).
            assert_same(parameters(overlapped._acting_source), before)
            launches.append(None)
    state, serial_state = overlapped.state_dict(), serial.state_dict()  # waits for the step in flight
    assert state["learner_steps"] == serial_state["learner_steps"] > 50
    assert sum(n for n in launches if n is not None) == state["learner_steps"]  # every step in the thread
    assert state["env_steps"] == serial_state["env_steps"]
    assert_same(list(state["network"].values()), list(serial_state["network"].values()))
    assert_same(list(state["target_network"].values()), list(serial_state["target_network"].values()))
    assert overlapped.replay_contents.replay.size == serial.replay_contents.replay.size


@pytest.mark.parametrize("package", ["dqn", "iqn", "rainbow"])
def test_an_overlapped_run_is_the_same_run_for_the_same_seed(package):
    """The learner thread's timing does not reach the results: the acting copy, the queue and the
    agent's own generators (IQN's acting fractions, Rainbow's noise) are each touched by one thread."""
    runs = []
    for _ in range(2):
        agent, env = build(package, overlap=True)
        loop = main_loop.run_env_loop(env, agent, seed=5)
        actions = [next(loop)[1] for _ in range(300)]
        runs.append((actions, agent.statistics["learner_steps"], parameters(agent._network)))
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1] > 50
    assert_same(runs[0][2], runs[1][2])


def test_overlapped_learning_resumes_from_its_checkpoint_state():
    """`load_state_dict` waits for the thread, takes the saved networks into the acting copy too, and
    the next steps go on from the saved counts."""
    agent, env = build("dqn", overlap=True, **RANDOM_ACTIONS)
    loop = main_loop.run_env_loop(env, agent, seed=5)
    for _ in range(200):
        next(loop)
    state = agent.state_dict()
    resumed, _ = build("dqn", overlap=True, **RANDOM_ACTIONS)
    resumed.load_state_dict(state)
    assert_same(parameters(resumed._acting_source), list(state["network"].values()))
    assert resumed.statistics["learner_steps"] == state["learner_steps"]


def test_drqn_refuses_overlapped_learning_with_one_line():
    from deep_rl_zoo.drqn.train import DrqnConfig
    from deep_rl_zoo.errors import ConfigError

    with pytest.raises(ConfigError, match="DRQN acts and learns in turn"):
        DrqnConfig(environment_name="CartPole-v1", overlap_learning=True)


def test_auto_threads_give_each_of_the_two_threads_one_core():
    from deep_rl_zoo.dqn.train import DqnConfig

    assert DqnConfig(environment_name="Pong", overlap_learning=True).num_threads == 1
    assert DqnConfig(environment_name="Pong", overlap_learning=True, num_threads=2).num_threads == 2
