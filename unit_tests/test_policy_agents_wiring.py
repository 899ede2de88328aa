"""How each policy-gradient agent feeds its losses, checked with exact gradients worked out by hand.

The shared losses (`policy_gradient`, `multistep`, `vtrace`, `sac.losses`) have their own tests; these
check the agents' learners around them: which returns and advantages they build, with which sign, from
which network's outputs, with which discount at a termination and at a truncation, and what reaches the
optimizer. Every network here is a *table*: an observation is the integer index of a state, and each
state's logits and value are parameters of their own, so the gradient of a state's entries is exactly
that state's share of the loss. The optimizers record the gradients they are handed (`RecordingSgd`)
and usually have learning rate 0, so every step sees the same parameters.

Common arithmetic: with two actions and equal logits, pi = (0.5, 0.5) and
d(-w log pi(a | s)) / d logits[s] = -w (onehot(a) - pi), i.e. -w/2 for the action taken and +w/2 for
the other; averaged over N transitions, each is divided by N.
"""

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo import unrolls
from deep_rl_zoo.a2c import agent as a2c_agent
from deep_rl_zoo.actor_critic import agent as ac_agent
from deep_rl_zoo.impala import agent as impala_agent
from deep_rl_zoo.networks.curiosity import IcmOutput, TwoValueOutput
from deep_rl_zoo.networks.impala_resnet import ImpalaOutput
from deep_rl_zoo.networks.policy import (
    ActorCriticOutput,
    ActorOutput,
    CriticOutput,
    GaussianActorCriticOutput,
    GaussianActorOutput,
)
from deep_rl_zoo.networks.value import QNetworkOutput
from deep_rl_zoo.normalizers import ObservationNormalizer, RewardScaler
from deep_rl_zoo.ppo import agent as ppo_agent
from deep_rl_zoo.ppo_icm.agent import PpoIcm
from deep_rl_zoo.ppo_rnd.agent import PpoRnd
from deep_rl_zoo.reinforce import agent as reinforce_agent
from deep_rl_zoo.reinforce_baseline import agent as baseline_agent
from deep_rl_zoo.sac import agent as sac_agent
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.types_ import TimeStep

CPU = torch.device("cpu")
LOG3 = math.log(3.0)  # logits (log 3, 0) give pi = (0.75, 0.25)

# ----------------------------------------------------------------------------------------------------
# Table networks and a gradient-recording optimizer


def _parameter(values) -> nn.Parameter:
    return nn.Parameter(torch.tensor(values, dtype=torch.float32))


class Table(nn.Module):
    """A network made of tables: for observation [s], `output(*(table[s] for each table))`. Each table is
    a parameter named as given (`network.logits`, `network.values`, ...)."""

    def __init__(self, output: Callable[..., Any], **tables):
        super().__init__()
        self._output = output
        self._names = tuple(tables)
        for name, values in tables.items():
            self.register_parameter(name, _parameter(values))

    def forward(self, x):
        s = x[..., 0].long()
        return self._output(*(getattr(self, name)[s] for name in self._names))


def TableActor(logits) -> Table:  # noqa: N802 (named like the network it stands for)
    return Table(ActorOutput, logits=logits)


def TableCritic(values) -> Table:  # noqa: N802
    return Table(CriticOutput, values=values)


def TableQ(q_values) -> Table:  # noqa: N802
    return Table(QNetworkOutput, q=q_values)


class TableActorCritic(Table):
    """logits[s] and values[s] for observation [s]; `seen_means` records an observation normaliser's
    mean at every forward pass, when one is given."""

    def __init__(self, logits, values, normalizer: ObservationNormalizer | None = None):
        super().__init__(ActorCriticOutput, logits=logits, values=values)
        self.normalizer = normalizer
        self.seen_means: list[float] = []

    def forward(self, x):
        if self.normalizer is not None:
            self.seen_means.append(float(self.normalizer.mean[0]))
        return super().forward(x)


class TableGaussianActorCritic(nn.Module):
    """A 1-D Gaussian policy with mean[s], one learned log_std, and values[s]."""

    def __init__(self, means, log_std, values):
        super().__init__()
        self.means = _parameter(means)
        self.log_std = _parameter([log_std])
        self.values = _parameter(values)

    def forward(self, x):
        s = x[..., 0].long()
        mean = self.means[s].unsqueeze(-1)
        return GaussianActorCriticOutput(mean, self.log_std.expand_as(mean), self.values[s])


class TableImpalaNetwork(Table):
    """IMPALA's interface (time-major, with `first` and a core state) over tables, without an LSTM."""

    def __init__(self, logits, values):
        super().__init__(ImpalaOutput, logits=logits, values=values)

    def forward(self, x, first, core_state):
        return super().forward(x), core_state  # x: [T + 1, B, 1]


class RecordingSgd(torch.optim.SGD):
    """SGD that keeps a copy of the gradient of every parameter at every step (after any clipping)."""

    def __init__(self, params, lr=0.0):
        super().__init__(params, lr=lr)
        self.steps: list[dict[int, torch.Tensor]] = []

    def step(self, closure=None):
        self.steps.append(
            {
                id(p): (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
                for group in self.param_groups
                for p in group["params"]
            }
        )
        return super().step(closure)

    def grad(self, parameter: nn.Parameter, step: int = -1) -> torch.Tensor:
        return self.steps[step][id(parameter)]


def _pg_rows(actions, weights, num_states, num_transitions):
    """Expected gradient of mean_t -w_t log pi(a_t | s_t) on uniform 2-action table logits, state t
    being row t: -w_t / 2 / N on the action taken, +w_t / 2 / N on the other."""
    grad = torch.zeros(num_states, 2)
    for t, (a, w) in enumerate(zip(actions, weights, strict=True)):
        grad[t, a] = -w / 2 / num_transitions
        grad[t, 1 - a] = w / 2 / num_transitions
    return grad


def _entropy_bonus_grad(logits, coef, num_transitions):
    """d(-coef * H(pi)) / d logits = coef * pi_i (log pi_i + H) / N: positive on the likelier action, so
    descent moves the policy towards uniform."""
    log_pi = torch.log_softmax(torch.tensor(logits, dtype=torch.float64), -1)
    pi = log_pi.exp()
    entropy = -(pi * log_pi).sum()
    return (coef * pi * (log_pi + entropy) / num_transitions).float()


def _obs(s) -> np.ndarray:
    return np.array([s], np.float32)


def _play(agent, rewards, end=None, actions=None):
    """States 0, 1, ..., T (s_t = [t]); the last timestep ends the episode as `end` says, or not.
    Actions are scripted (a_t = actions[t]) so the expected gradients are fixed."""
    if actions is not None:
        agent._act = lambda observation: dict(enumerate(actions)).get(int(observation[0]), 0)
    agent.reset()
    agent.step(TimeStep(_obs(0), 0.0, False, False, True, {}))
    for t, reward in enumerate(rewards, start=1):
        last = t == len(rewards)
        agent.step(
            TimeStep(_obs(t), reward, last and end == "terminated", last and end == "truncated", False, {})
        )


# ----------------------------------------------------------------------------------------------------
# REINFORCE


def _reinforce(normalize_returns=False, entropy_coef=0.0, max_grad_norm=0.0, logits=None):
    network = TableActor(logits if logits is not None else [[0.0, 0.0]] * 4)
    optimizer = RecordingSgd(network.parameters())
    agent = reinforce_agent.Reinforce(
        policy_network=network,
        optimizer=optimizer,
        discount=0.5,
        normalize_returns=normalize_returns,
        entropy_coef=entropy_coef,
        max_grad_norm=max_grad_norm,
        device=CPU,
    )
    return agent, network, optimizer


def test_reinforce_weighs_each_log_probability_by_its_monte_carlo_return():
    agent, network, optimizer = _reinforce()
    _play(agent, [1.0, 2.0, 4.0], end="terminated", actions=[0, 1, 1])
    # G = [1 + 0.5 * (2 + 0.5 * 4), 2 + 0.5 * 4, 4] = [3, 4, 4]; 3 steps: taken action -G/6 = -0.5, -2/3, -2/3
    expected = _pg_rows([0, 1, 1], [3.0, 4.0, 4.0], num_states=4, num_transitions=3)
    assert len(optimizer.steps) == 1
    torch.testing.assert_close(optimizer.grad(network.logits), expected)


@pytest.mark.parametrize("chunk_size", [1, 2])
def test_reinforce_chunked_episode_gives_the_same_gradient(monkeypatch, chunk_size):
    # Chunks of 1 or 2 steps: 3 backward passes of sum / 3 must add up to the one-pass mean.
    monkeypatch.setattr(reinforce_agent, "LEARN_CHUNK_SIZE", chunk_size)
    agent, network, optimizer = _reinforce()
    _play(agent, [1.0, 2.0, 4.0], end="terminated", actions=[0, 1, 1])
    expected = _pg_rows([0, 1, 1], [3.0, 4.0, 4.0], num_states=4, num_transitions=3)
    torch.testing.assert_close(optimizer.grad(network.logits), expected)


def test_reinforce_normalised_returns_are_the_weights():
    agent, network, optimizer = _reinforce(normalize_returns=True)
    _play(agent, [1.0, 2.0, 4.0], end="truncated", actions=[0, 1, 1])
    # G = [3, 4, 4]: mean 11/3, sample std sqrt(((-2/3)^2 + 2 (1/3)^2) / 2) = sqrt(1/3)
    # weights (G - 11/3) / sqrt(1/3) = [-2, 1, 1] / sqrt(3)
    weights = [-2 / math.sqrt(3), 1 / math.sqrt(3), 1 / math.sqrt(3)]
    expected = _pg_rows([0, 1, 1], weights, num_states=4, num_transitions=3)
    torch.testing.assert_close(optimizer.grad(network.logits), expected)


def test_reinforce_entropy_bonus_pushes_towards_uniform():
    logits = [[LOG3, 0.0], [LOG3, 0.0], [0.0, 0.0]]
    agent, network, optimizer = _reinforce(entropy_coef=0.5, logits=logits)
    _play(agent, [0.0, 0.0], end="terminated", actions=[0, 1])  # G = 0: only the entropy term is left
    expected = torch.zeros(3, 2)
    expected[0] = expected[1] = _entropy_bonus_grad([LOG3, 0.0], 0.5, 2)
    torch.testing.assert_close(optimizer.grad(network.logits), expected)
    assert expected[0, 0] > 0 > expected[0, 1]  # descent lowers the likelier action's logit


def test_reinforce_clips_the_gradient_norm():
    agent, network, optimizer = _reinforce(max_grad_norm=0.1)
    _play(agent, [1.0, 2.0, 4.0], end="terminated", actions=[0, 1, 1])
    # unclipped norm sqrt(2 (0.5^2 + 2 (2/3)^2)) > 0.1: scaled down to norm 0.1
    unclipped = _pg_rows([0, 1, 1], [3.0, 4.0, 4.0], num_states=4, num_transitions=3)
    torch.testing.assert_close(optimizer.grad(network.logits), unclipped * 0.1 / unclipped.norm())


# ----------------------------------------------------------------------------------------------------
# REINFORCE with baseline


def _reinforce_baseline(values, normalize_advantages=False, entropy_coef=0.0, logits=None):
    policy = TableActor(logits if logits is not None else [[0.0, 0.0]] * len(values))
    critic = TableCritic(values)
    optimizer = RecordingSgd([{"params": policy.parameters()}, {"params": critic.parameters()}])
    agent = baseline_agent.ReinforceBaseline(
        policy_network=policy,
        value_network=critic,
        optimizer=optimizer,
        discount=0.5,
        normalize_advantages=normalize_advantages,
        entropy_coef=entropy_coef,
        max_grad_norm=0.0,
        device=CPU,
    )
    return agent, policy, critic, optimizer


def test_reinforce_baseline_policy_follows_return_minus_value_and_critic_regresses_on_returns():
    agent, policy, critic, optimizer = _reinforce_baseline([1.0, 5.0, 2.0, 0.0])
    _play(agent, [1.0, 2.0, 4.0], end="terminated", actions=[0, 1, 1])
    # G = [3, 4, 4], V = [1, 5, 2]: A = G - V = [2, -1, 2]
    expected_policy = _pg_rows([0, 1, 1], [2.0, -1.0, 2.0], num_states=4, num_transitions=3)
    torch.testing.assert_close(optimizer.grad(policy.logits), expected_policy)
    # d/dV mean 0.5 (G - V)^2 = (V - G) / 3 = [-2, 1, -2] / 3; the last state (terminal) has no value loss
    torch.testing.assert_close(optimizer.grad(critic.values), torch.tensor([-2.0, 1.0, -2.0, 0.0]) / 3)


@pytest.mark.parametrize("chunk_size", [1, 2])
def test_reinforce_baseline_chunked_episode_gives_the_same_gradients(monkeypatch, chunk_size):
    # The baseline learns in REINFORCE's chunks: values, policy and critic gradients as in one pass.
    monkeypatch.setattr(reinforce_agent, "LEARN_CHUNK_SIZE", chunk_size)
    agent, policy, critic, optimizer = _reinforce_baseline([1.0, 5.0, 2.0, 0.0])
    _play(agent, [1.0, 2.0, 4.0], end="terminated", actions=[0, 1, 1])
    expected_policy = _pg_rows([0, 1, 1], [2.0, -1.0, 2.0], num_states=4, num_transitions=3)
    torch.testing.assert_close(optimizer.grad(policy.logits), expected_policy)
    torch.testing.assert_close(optimizer.grad(critic.values), torch.tensor([-2.0, 1.0, -2.0, 0.0]) / 3)


def test_reinforce_baseline_normalises_the_advantages():
    agent, policy, critic, optimizer = _reinforce_baseline([1.0, 5.0, 2.0, 0.0], normalize_advantages=True)
    _play(agent, [1.0, 2.0, 4.0], end="terminated", actions=[0, 1, 1])
    # A = [2, -1, 2]: mean 1, sample std sqrt((1 + 4 + 1) / 2) = sqrt(3): [1, -2, 1] / sqrt(3)
    weights = [1 / math.sqrt(3), -2 / math.sqrt(3), 1 / math.sqrt(3)]
    expected_policy = _pg_rows([0, 1, 1], weights, num_states=4, num_transitions=3)
    torch.testing.assert_close(optimizer.grad(policy.logits), expected_policy)
    # the critic still regresses on the raw returns
    torch.testing.assert_close(optimizer.grad(critic.values), torch.tensor([-2.0, 1.0, -2.0, 0.0]) / 3)


def test_reinforce_baseline_entropy_bonus_pushes_towards_uniform():
    agent, policy, critic, optimizer = _reinforce_baseline(
        [0.0, 0.0, 0.0], entropy_coef=0.5, logits=[[LOG3, 0.0], [LOG3, 0.0], [0.0, 0.0]]
    )
    _play(agent, [0.0, 0.0], end="terminated", actions=[0, 1])  # G = V = 0: advantages 0
    expected = torch.zeros(3, 2)
    expected[0] = expected[1] = _entropy_bonus_grad([LOG3, 0.0], 0.5, 2)
    torch.testing.assert_close(optimizer.grad(policy.logits), expected)


# ----------------------------------------------------------------------------------------------------
# Actor-critic


def _actor_critic(
    values, unroll_length, gae_lambda=0.5, normalize_advantages=False, entropy_coef=0.0, logits=None
):
    network = TableActorCritic(logits if logits is not None else [[0.0, 0.0]] * len(values), values)
    optimizer = RecordingSgd(network.parameters())
    agent = ac_agent.ActorCritic(
        network=network,
        optimizer=optimizer,
        discount=0.5,
        unroll_length=unroll_length,
        gae_lambda=gae_lambda,
        value_coef=0.25,
        entropy_coef=entropy_coef,
        normalize_advantages=normalize_advantages,
        max_grad_norm=0.0,
        device=CPU,
    )
    return agent, network, optimizer


# V = [1, 2, 4] for s_0, s_1 and the bootstrap state s_2; rewards 1, 1; gamma 0.5, lambda 0.5:
#   bootstrapped at s_2:  delta_1 = 1 + 0.5 * 4 - 2 = 1,   delta_0 = 1 + 0.5 * 2 - 1 = 1
#                         A_1 = 1,  A_0 = 1 + 0.5 * 0.5 * 1 = 1.25;   targets A + V = [2.25, 3]
#   s_2 terminal:         delta_1 = 1 + 0 - 2 = -1,       delta_0 = 1
#                         A_1 = -1, A_0 = 1 + 0.25 * -1 = 0.75;       targets [1.75, 1]
@pytest.mark.parametrize(
    "end, unroll_length, advantages",
    [
        (None, 2, [1.25, 1.0]),  # the unroll ends mid-episode: bootstrap from V(s_2)
        ("truncated", 5, [1.25, 1.0]),  # a time limit also bootstraps from V(s_2)
        ("terminated", 5, [0.75, -1.0]),  # a termination does not
    ],
)
def test_actor_critic_gae_bootstraps_unless_terminated(end, unroll_length, advantages):
    values = [1.0, 2.0, 4.0]
    agent, network, optimizer = _actor_critic(values, unroll_length)
    _play(agent, [1.0, 1.0], end=end, actions=[0, 1])
    assert len(optimizer.steps) == 1
    torch.testing.assert_close(optimizer.grad(network.logits), _pg_rows([0, 1], advantages, 3, 2))
    # value_coef 0.25: d/dV 0.25 * mean 0.5 (target - V)^2 = 0.25 * (V - target) / 2 = -A / 8; none for s_2
    expected_values = torch.tensor([-advantages[0] / 8, -advantages[1] / 8, 0.0])
    torch.testing.assert_close(optimizer.grad(network.values), expected_values)


def test_actor_critic_normalises_the_advantages_of_each_unroll():
    agent, network, optimizer = _actor_critic([1.0, 2.0, 4.0], 2, normalize_advantages=True)
    _play(agent, [1.0, 1.0], actions=[0, 1])
    # A = [1.25, 1]: mean 1.125, sample std sqrt(2 * 0.125^2) = 0.125 sqrt(2): [1, -1] / sqrt(2)
    expected = _pg_rows([0, 1], [1 / math.sqrt(2), -1 / math.sqrt(2)], 3, 2)
    torch.testing.assert_close(optimizer.grad(network.logits), expected)
    # the critic's targets are the raw lambda-returns [2.25, 3]
    torch.testing.assert_close(optimizer.grad(network.values), torch.tensor([-1.25 / 8, -1.0 / 8, 0.0]))


def test_actor_critic_entropy_bonus_pushes_towards_uniform():
    logits = [[LOG3, 0.0], [LOG3, 0.0], [0.0, 0.0]]
    agent, network, optimizer = _actor_critic([0.0, 0.0, 0.0], 2, entropy_coef=0.5, logits=logits)
    _play(agent, [0.0, 0.0], actions=[0, 1])  # rewards and values 0: advantages 0
    expected = torch.zeros(3, 2)
    expected[0] = expected[1] = _entropy_bonus_grad([LOG3, 0.0], 0.5, 2)
    torch.testing.assert_close(optimizer.grad(network.logits), expected)


# ----------------------------------------------------------------------------------------------------
# A2C and A2C-grad


def _unroll(actor_index, states, actions, rewards, terminated=None, truncated=None, valid=None):
    n = len(actions)
    return unrolls.Unroll(
        actor_index=actor_index,
        observation=np.array(states, np.float32)[:, None],
        action=np.asarray(actions),
        reward=np.asarray(rewards, np.float32),
        terminated=np.asarray(terminated if terminated is not None else [False] * n),
        truncated=np.asarray(truncated if truncated is not None else [False] * n),
        valid=np.asarray(valid if valid is not None else [True] * n),
    )


# Two unrolls of T = 2 over a table of 6 states, gamma 0.5, lambda 1 (A2C's n-step returns):
#   actor 0: s_0 -> s_1 -> s_2, rewards 1, 1, V = 1, 2, 4:
#            G_1 = 1 + 0.5 * 4 = 3, G_0 = 1 + 0.5 * 3 = 2.5;  A = [1.5, 1]
#   actor 1: s_3 -> s_4 (terminal) | s_5 (a reset: pair 1 is no transition), reward 1, V(s_3) = 0:
#            G = 1 (no bootstrap past the termination);  A = [1]
# 3 valid transitions.
A2C_VALUES = [1.0, 2.0, 4.0, 0.0, 2.0, 4.0]


def _a2c_unrolls():
    return [
        _unroll(0, [0, 1, 2], [0, 1], [1.0, 1.0]),
        _unroll(1, [3, 4, 5], [1, 0], [1.0, 0.0], terminated=[True, False], valid=[True, False]),
    ]


def _a2c_expected_grads(num_transitions=3):
    policy = torch.zeros(6, 2)
    for s, a, advantage in ((0, 0, 1.5), (1, 1, 1.0), (3, 1, 1.0)):
        policy[s, a], policy[s, 1 - a] = -advantage / 2 / num_transitions, advantage / 2 / num_transitions
    # value_coef 0.5: 0.5 * (V - G) / 3 = -A / 6
    value = torch.tensor([-1.5, -1.0, 0.0, -1.0, 0.0, 0.0]) / 2 / num_transitions
    return policy, value


def _a2c_learner(cls, network, optimizer, max_grad_norm=0.0):
    return cls(
        network=network,
        optimizer=optimizer,
        num_actors=2,
        discount=0.5,
        value_coef=0.5,
        entropy_coef=0.0,
        max_grad_norm=max_grad_norm,
        device=CPU,
    )


def test_a2c_learner_uses_n_step_advantages_and_masks_the_pair_across_a_reset():
    network = TableActorCritic([[0.0, 0.0]] * 6, A2C_VALUES)
    optimizer = RecordingSgd(network.parameters())
    learner = _a2c_learner(a2c_agent.A2c, network, optimizer)
    learner.learn(list(reversed(_a2c_unrolls())))  # arrival order does not matter
    policy, value = _a2c_expected_grads()
    torch.testing.assert_close(optimizer.grad(network.logits), policy)
    torch.testing.assert_close(optimizer.grad(network.values), value)
    assert learner.statistics["learner_steps"] == 1


def test_a2c_entropy_bonus_pushes_towards_uniform():
    network = TableActorCritic([[LOG3, 0.0]] * 3, [0.0, 0.0, 0.0])
    optimizer = RecordingSgd(network.parameters())
    learner = a2c_agent.A2c(
        network=network, optimizer=optimizer, num_actors=1, discount=0.5, value_coef=0.5, entropy_coef=0.5,
        max_grad_norm=0.0, device=CPU,
    )  # fmt: skip
    learner.learn([_unroll(0, [0, 1, 2], [0, 1], [0.0, 0.0])])  # rewards and values 0: advantages 0
    expected = torch.zeros(3, 2)
    expected[0] = expected[1] = _entropy_bonus_grad([LOG3, 0.0], 0.5, 2)
    torch.testing.assert_close(optimizer.grad(network.logits), expected)


def test_a2c_grad_actor_sends_the_gradient_of_its_own_unroll_afresh_each_time():
    network = TableActorCritic([[0.0, 0.0]] * 6, A2C_VALUES)
    computer = a2c_agent.GradientComputer(network, 0.5, 0.5, 0.0, CPU)
    unroll = _a2c_unrolls()[0]
    # actor 0 alone: 2 transitions, A = [1.5, 1]
    policy = _pg_rows([0, 1], [1.5, 1.0], 6, 2)
    value = torch.tensor([-1.5, -1.0, 0.0, 0.0, 0.0, 0.0]) / 2 / 2
    expected = torch.cat([policy.flatten(), value]).numpy()  # parameter order: logits, values
    for _ in range(2):  # the second call must not add to the first call's gradient
        gradient = computer([unroll])
        np.testing.assert_allclose(gradient.gradient, expected, rtol=1e-6, atol=1e-7)
        assert (gradient.actor_index, gradient.num_valid) == (0, 2)


def test_a2c_grad_actor_of_several_envs_sends_one_gradient_of_their_pooled_loss():
    # An actor stepping both envs (--num_envs=2) sends one gradient: A2C's loss on its 3 valid
    # transitions, the learner's batch gradient, and 3 as its weight.
    network = TableActorCritic([[0.0, 0.0]] * 6, A2C_VALUES)
    computer = a2c_agent.GradientComputer(network, 0.5, 0.5, 0.0, CPU)
    gradient = computer(list(reversed(_a2c_unrolls())))
    policy, value = _a2c_expected_grads()
    expected = torch.cat([policy.flatten(), value]).numpy()
    np.testing.assert_allclose(gradient.gradient, expected, rtol=1e-6, atol=1e-7)
    assert (gradient.actor_index, gradient.num_valid) == (0, 3)


def test_a2c_grad_learner_weights_the_actors_gradients_by_their_valid_transitions():
    network = TableActorCritic([[0.0, 0.0]], [0.0])  # 3 parameters: 2 logits, 1 value
    optimizer = RecordingSgd(network.parameters())
    learner = _a2c_learner(a2c_agent.A2cGrad, network, optimizer)
    gradients = [
        a2c_agent.Gradient(1, np.array([3.0, 0.0, 6.0], np.float32), {"loss": 3.0}, 3),
        a2c_agent.Gradient(0, np.array([1.0, 2.0, -2.0], np.float32), {"loss": 1.0}, 1),
    ]
    learner.learn(gradients)
    # (1 * [1, 2, -2] + 3 * [3, 0, 6]) / 4 = [2.5, 0.5, 4]; an unweighted mean would give [2, 1, 2]
    torch.testing.assert_close(optimizer.grad(network.logits), torch.tensor([[2.5, 0.5]]))
    torch.testing.assert_close(optimizer.grad(network.values), torch.tensor([4.0]))
    assert learner.statistics["loss"] == 2.5  # (1 * 1 + 3 * 3) / 4


def test_a2c_grad_learner_clips_the_mean_gradient():
    network = TableActorCritic([[0.0, 0.0]], [0.0])
    optimizer = RecordingSgd(network.parameters())
    learner = _a2c_learner(a2c_agent.A2cGrad, network, optimizer, max_grad_norm=1.0)
    learner.learn([a2c_agent.Gradient(0, np.array([3.0, 0.0, 4.0], np.float32), {"loss": 0.0}, 2)] * 2)
    # mean [3, 0, 4] has norm 5: clipped to norm 1, [0.6, 0, 0.8]
    torch.testing.assert_close(optimizer.grad(network.logits), torch.tensor([[0.6, 0.0]]))
    torch.testing.assert_close(optimizer.grad(network.values), torch.tensor([0.8]))


def test_a2c_and_a2c_grad_take_the_same_step_when_an_episode_end_leaves_one_actor_fewer_transitions():
    # Actor 0 has 2 valid transitions, actor 1 one (its second pair crosses a reset): A2C's loss is the
    # mean over the 3, which A2C-grad matches by weighting each actor's mean gradient by its count.
    unrolls_ = _a2c_unrolls()
    a2c_network = TableActorCritic([[0.0, 0.0]] * 6, A2C_VALUES)
    a2c_optimizer = RecordingSgd(a2c_network.parameters())
    _a2c_learner(a2c_agent.A2c, a2c_network, a2c_optimizer).learn(unrolls_)
    grad_network = TableActorCritic([[0.0, 0.0]] * 6, A2C_VALUES)
    grad_optimizer = RecordingSgd(grad_network.parameters())
    computer = a2c_agent.GradientComputer(grad_network, 0.5, 0.5, 0.0, CPU)
    _a2c_learner(a2c_agent.A2cGrad, grad_network, grad_optimizer).learn([computer([u]) for u in unrolls_])
    torch.testing.assert_close(
        grad_optimizer.grad(grad_network.logits), a2c_optimizer.grad(a2c_network.logits)
    )
    torch.testing.assert_close(
        grad_optimizer.grad(grad_network.values), a2c_optimizer.grad(a2c_network.values)
    )


# ----------------------------------------------------------------------------------------------------
# SAC (discrete)


# One transition s_0 --a=1, r=1--> s_1, gamma 0.5, alpha = 2 (log_alpha = log 2), tau 0.25:
#   policy: pi(.|s_0) = (0.5, 0.5), pi(.|s_1) = (0.75, 0.25);  H(s_1) = -(0.75 log 0.75 + 0.25 log 0.25)
#   online Q1(s_0) = (1, 5), Q2(s_0) = (2, 4);  target Q1'(s_1) = (4, 2), Q2'(s_1) = (3, 6)
#   (the online nets at s_1 and the targets at s_0 hold 10s, which no correct step reads)
#   soft V(s_1) = sum_a pi(a|s_1) [min(Q1', Q2')(s_1, a) - alpha log pi(a|s_1)]
#               = 0.75 * 3 + 0.25 * 2 + 2 H(s_1) = 2.75 + 2 H(s_1)
#   y = 1 + 0.5 V(s_1)
def _sac(discount=0.5, terminated=False, truncated=False, target_update_rate=0.25, target_update_period=1):
    policy = TableActor([[0.0, 0.0], [LOG3, 0.0]])
    q1, q2 = TableQ([[1.0, 5.0], [10.0, 10.0]]), TableQ([[2.0, 4.0], [10.0, 10.0]])
    target_q1, target_q2 = TableQ([[10.0, 10.0], [4.0, 2.0]]), TableQ([[10.0, 10.0], [3.0, 6.0]])
    networks = sac_agent.SacNetworks(policy, q1, q2, target_q1, target_q2)
    with torch.no_grad():
        networks.log_alpha.fill_(math.log(2.0))
    optimizers = {
        "q": RecordingSgd([*q1.parameters(), *q2.parameters()]),
        "policy": RecordingSgd(policy.parameters()),
        "alpha": RecordingSgd([networks.log_alpha]),
    }
    learner = sac_agent.Sac(
        networks=networks,
        q_optimizer=optimizers["q"],
        policy_optimizer=optimizers["policy"],
        alpha_optimizer=optimizers["alpha"],
        replay=replay_lib.UniformReplay(10, np.random.default_rng(0)),
        frame_store=None,
        batch_size=1,
        min_replay_size=1,
        updates_per_env_step=1.0,
        discount=discount,
        target_entropy=0.2,
        target_update_rate=target_update_rate,
        max_grad_norm=0.0,
        device=CPU,
        target_update_period=target_update_period,
    )
    chunk = _unroll(0, [0, 1], [1], [1.0], terminated=[terminated], truncated=[truncated])
    return learner, networks, optimizers, chunk


H_S1 = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))


@pytest.mark.parametrize(
    "terminated, truncated, target",
    [
        (False, False, 1 + 0.5 * (2.75 + 2 * H_S1)),
        (False, True, 1 + 0.5 * (2.75 + 2 * H_S1)),  # a time limit still bootstraps
        (True, False, 1.0),  # y = r
    ],
)
def test_sac_critics_regress_on_the_soft_target_of_the_twin_target_minimum(terminated, truncated, target):
    learner, networks, optimizers, chunk = _sac(terminated=terminated, truncated=truncated)
    learner.learn([chunk])
    assert learner.statistics["learner_steps"] == 1
    # loss 0.5 (Q1(s_0, 1) - y)^2 + 0.5 (Q2(s_0, 1) - y)^2: gradients Q1 - y = 5 - y and Q2 - y = 4 - y
    expected_q1 = torch.tensor([[0.0, 5.0 - target], [0.0, 0.0]])
    expected_q2 = torch.tensor([[0.0, 4.0 - target], [0.0, 0.0]])
    torch.testing.assert_close(optimizers["q"].grad(networks.q1.q), expected_q1)
    torch.testing.assert_close(optimizers["q"].grad(networks.q2.q), expected_q2)


def test_sac_policy_moves_towards_the_online_twin_minimum():
    learner, networks, optimizers, chunk = _sac()
    learner.learn([chunk])
    # loss sum_a pi_a g_a with g = alpha log pi - min(Q1, Q2)(s_0) = 2 log 0.5 - (1, 4);
    # d/dz_j = pi_j (g_j - sum_a pi_a g_a) = 0.5 * ((-1) - (-2.5), (-4) - (-2.5)) = (0.75, -0.75)
    expected = torch.tensor([[0.75, -0.75], [0.0, 0.0]])
    torch.testing.assert_close(optimizers["policy"].grad(networks.policy.logits), expected)


def test_sac_temperature_gradient_is_alpha_times_entropy_minus_target():
    learner, networks, optimizers, chunk = _sac()
    learner.learn([chunk])
    # loss alpha (H(pi(.|s_0)) - H_target) (eq. 11) at alpha 2: gradient 2 (log 2 - 0.2) > 0 with respect
    # to log alpha, so descent lowers alpha
    assert optimizers["alpha"].grad(networks.log_alpha).item() == pytest.approx(2 * (math.log(2) - 0.2))
    assert learner.statistics["alpha"] == pytest.approx(2.0)


def test_sac_targets_move_by_polyak_averaging():
    learner, networks, optimizers, chunk = _sac()
    learner.learn([chunk])
    # lr 0: online unchanged; target <- target + 0.25 (online - target)
    # Q1': (10, 10) + 0.25 * ((1, 5) - (10, 10)) = (7.75, 8.75);  (4, 2) + 0.25 * ((10, 10) - (4, 2)) = (5.5, 4)
    torch.testing.assert_close(networks.target_q1.q.detach(), torch.tensor([[7.75, 8.75], [5.5, 4.0]]))
    # Q2': (10, 10) + 0.25 * ((2, 4) - (10, 10)) = (8, 8.5);  (3, 6) + 0.25 * ((10, 10) - (3, 6)) = (4.75, 7)
    torch.testing.assert_close(networks.target_q2.q.detach(), torch.tensor([[8.0, 8.5], [4.75, 7.0]]))
    torch.testing.assert_close(networks.q1.q.detach(), torch.tensor([[1.0, 5.0], [10.0, 10.0]]))


def test_sac_targets_are_copied_every_period_at_tau_one():
    # The paper's Atari schedule: tau 1 every 3rd gradient step here. lr 0, so the online tables stay.
    learner, networks, optimizers, chunk = _sac(target_update_rate=1.0, target_update_period=3)
    for step in (1, 2):
        learner.learn([chunk])
        assert learner.statistics["learner_steps"] == step
        assert torch.equal(
            networks.target_q1.q.detach(), torch.tensor([[10.0, 10.0], [4.0, 2.0]])
        )  # untouched
        assert torch.equal(networks.target_q2.q.detach(), torch.tensor([[10.0, 10.0], [3.0, 6.0]]))
    learner.learn([chunk])  # step 3: target <- online, exactly
    assert torch.equal(networks.target_q1.q.detach(), networks.q1.q.detach())
    assert torch.equal(networks.target_q2.q.detach(), networks.q2.q.detach())
    assert torch.equal(networks.target_q2.q.detach(), torch.tensor([[2.0, 4.0], [10.0, 10.0]]))


# ----------------------------------------------------------------------------------------------------
# PPO


def _ppo(network, optimizer, num_epochs=1, minibatch_size=2, gae_lambda=1.0, discount=0.5, entropy_coef=0.0,
         observation_normalizer=None, reward_scaler=None, clip_epsilon=0.2, value_coef=0.25, seed=0):  # fmt: skip
    return ppo_agent.Ppo(
        network=network,
        optimizer=optimizer,
        num_actors=1,
        discount=discount,
        gae_lambda=gae_lambda,
        clip_epsilon=clip_epsilon,
        num_epochs=num_epochs,
        minibatch_size=minibatch_size,
        value_coef=value_coef,
        entropy_coef=entropy_coef,
        max_grad_norm=0.0,
        learning_rate=LinearSchedule(optimizer.defaults["lr"], optimizer.defaults["lr"], 0, 0),
        rng=np.random.default_rng(seed),
        device=CPU,
        observation_normalizer=observation_normalizer,
        reward_scaler=reward_scaler,
    )


def test_ppo_normalises_advantages_and_clips_the_ratio_against_the_behaviour_policy():
    # s_0 --a=0, r=1--> s_1 --a=1, r=0--> s_2, V = 0, gamma 0.5, lambda 1: A = [1 + 0, 0] = [1, 0]
    # normalised per minibatch: mean 0.5, sample std sqrt(2 * 0.5^2) = 1/sqrt(2): [1, -1] / sqrt(2)
    network = TableActorCritic([[0.0, 0.0]] * 3, [0.0, 0.0, 0.0])
    # lr 4 sqrt(2) moves each logit by exactly 1 in epoch 1 (its gradients are +-1 / (4 sqrt 2))
    optimizer = RecordingSgd(network.parameters(), lr=4 * math.sqrt(2))
    learner = _ppo(network, optimizer, num_epochs=2)
    learner.learn([_unroll(0, [0, 1, 2], [0, 1], [1.0, 0.0])])
    assert len(optimizer.steps) == 2  # 2 epochs of one minibatch of 2
    # Epoch 1, ratio 1: loss -mean(ratio A): d/dz[s, a_s] = -(1/2) A_s (1 - 0.5) = -A_s / 4 = -+1 / (4 sqrt 2)
    c = 1 / (4 * math.sqrt(2))
    torch.testing.assert_close(
        optimizer.grad(network.logits, 0), torch.tensor([[-c, c], [-c, c], [0.0, 0.0]])
    )
    # After it, logits (1, -1) in both states: pi_new(a_0 | s_0) = 1 / (1 + e^-2) ~ 0.88, ratio 1.76 > 1.2
    # with A > 0; pi_new(a_1 | s_1) ~ 0.12, ratio 0.24 < 0.8 with A < 0: both clipped, no gradient left.
    # (Ratios against the current policy would be 1 again and give epoch 1's gradient.)
    torch.testing.assert_close(optimizer.grad(network.logits, 1), torch.zeros(3, 2))
    assert learner.statistics["clip_fraction"] == pytest.approx(0.5)  # (0 + 2/2) / 2 minibatch steps


def test_ppo_advantages_are_normalised_per_minibatch_and_every_transition_is_used_once_per_epoch():
    # gamma 0: A_t = r_t - V = r_t = 1, 2, 3, 4 for states 0..3; minibatches of 2 in a random order.
    network = TableActorCritic([[0.0, 0.0]] * 5, [0.0] * 5)
    optimizer = RecordingSgd(network.parameters())
    learner = _ppo(network, optimizer, num_epochs=3, discount=0.0)
    learner.learn([_unroll(0, [0, 1, 2, 3, 4], [0, 0, 0, 0], [1.0, 2.0, 3.0, 4.0])])
    assert len(optimizer.steps) == 3 * 2
    c = 1 / (4 * math.sqrt(2))  # two different advantages normalise to +-1/sqrt(2): gradient -+c on a = 0
    for epoch in range(3):
        seen = []
        for step in (2 * epoch, 2 * epoch + 1):
            grad = optimizer.grad(network.logits, step)[:, 0]
            pair = torch.nonzero(grad).flatten().tolist()
            assert len(pair) == 2
            low, high = sorted(pair)  # the larger state index has the larger advantage
            assert grad[high].item() == pytest.approx(-c) and grad[low].item() == pytest.approx(c)
            seen += pair
        assert sorted(seen) == [0, 1, 2, 3]


def test_ppo_critic_regresses_on_lambda_returns_with_the_collecting_parameters():
    # V = [1, 2, 4], rewards 1, 1, gamma 0.5, lambda 0.5: A = [1.25, 1], targets A + V = [2.25, 3]
    # (see the actor-critic test above for the arithmetic)
    network = TableActorCritic([[0.0, 0.0]] * 3, [1.0, 2.0, 4.0])
    optimizer = RecordingSgd(network.parameters())
    learner = _ppo(network, optimizer, gae_lambda=0.5)
    learner.learn([_unroll(0, [0, 1, 2], [0, 1], [1.0, 1.0])])
    # value_coef 0.25: 0.25 * (V - target) / 2 = [-1.25, -1] / 8; no value loss at the bootstrap state
    torch.testing.assert_close(optimizer.grad(network.values), torch.tensor([-1.25 / 8, -1.0 / 8, 0.0]))
    assert learner.statistics["explained_variance"] == pytest.approx(1 - 0.03125 / 0.28125)
    # Var[target - V] = Var[1.25, 1] = 0.03125; Var[target] = Var[2.25, 3] = 0.28125


def test_ppo_termination_and_truncation_inside_the_batch():
    # s_0 --r=1--> s_1 (ends) | s_2 --r=1--> s_3;  V = [1, 2, 4, 8], gamma 0.5, lambda 1, value_coef 0.25
    #   terminated at s_1: target_0 = 1;              truncated at s_1: target_0 = 1 + 0.5 * V(s_1) = 2
    #   pair 1 (s_1 -> s_2) is masked;                 target_2 = 1 + 0.5 * 8 = 5 either way
    for end, target_0 in (("terminated", 1.0), ("truncated", 2.0)):
        network = TableActorCritic([[0.0, 0.0]] * 4, [1.0, 2.0, 4.0, 8.0])
        optimizer = RecordingSgd(network.parameters())
        learner = _ppo(network, optimizer, minibatch_size=4)  # one minibatch of every transition learnt from
        flags = {end: [True, False, False]}
        learner.learn(
            [_unroll(0, [0, 1, 2, 3], [0, 0, 0], [1.0, 0.0, 1.0], valid=[True, False, True], **flags)]
        )
        # 0.25 * (V - target) / 2, over the 2 valid transitions
        assert len(optimizer.steps) == 1
        expected = torch.tensor([(1.0 - target_0) / 8, 0.0, (4.0 - 5.0) / 8, 0.0])
        torch.testing.assert_close(optimizer.grad(network.values), expected, msg=end)


def test_ppo_entropy_bonus_pushes_towards_uniform():
    network = TableActorCritic([[LOG3, 0.0]] * 3, [0.0, 0.0, 0.0])
    optimizer = RecordingSgd(network.parameters())
    learner = _ppo(network, optimizer, entropy_coef=0.5)
    # rewards and values 0: A = [0, 0], normalised (0 - 0) / (0 + 1e-8) = 0: only the entropy term is left
    learner.learn([_unroll(0, [0, 1, 2], [0, 1], [0.0, 0.0])])
    expected = torch.zeros(3, 2)
    expected[0] = expected[1] = _entropy_bonus_grad([LOG3, 0.0], 0.5, 2)
    torch.testing.assert_close(optimizer.grad(network.logits), expected)


def test_ppo_updates_the_observation_normaliser_after_learning_from_the_batch():
    normalizer = ObservationNormalizer((1,))
    network = TableActorCritic([[0.0, 0.0]] * 3, [0.0, 0.0, 0.0], normalizer=normalizer)
    optimizer = RecordingSgd(network.parameters())
    learner = _ppo(network, optimizer, observation_normalizer=normalizer)
    learner.learn([_unroll(0, [0, 1, 2], [0, 1], [1.0, 0.0])])
    # every forward pass of the update saw the statistics the actors used (mean 0) ...
    assert network.seen_means and set(network.seen_means) == {0.0}
    # ... then the states the actions were taken in, s_0 and s_1 (not the bootstrap s_2), were added:
    # mean (0 + 1) / 2, against an initial count of 1e-4
    assert float(normalizer.mean[0]) == pytest.approx(0.5, rel=1e-3)


def test_ppo_learns_from_scaled_rewards():
    # rewards 2, 2 from one stream, gamma 0.5: discounted returns 2, 3 (variance 0.25), so each reward
    # is scaled to 2 / sqrt(0.25) = 4. V = 0, lambda 1: targets G_1 = 4, G_0 = 4 + 0.5 * 4 = 6
    network = TableActorCritic([[0.0, 0.0]] * 3, [0.0, 0.0, 0.0])
    optimizer = RecordingSgd(network.parameters())
    learner = _ppo(network, optimizer, reward_scaler=RewardScaler(1, 0.5))
    learner.learn([_unroll(0, [0, 1, 2], [0, 1], [2.0, 2.0])])
    # 0.25 * (0 - target) / 2
    expected = torch.tensor([-6.0 / 8, -4.0 / 8, 0.0])
    torch.testing.assert_close(optimizer.grad(network.values), expected, rtol=2e-3, atol=1e-4)


def test_ppo_continuous_uses_the_gaussian_log_probability_of_the_behaviour_actions():
    # 1-D Gaussian, mean 0 in both states, std 2 (log_std log 2); actions a = 1, -2; gamma 0:
    # A = [1, 0] -> normalised [1, -1] / sqrt(2); loss -mean(ratio A) at ratio 1.
    #   d log N(a; m, s) / dm = (a - m) / s^2 = 1/4, -2/4
    #   d/dm_0 = -(1/2)(1/sqrt 2)(1/4) = -1 / (8 sqrt 2);   d/dm_1 = -(1/2)(-1/sqrt 2)(-1/2) = -1 / (4 sqrt 2)
    #   d log N / d log s = (a - m)^2 / s^2 - 1 = -3/4, 0
    #   d/dlog_s = -(1/2) [(1/sqrt 2)(-3/4) + (-1/sqrt 2)(0)] = 3 / (8 sqrt 2)
    network = TableGaussianActorCritic([0.0, 0.0, 0.0], math.log(2.0), [0.0, 0.0, 0.0])
    optimizer = RecordingSgd(network.parameters())
    learner = _ppo(network, optimizer, discount=0.0)
    unroll = _unroll(0, [0, 1, 2], [0, 0], [1.0, 0.0])._replace(action=np.array([[1.0], [-2.0]], np.float32))
    learner.learn([unroll])
    r2 = math.sqrt(2)
    torch.testing.assert_close(
        optimizer.grad(network.means), torch.tensor([-1 / (8 * r2), -1 / (4 * r2), 0.0])
    )
    torch.testing.assert_close(optimizer.grad(network.log_std), torch.tensor([3 / (8 * r2)]))


class _FakeLink:
    actor_index = 0
    parameter_version = 1

    def __init__(self):
        self.sent = []

    def send(self, payload):
        self.sent.append(payload)

    def wait_for_new_parameters(self):
        pass


class _FarGaussian(nn.Module):
    """mean 5 (outside the action bounds [-1, 1]) with a tiny std."""

    def forward(self, x):
        mean = torch.full((x.shape[0], 1), 5.0)
        return GaussianActorOutput(mean, torch.full_like(mean, math.log(1e-3)))


def test_continuous_actor_sends_the_unclipped_sample_and_steps_the_env_with_the_clipped_one():
    link = _FakeLink()
    actor = unrolls.UnrollActor(
        policy=_FarGaussian(), link=link, action_space=gym.spaces.Box(-1, 1, (1,)),
        observation_space=gym.spaces.Box(-1, 1, (1,)), unroll_length=1, rng=np.random.default_rng(0),
        device=CPU, agent_name="PPO",
    )  # fmt: skip
    env_action = actor.step(TimeStep(_obs(0), 0.0, False, False, True, {}))
    actor.step(TimeStep(_obs(0), 0.0, False, False, False, {}))
    assert env_action.tolist() == [1.0]
    # the learner's log pi_old(a | s) must be of the action the Gaussian sampled: ~5, not 1
    assert link.sent[0].action[0, 0] == pytest.approx(5.0, abs=0.01)


# ----------------------------------------------------------------------------------------------------
# IMPALA


def _impala_unroll(states, actions, behaviour_logits, rewards, terminated=None, truncated=None, valid=None):
    n = len(actions)
    first = np.zeros(n + 1, bool)
    first[0] = True
    if valid is not None:
        first[1:][~np.asarray(valid)] = True  # the state after an episode's last one starts the next
    return unrolls.Unroll(
        actor_index=0,
        observation=np.array(states, np.float32)[:, None],
        first=first,
        action=np.asarray(actions, np.int64),
        behaviour_logits=np.asarray(behaviour_logits, np.float32),
        reward=np.asarray(rewards, np.float32),
        terminated=np.asarray(terminated if terminated is not None else [False] * n),
        truncated=np.asarray(truncated if truncated is not None else [False] * n),
        valid=np.asarray(valid if valid is not None else [True] * n),
        core_state=(),
    )


def _impala(network, optimizer, entropy_coef=0.0):
    return impala_agent.Impala(
        network=network,
        optimizer=optimizer,
        batch_size=1,
        discount=0.5,
        rho_bar=1.0,
        c_bar=1.0,
        pg_rho_bar=1.0,
        vtrace_lambda=1.0,
        value_coef=0.5,
        entropy_coef=entropy_coef,
        max_grad_norm=0.0,
        learning_rate=LinearSchedule(0.0, 0.0, 0, 0),
        device=CPU,
    )


def test_impala_vtrace_gets_target_over_behaviour_importance_weights():
    # pi uniform (learner), mu = (0.75, 0.25) (behaviour logits (log 3, 0)); a_0 = 1, a_1 = 0:
    #   rho_0 = 0.5 / 0.25 = 2 -> clipped to 1;  rho_1 = 0.5 / 0.75 = 2/3
    # V = [1, 2, 4], rewards 1, 1, gamma 0.5:
    #   delta_1 = 2/3 (1 + 0.5 * 4 - 2) = 2/3;        delta_0 = 1 (1 + 0.5 * 2 - 1) = 1
    #   v_1 = 2 + 2/3 = 8/3;                           v_0 = 1 + 1 + 0.5 * 1 * (2/3) = 7/3
    #   A_1 = 2/3 (1 + 0.5 * V(s_2) - 2) = 2/3;        A_0 = 1 (1 + 0.5 * v_1 - 1) = 4/3
    network = TableImpalaNetwork([[0.0, 0.0]] * 3, [1.0, 2.0, 4.0])
    optimizer = RecordingSgd(network.parameters())
    learner = _impala(network, optimizer)
    learner.learn([_impala_unroll([0, 1, 2], [1, 0], [[LOG3, 0.0]] * 2, [1.0, 1.0])])
    torch.testing.assert_close(optimizer.grad(network.logits), _pg_rows([1, 0], [4 / 3, 2 / 3], 3, 2))
    # value_coef 0.5: 0.5 * (V - v) / 2 = [(1 - 7/3), (2 - 8/3)] / 4 = [-1/3, -1/6]
    torch.testing.assert_close(optimizer.grad(network.values), torch.tensor([-1 / 3, -1 / 6, 0.0]))


@pytest.mark.parametrize(
    "end, target_0",
    [
        ("terminated", 1.0),  # v_0 = A_0 + V(s_0) = r = 1: nothing bootstrapped past s_1
        ("truncated", 2.0),  # v_0 = r + 0.5 V(s_1) = 1 + 0.5 * 2 = 2: the cut-off state bootstraps
    ],
)
def test_impala_termination_stops_the_trace_and_truncation_bootstraps(end, target_0):
    # On-policy (rho = 1). s_0 --r=1--> s_1 (ends) | s_2 --r=1--> s_3;  V = [0, 2, 4, 2], gamma 0.5.
    #   pair 2: v_2 = 1 + 0.5 * 2 = 2, A_2 = 2 - 4 = -2;   pair 0: v_0 = A_0 = target_0 (V(s_0) = 0)
    #   pair 1 (s_1 -> s_2) is masked. (Were s_1 not an episode end, v_0 would be 1 + 0.5 * v_1 ...)
    network = TableImpalaNetwork([[0.0, 0.0]] * 4, [0.0, 2.0, 4.0, 2.0])
    optimizer = RecordingSgd(network.parameters())
    learner = _impala(network, optimizer)
    flags = {end: [True, False, False]}
    unroll = _impala_unroll([0, 1, 2, 3], [1, 0, 0], [[0.0, 0.0]] * 3, [1.0, 0.0, 1.0], valid=[True, False, True],
                            **flags)  # fmt: skip
    learner.learn([unroll])
    # 2 valid pairs: policy -A/4 on the action taken; values 0.5 * (V - v) / 2
    expected_policy = torch.zeros(4, 2)
    expected_policy[0] = torch.tensor([target_0 / 4, -target_0 / 4])  # a_0 = 1
    expected_policy[2] = torch.tensor([2 / 4, -2 / 4])  # a_2 = 0, A_2 = -2
    torch.testing.assert_close(optimizer.grad(network.logits), expected_policy)
    expected_values = torch.tensor([(0 - target_0) / 4, 0.0, (4.0 - 2.0) / 4, 0.0])
    torch.testing.assert_close(optimizer.grad(network.values), expected_values)


def test_impala_entropy_bonus_pushes_towards_uniform():
    network = TableImpalaNetwork([[LOG3, 0.0]] * 3, [0.0, 0.0, 0.0])
    optimizer = RecordingSgd(network.parameters())
    learner = _impala(network, optimizer, entropy_coef=0.5)
    # rewards and values 0: v = 0 and A = 0 whatever rho is
    learner.learn([_impala_unroll([0, 1, 2], [0, 1], [[0.0, 0.0]] * 2, [0.0, 0.0])])
    expected = torch.zeros(3, 2)
    expected[0] = expected[1] = _entropy_bonus_grad([LOG3, 0.0], 0.5, 2)
    torch.testing.assert_close(optimizer.grad(network.logits), expected)


# ----------------------------------------------------------------------------------------------------
# PPO-RND and PPO-ICM: what they feed PPO's optimisation (`PpoOptimisation`, checked above through PPO)


def TableTwoValue(num_states) -> Table:  # noqa: N802
    """Zero logits[s], extrinsic values[s] and intrinsic values[s] for observation [s] (RND's two heads)."""
    zeros = [0.0] * num_states
    return Table(TwoValueOutput, logits=[[0.0, 0.0]] * num_states, extrinsic=zeros, intrinsic=zeros)


class SquareRnd(nn.Module):
    """RND's interface with a target of 0 and a predictor w * x: the error of observation [s] is
    (w s)^2, i.e. s^2 at w = 1. `calls` records the order of forward passes and statistics updates."""

    def __init__(self):
        super().__init__()
        self.w = _parameter(1.0)
        self.calls: list[tuple[str, list[float]]] = []

    def forward(self, x):
        self.calls.append(("forward", x[:, 0].tolist()))
        return self.w * x[:, :1], torch.zeros_like(x[:, :1])

    def update_statistics(self, x):
        self.calls.append(("update", x[:, 0].tolist()))

    def trainable_parameters(self):
        return [self.w]


def _rnd_parts(num_states=4):
    """A two-value table network over `num_states` states, `SquareRnd` and an optimizer of both."""
    network, rnd = TableTwoValue(num_states), SquareRnd()
    return network, rnd, RecordingSgd(list(network.parameters()) + [rnd.w])


def _ppo_rnd(network, rnd, optimizer, predictor_proportion=1.0, extrinsic_discount=0.0, reward_scaler=None):
    return PpoRnd(
        network=network, rnd=rnd, optimizer=optimizer, num_actors=1,
        extrinsic_discount=extrinsic_discount, intrinsic_discount=0.0, gae_lambda=1.0,
        extrinsic_coef=2.0, intrinsic_coef=1.0, clip_epsilon=0.2, num_epochs=1, minibatch_size=4,
        value_coef=0.5, entropy_coef=0.0, max_grad_norm=0.0,
        learning_rate=LinearSchedule(0.0, 0.0, 0, 0), predictor_proportion=predictor_proportion,
        observation_warmup_steps=0, rng=np.random.default_rng(0), device=CPU,
        extrinsic_reward_scaler=reward_scaler,
    )  # fmt: skip


# s_0 -> s_1 -> s_2 -> s_3, actions 0, 1, 0, extrinsic rewards 1, 0, 0; RND's error of s_{t+1}: 1, 4, 9.
RND_UNROLL = dict(states=[0, 1, 2, 3], actions=[0, 1, 0], rewards=[1.0, 0.0, 0.0])


def test_ppo_rnd_intrinsic_reward_is_the_error_of_the_next_observation():
    learner = _ppo_rnd(*_rnd_parts())
    batch = unrolls.stack_unrolls([_unroll(0, **RND_UNROLL)], [np.array([1.0, 0.0, 0.0], np.float32)], CPU)
    r_int = learner.advantages(batch, [0]).intrinsic_reward[:, 0]
    # errors 1^2, 2^2, 3^2 of s_1, s_2, s_3, all divided by the same running std of the intrinsic return
    torch.testing.assert_close(r_int / r_int[0], torch.tensor([1.0, 4.0, 9.0]))


def test_ppo_rnd_value_heads_regress_on_their_own_returns_and_the_predictor_on_next_observations():
    network, rnd, optimizer = _rnd_parts()
    learner = _ppo_rnd(network, rnd, optimizer)
    learner.learn([_unroll(0, **RND_UNROLL)])
    assert len(optimizer.steps) == 1  # one epoch, one minibatch of the 3 transitions
    # gamma_E = gamma_I = 0, V = 0: targets are the rewards. value_coef 0.5 * (V - target) / 3:
    torch.testing.assert_close(optimizer.grad(network.extrinsic), torch.tensor([-0.5 / 3, 0.0, 0.0, 0.0]))
    k = learner.statistics["intrinsic_reward_mean"] * 3 / 14  # r_int = k * (1, 4, 9): mean 14k / 3
    expected = -0.5 / 3 * k * torch.tensor([1.0, 4.0, 9.0, 0.0])
    torch.testing.assert_close(optimizer.grad(network.intrinsic), expected)
    # The predictor's loss mean_t (w s_{t+1})^2 over all of them (proportion 1):
    # d/dw = 2 w (1 + 4 + 9) / 3 = 28 / 3 at w = 1.
    torch.testing.assert_close(optimizer.grad(rnd.w), torch.tensor(28.0 / 3))
    # RND's observation statistics got the next observations after every forward pass of the update.
    assert rnd.calls[-1] == ("update", [1.0, 2.0, 3.0]) and all(c[0] == "forward" for c in rnd.calls[:-1])


def test_ppo_rnd_predictor_learns_only_from_its_proportion_of_the_minibatch():
    network, rnd, optimizer = _rnd_parts()
    # a proportion so small that no transition of the 3 is drawn: the predictor gets no gradient at all
    _ppo_rnd(network, rnd, optimizer, predictor_proportion=1e-9).learn([_unroll(0, **RND_UNROLL)])
    assert optimizer.grad(rnd.w).item() == 0.0
    # Half of them: the loss's forward pass sees only the drawn next observations (the advantages' pass
    # before it sees all three), and the gradient is their mean: d/dw mean (w s)^2 = 2 sum s^2 / n at w = 1.
    network, rnd, optimizer = _rnd_parts()
    _ppo_rnd(network, rnd, optimizer, predictor_proportion=0.5).learn([_unroll(0, **RND_UNROLL)])
    forwards = [states for call, states in rnd.calls if call == "forward"]
    assert forwards[0] == [1.0, 2.0, 3.0] and len(forwards) == 2
    drawn = forwards[1]
    assert 0 < len(drawn) < 3 and set(drawn) < {1.0, 2.0, 3.0}  # seed 0 draws a strict subset
    expected = 2 * sum(state**2 for state in drawn) / len(drawn)
    torch.testing.assert_close(optimizer.grad(rnd.w), torch.tensor(expected))


def test_ppo_rnd_learns_from_scaled_extrinsic_rewards():
    # As PPO's test: rewards 2, 2 from one stream, gamma_E 0.5: each scaled to 2 / sqrt(0.25) = 4;
    # V_E = 0, lambda 1: targets G_1 = 4, G_0 = 4 + 0.5 * 4 = 6; value_coef 0.5 * (0 - G) / 2
    network, rnd, optimizer = _rnd_parts(3)
    learner = _ppo_rnd(network, rnd, optimizer, extrinsic_discount=0.5, reward_scaler=RewardScaler(1, 0.5))
    learner.learn([_unroll(0, [0, 1, 2], [0, 1], [2.0, 2.0])])
    expected = torch.tensor([-6.0 / 4, -4.0 / 4, 0.0])
    torch.testing.assert_close(optimizer.grad(network.extrinsic), expected, rtol=2e-3, atol=1e-4)


class ShiftIcm(nn.Module):
    """ICM's interface over phi(s) = s: the forward model predicts phi(s_t) + shift[a_t], the inverse
    model's logits are one learned pair for every transition."""

    def __init__(self):
        super().__init__()
        self.shift = _parameter([0.0, 0.0])
        self.inverse = _parameter([0.0, 0.0])

    def forward(self, s_t, a_t, s_tp1):
        return IcmOutput(
            phi_tp1=s_tp1,
            predicted_phi_tp1=s_t + self.shift[a_t].unsqueeze(-1),
            inverse_logits=self.inverse.expand(a_t.shape[0], 2),
        )


def _icm_parts():
    """A table actor-critic over 7 states, `ShiftIcm` and an optimizer of both."""
    network, icm = TableActorCritic([[0.0, 0.0]] * 7, [0.0] * 7), ShiftIcm()
    return network, icm, RecordingSgd(list(network.parameters()) + list(icm.parameters()))


def _ppo_icm(network, icm, optimizer, eta=2.0, observation_normalizer=None, normalize_intrinsic_reward=False):
    return PpoIcm(
        network=network, icm=icm, optimizer=optimizer, num_actors=1, discount=0.99, gae_lambda=1.0,
        eta=eta, beta=0.2, clip_epsilon=0.2, num_epochs=1, minibatch_size=4, value_coef=0.5,
        entropy_coef=0.0, max_grad_norm=0.0, learning_rate=LinearSchedule(0.0, 0.0, 0, 0),
        rng=np.random.default_rng(0), device=CPU, observation_normalizer=observation_normalizer,
        normalize_intrinsic_reward=normalize_intrinsic_reward,
    )  # fmt: skip


# s_0 = [0] -> [1] -> [3] -> [6], actions 0, 1, 0: phi(s_{t+1}) - phi(s_t) = 1, 2, 3
ICM_UNROLL = dict(states=[0, 1, 3, 6], actions=[0, 1, 0], rewards=[0.0, 0.0, 0.0])


def test_ppo_icm_intrinsic_reward_is_the_forward_error_of_each_transition_and_none_across_a_reset():
    learner = _ppo_icm(*_icm_parts())
    batch = _batch_of(_unroll(0, **ICM_UNROLL, valid=[True, False, True]))  # pair 1 links two episodes
    # eta / 2 * (phi(s_t) + 0 - phi(s_{t+1}))^2 = (2 / 2) * (1, 2, 3)^2, and 0 on the reset pair
    torch.testing.assert_close(learner.intrinsic_rewards(batch)[:, 0], torch.tensor([1.0, 0.0, 9.0]))


@pytest.mark.parametrize("agent", ["ppo_rnd", "ppo_icm"])
def test_curious_ppo_takes_pi_old_of_each_pair_from_its_own_state(agent):
    # One epoch of one minibatch at learning rate 0: the step's log pi(a | s) equals pi_old's exactly
    # (ratio 1, approx KL and clip fraction 0) if pi_old of pair t was read off s_t's row of the values'
    # forward pass, the reset pair skipped. Each state has its own logits (0, s / 2), so pi_old read off
    # any other row gives a ratio != 1.
    if agent == "ppo_rnd":
        network, rnd, optimizer = _rnd_parts(num_states=7)
        learner = _ppo_rnd(network, rnd, optimizer)
    else:
        network, icm, optimizer = _icm_parts()
        learner = _ppo_icm(network, icm, optimizer)
    with torch.no_grad():
        network.logits.copy_(torch.tensor([[0.0, s / 2] for s in range(7)]))
    learner.learn([_unroll(0, **ICM_UNROLL, valid=[True, False, True])])  # pair 1 links two episodes
    assert len(optimizer.steps) == 1
    assert learner.statistics["approx_kl"] == 0.0
    assert learner.statistics["clip_fraction"] == 0.0


def test_ppo_icm_reads_observations_through_the_policy_normaliser():
    normalizer = ObservationNormalizer((1,))
    normalizer.var.fill_(4.0)  # mean 0, std 2: phi = s / 2, differences 0.5, 1, 1.5
    learner = _ppo_icm(*_icm_parts(), observation_normalizer=normalizer)
    rewards = learner.intrinsic_rewards(_batch_of(_unroll(0, **ICM_UNROLL)))[:, 0]
    torch.testing.assert_close(rewards, torch.tensor([0.25, 1.0, 2.25]))  # (2 / 2) * (0.5, 1, 1.5)^2


def test_ppo_icm_scales_the_intrinsic_reward_by_the_std_of_its_return_when_asked():
    network, icm, optimizer = _icm_parts()
    learner = _ppo_icm(network, icm, optimizer, normalize_intrinsic_reward=True)
    r_int = learner.advantages(_batch_of(_unroll(0, **ICM_UNROLL)), [0]).intrinsic_reward[:, 0]
    # raw 1, 4, 9; returns with gamma 0.99: 1, 4 + 0.99 = 4.99, 9 + 0.99 * 4.99 = 13.9401, whose
    # population std is the scale (the running moments start from a count of 1e-4 only)
    std = float(np.std([1.0, 4.99, 13.9401]))
    torch.testing.assert_close(r_int, torch.tensor([1.0, 4.0, 9.0]) / std, rtol=1e-3, atol=1e-6)


def test_ppo_icm_trains_its_forward_and_inverse_models_with_beta():
    network, icm, optimizer = _icm_parts()
    _ppo_icm(network, icm, optimizer).learn([_unroll(0, **ICM_UNROLL)])
    assert len(optimizer.steps) == 1  # one minibatch of the 3 transitions
    # beta * mean_t 0.5 (s_t + shift[a_t] - s_{t+1})^2: d/dshift[a] = 0.2 / 3 * sum over a_t = a of
    # (s_t - s_{t+1}): action 0 at t = 0, 2: (-1) + (-3) = -4;  action 1 at t = 1: -2
    torch.testing.assert_close(optimizer.grad(icm.shift), torch.tensor([0.2 / 3 * -4, 0.2 / 3 * -2]))
    # (1 - beta) * mean_t CE(logits, a_t), logits 0: d/dlogits = 0.8 / 3 * sum_t (0.5 - onehot(a_t))
    #   = 0.8 / 3 * ((-0.5 + 0.5 - 0.5), (0.5 - 0.5 + 0.5)) for actions 0, 1, 0
    torch.testing.assert_close(optimizer.grad(icm.inverse), torch.tensor([-0.4 / 3, 0.4 / 3]))


def _batch_of(unroll):
    return unrolls.stack_unrolls([unroll], [unroll.reward], CPU)
