"""How each replay-based Q agent feeds its loss: checked with networks whose outputs are set by hand.

The loss functions themselves are tested in test_value_learning*.py. Here every network is a lookup
table (`TableQNetwork` and its distributional cousins): the observation is `[state id]` and the
output is the table's row for it, so the expected targets, losses and SGD updates can be worked out
on paper; the arithmetic is in the comments. Each agent is driven through its public `step()`, so the
TransitionAccumulator (termination vs truncation, n-step sums) is on the path into the loss.

The networks are built with the *target* values, handed to the agent (which copies them into its
target network), and then overwritten in place with the *online* values: the two networks then
disagree, and a swapped role shows up as a different number.

DRQN stores sequences instead of transitions; its stand-in network keeps a running sum as its
recurrent state, so that burn-in and resets are visible in the Q-values.
"""

import numpy as np
import pytest
import torch
from torch import nn

from deep_rl_zoo import replay as replay_lib
from deep_rl_zoo.c51_dqn.agent import C51Dqn
from deep_rl_zoo.double_dqn.agent import DoubleDqn
from deep_rl_zoo.dqn.agent import Dqn
from deep_rl_zoo.drqn.agent import Drqn
from deep_rl_zoo.iqn import agent as iqn_agent
from deep_rl_zoo.networks.value import (
    CategoricalQNetworkOutput,
    QNetworkOutput,
    QuantileNetworkOutput,
    RecurrentQNetworkOutput,
)
from deep_rl_zoo.prioritized_dqn.agent import PrioritizedDqn
from deep_rl_zoo.qr_dqn.agent import QrDqn
from deep_rl_zoo.rainbow.agent import Rainbow
from deep_rl_zoo.schedules import LinearSchedule
from deep_rl_zoo.sequence_replay import SequenceReplay
from deep_rl_zoo.types_ import TimeStep

LOG2 = float(np.log(2.0))
CPU = torch.device("cpu")
NEVER = 10**9  # a target-network period that never comes


# ----------------------------------------------------------------------------------------------------
# Networks whose outputs are set by hand.


def _ids(x: torch.Tensor) -> torch.Tensor:
    return x[:, 0].long()


class TableQNetwork(nn.Module):
    """Q(s, .) = table[s] for observations [B, 1] holding the state id s."""

    def __init__(self, table):
        super().__init__()
        self.table = nn.Parameter(torch.as_tensor(table, dtype=torch.float32).clone())

    def forward(self, x: torch.Tensor) -> QNetworkOutput:
        return QNetworkOutput(q_values=self.table[_ids(x)])


class TableCategoricalNetwork(nn.Module):
    """Logits over `atoms` = table[s] ([A, K] per state); Q = the mean of each action's distribution."""

    def __init__(self, table, atoms):
        super().__init__()
        self.table = nn.Parameter(torch.as_tensor(table, dtype=torch.float32).clone())
        self.register_buffer("atoms", torch.as_tensor(atoms, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> CategoricalQNetworkOutput:
        logits = self.table[_ids(x)]  # [B, A, K]
        return CategoricalQNetworkOutput(q_values=(logits.softmax(2) * self.atoms).sum(2), q_logits=logits)


class TableQuantileNetwork(nn.Module):
    """Quantiles table[s] ([N, A] per state), as QR-DQN's network returns them."""

    def __init__(self, table):
        super().__init__()
        self.table = nn.Parameter(torch.as_tensor(table, dtype=torch.float32).clone())

    def forward(self, x: torch.Tensor) -> QuantileNetworkOutput:
        q_dist = self.table[_ids(x)]  # [B, N, A]
        return QuantileNetworkOutput(q_values=q_dist.mean(1), q_dist=q_dist)


class LinearTauNetwork(nn.Module):
    """An IQN stand-in: the tau-quantile of action a in state s is base[s, a] + slope[s, a] * tau."""

    def __init__(self, base, slope):
        super().__init__()
        self.base = nn.Parameter(torch.as_tensor(base, dtype=torch.float32).clone())
        self.slope = nn.Parameter(torch.as_tensor(slope, dtype=torch.float32).clone())

    def forward(self, x: torch.Tensor, taus: torch.Tensor) -> QuantileNetworkOutput:
        s = _ids(x)
        q_dist = self.base[s][:, None, :] + self.slope[s][:, None, :] * taus[:, :, None]  # [B, N, A]
        return QuantileNetworkOutput(q_values=q_dist.mean(1), q_dist=q_dist)


def set_online(network: nn.Module, **values) -> None:
    """Overwrites the (online) network's parameters in place; the agent's target copy keeps the old ones."""
    with torch.no_grad():
        for name, value in values.items():
            getattr(network, name).copy_(torch.as_tensor(value, dtype=torch.float32))


def probs_to_logits(probs) -> torch.Tensor:
    """log p, with log 0 = -inf (softmax gives the probabilities back exactly)."""
    return torch.as_tensor(probs, dtype=torch.float32).log()


class ScriptedPrioritizedReplay(replay_lib.PrioritizedReplay):
    """A prioritized replay whose draws the test chooses: `sample` returns the items in slots `indices`
    with importance weights `weights`, and records the beta it was asked for and every priority update."""

    def __init__(self, capacity: int, indices, weights):
        super().__init__(capacity, priority_exponent=1.0, rng=np.random.default_rng(0))
        self.draw_indices = np.asarray(indices, dtype=np.int64)
        self.draw_weights = np.asarray(weights, dtype=np.float32)
        self.betas: list[float] = []
        self.updates: list[tuple[np.ndarray, np.ndarray]] = []

    def sample(
        self, batch_size: int, importance_sampling_exponent: float = 1.0
    ) -> replay_lib.PrioritizedSample:
        assert batch_size == len(self.draw_indices)
        self.betas.append(importance_sampling_exponent)
        items = self._item_type(*(array[self.draw_indices] for array in self._storage))
        return replay_lib.PrioritizedSample(items, self.draw_indices.copy(), self.draw_weights.copy())

    def update_priorities(self, indices, priorities) -> None:
        self.updates.append((np.array(indices), np.array(priorities)))
        super().update_priorities(indices, priorities)


# ----------------------------------------------------------------------------------------------------
# Building agents around those networks.


def _common(network, lr, replay, n_step, discount, **overrides) -> dict:
    kwargs = dict(
        network=network,
        optimizer=torch.optim.SGD(network.parameters(), lr=lr),
        replay=replay,
        transition_accumulator=replay_lib.TransitionAccumulator(n=n_step, discount=discount),
        min_replay_size=1,
        learn_interval=1,
        batch_size=1,
        target_network_update_period=NEVER,
        max_grad_norm=0.0,
        device=CPU,
    )
    kwargs.update(overrides)
    return kwargs


def _epsilon_kwargs(epsilon) -> dict:
    schedule = epsilon if isinstance(epsilon, LinearSchedule) else LinearSchedule(epsilon, epsilon, 0, 0)
    return dict(exploration_epsilon=schedule, num_actions=2, rng=np.random.default_rng(0))


def make_dqn(network, *, lr=0.5, replay=None, n_step=1, discount=0.5, epsilon=0.0, **overrides):
    replay = replay or replay_lib.UniformReplay(1, rng=np.random.default_rng(1))
    return Dqn(
        **_common(network, lr, replay, n_step, discount, **overrides),
        **_epsilon_kwargs(epsilon),
        huber_delta=None,
    )


def make_double_dqn(network, *, lr=0.5, replay=None, n_step=1, discount=0.5, epsilon=0.0, **overrides):
    replay = replay or replay_lib.UniformReplay(1, rng=np.random.default_rng(1))
    return DoubleDqn(
        **_common(network, lr, replay, n_step, discount, **overrides),
        **_epsilon_kwargs(epsilon),
        huber_delta=None,
    )


def make_prioritized_dqn(
    network,
    *,
    lr=0.5,
    replay=None,
    n_step=1,
    discount=0.5,
    epsilon=0.0,
    beta=None,
    priority_epsilon=0.25,
    **overrides,
):
    replay = replay or replay_lib.PrioritizedReplay(100, priority_exponent=0.5, rng=np.random.default_rng(1))
    return PrioritizedDqn(
        **_common(network, lr, replay, n_step, discount, **overrides),
        **_epsilon_kwargs(epsilon),
        importance_sampling_exponent=beta or LinearSchedule(0.4, 1.0, 0, 10),
        priority_epsilon=priority_epsilon,
        huber_delta=None,
    )


def make_c51(network, *, lr=0.5, replay=None, n_step=1, discount=0.5, epsilon=0.0, **overrides):
    replay = replay or replay_lib.UniformReplay(1, rng=np.random.default_rng(1))
    return C51Dqn(**_common(network, lr, replay, n_step, discount, **overrides), **_epsilon_kwargs(epsilon))


def make_rainbow(
    network, *, lr=0.5, replay=None, n_step=1, discount=0.5, beta=None, priority_epsilon=0.25, **overrides
):
    replay = replay or replay_lib.PrioritizedReplay(100, priority_exponent=0.5, rng=np.random.default_rng(1))
    return Rainbow(
        **_common(network, lr, replay, n_step, discount, **overrides),
        importance_sampling_exponent=beta or LinearSchedule(0.4, 1.0, 0, 10),
        priority_epsilon=priority_epsilon,
    )


def make_qr_dqn(network, *, lr=0.5, replay=None, n_step=1, discount=0.5, epsilon=0.0, **overrides):
    replay = replay or replay_lib.UniformReplay(1, rng=np.random.default_rng(1))
    return QrDqn(
        **_common(network, lr, replay, n_step, discount, **overrides),
        **_epsilon_kwargs(epsilon),
        num_quantiles=network.table.shape[1],
        huber_delta=None,
    )


def make_iqn(
    network, *, lr=0.5, replay=None, n_step=1, discount=0.5, epsilon=0.0, taus=(2, 3, 1), **overrides
):
    replay = replay or replay_lib.UniformReplay(1, rng=np.random.default_rng(1))
    num_online, num_acting, num_target = taus
    return iqn_agent.Iqn(
        **_common(network, lr, replay, n_step, discount, **overrides),
        **_epsilon_kwargs(epsilon),
        num_online_taus=num_online,
        num_target_taus=num_target,
        num_acting_taus=num_acting,
        tau_generator=torch.Generator().manual_seed(0),
        huber_delta=None,
    )


def state(s: int) -> np.ndarray:
    return np.array([s], dtype=np.float32)


def first(s: int) -> TimeStep:
    return TimeStep(state(s), 0.0, False, False, True, {})


def mid(s: int, reward: float) -> TimeStep:
    return TimeStep(state(s), float(reward), False, False, False, {})


def terminated(s: int, reward: float) -> TimeStep:
    return TimeStep(state(s), float(reward), True, False, False, {})


def truncated(s: int, reward: float) -> TimeStep:
    return TimeStep(state(s), float(reward), False, True, False, {})


def feed(agent, timesteps) -> list[int]:
    """Steps `agent` through `timesteps` (calling `reset` before each first one); returns its actions."""
    actions = []
    for timestep in timesteps:
        if timestep.first:
            agent.reset()
        actions.append(agent.step(timestep))
    return actions


# ----------------------------------------------------------------------------------------------------
# DQN and Double DQN: who selects and who evaluates the bootstrap action.
#
# Two states, two actions; gamma = 0.5, reward 1, squared loss 0.5 * td^2, SGD with lr 0.5.
#                 s0         s1
#   online      [-1, 0]    [5, 2]      greedy in s0: action 1 (Q = 0)
#   target      [ 4, 4]    [1, 3]
# Bootstrap value at s1 of each way to wire the two networks:
#   DQN, target max                  max(1, 3) = 3
#   Double: online picks 0, target values it   1
#   online max                       max(5, 2) = 5
#   target picks 1, online values it           2
TARGET_TABLE = [[4.0, 4.0], [1.0, 3.0]]
ONLINE_TABLE = [[-1.0, 0.0], [5.0, 2.0]]


def _one_transition(make, last_step, episodes=1, **kwargs):
    network = TableQNetwork(TARGET_TABLE)
    agent = make(network, **kwargs)
    set_online(network, table=ONLINE_TABLE)
    actions = feed(agent, [first(0), last_step] * episodes)
    assert actions[0] == 1  # greedy in s0
    assert agent.statistics["learner_steps"] == 1
    return agent, network


def test_dqn_bootstraps_from_the_target_networks_max():
    agent, network = _one_transition(make_dqn, mid(1, 1.0))
    # target = 1 + 0.5 * max(1, 3) = 2.5; td = 2.5 - Q(s0, 1) = 2.5 - 0 = 2.5; loss = 0.5 * 2.5^2 = 3.125
    assert agent.statistics["loss"] == pytest.approx(3.125)
    # d loss / d Q(s0, 1) = -td = -2.5, so SGD moves it by 0.5 * 2.5 = 1.25; nothing else moves.
    torch.testing.assert_close(network.table, torch.tensor([[-1.0, 1.25], [5.0, 2.0]]))
    torch.testing.assert_close(agent.state_dict()["target_network"]["table"], torch.tensor(TARGET_TABLE))


def test_double_dqn_lets_the_online_network_select_and_the_target_network_evaluate():
    agent, network = _one_transition(make_double_dqn, mid(1, 1.0))
    # online picks argmax(5, 2) = 0, target values it at 1: target = 1 + 0.5 * 1 = 1.5; td = 1.5
    # loss = 0.5 * 1.5^2 = 1.125  (DQN's max would give 3.125, the swapped roles 0.5 * 2^2 = 2)
    assert agent.statistics["loss"] == pytest.approx(1.125)
    torch.testing.assert_close(network.table, torch.tensor([[-1.0, 0.75], [5.0, 2.0]]))  # 0 + 0.5 * 1.5


@pytest.mark.parametrize(
    "make, truncated_loss",
    [
        (make_dqn, 3.125),  # 0.5 * (1 + 0.5 * 3 - 0)^2
        (make_double_dqn, 1.125),  # 0.5 * (1 + 0.5 * 1 - 0)^2
    ],
)
def test_a_termination_stops_the_bootstrap_and_a_time_limit_does_not(make, truncated_loss):
    agent, _ = _one_transition(make, terminated(1, 1.0))
    assert agent.statistics["loss"] == pytest.approx(0.5)  # target = 1 + 0 = 1; 0.5 * 1^2
    agent, _ = _one_transition(make, truncated(1, 1.0))
    assert agent.statistics["loss"] == pytest.approx(truncated_loss)


def test_n_step_transitions_reach_the_loss_with_gamma_to_the_n():
    # n = 2: s0 -(r=1)-> s1 -(r=2)-> s2, then the loss of (s0, 1, 1 + 0.5 * 2 = 2, 0.5^2 = 0.25, s2).
    network = TableQNetwork([[4.0, 4.0], [0.0, 0.0], [1.0, 3.0]])
    agent = make_dqn(network, n_step=2)
    set_online(network, table=[[-1.0, 0.0], [7.0, 7.0], [5.0, 2.0]])
    feed(agent, [first(0), mid(1, 1.0)])
    assert agent.statistics["learner_steps"] == 0  # no 2-step transition yet
    feed(agent, [mid(2, 2.0)])
    # target = 2 + 0.25 * max(1, 3) = 2.75; td = 2.75 - Q(s0, 1) = 2.75; loss = 0.5 * 2.75^2 = 3.78125
    assert agent.statistics["loss"] == pytest.approx(3.78125)


# ----------------------------------------------------------------------------------------------------
# Prioritized DQN: importance weights, new priorities, beta.
#
# s0 -(r=1)-> s1 -(r=-2)-> s2, gamma = 0.5; both transitions are drawn, with weights 1 and 0.5.
#              s0         s1          s2
#   online   [0, 1]     [2, 0]      [0, 4]      greedy: 1 in s0 (Q = 1), 0 in s1 (Q = 2)
#   target   [9, 9]     [3, 5]      [2, 6]
#   A = (s0, 1, 1, 0.5, s1): online picks 0 in s1, target values it 3:  1 + 0.5 * 3 = 2.5, td = 2.5 - 1 = 1.5
#   B = (s1, 0, -2, 0.5, s2): online picks 1 in s2, target values it 6: -2 + 0.5 * 6 = 1, td = 1 - 2 = -1


def _prioritized_agent(**overrides):
    network = TableQNetwork([[9.0, 9.0], [3.0, 5.0], [2.0, 6.0]])
    memory = ScriptedPrioritizedReplay(2, indices=[0, 1], weights=[1.0, 0.5])
    agent = make_prioritized_dqn(network, replay=memory, batch_size=2, **overrides)
    set_online(network, table=[[0.0, 1.0], [2.0, 0.0], [0.0, 4.0]])
    actions = feed(agent, [first(0), mid(1, 1.0), mid(2, -2.0)])
    assert actions[:2] == [1, 0] and agent.statistics["learner_steps"] == 1
    return agent, network, memory


def test_prioritized_dqn_weights_each_loss_by_its_importance_weight():
    agent, network, _ = _prioritized_agent()
    # losses 0.5 * 1.5^2 = 1.125 and 0.5 * (-1)^2 = 0.5; weighted mean (1 * 1.125 + 0.5 * 0.5) / 2 = 0.6875
    assert agent.statistics["loss"] == pytest.approx(0.6875)
    # SGD (lr 0.5) on the weighted mean: Q(s0, 1) += 0.5 * 1 * 1.5 / 2 = 0.375, Q(s1, 0) += 0.5 * 0.5 * -1 / 2
    torch.testing.assert_close(network.table, torch.tensor([[0.0, 1.375], [1.875, 0.0], [0.0, 4.0]]))


def test_prioritized_dqn_sets_priorities_to_abs_td_plus_epsilon():
    _, _, memory = _prioritized_agent(priority_epsilon=0.25)
    ((indices, priorities),) = memory.updates
    # |1.5| + 0.25 = 1.75 and |-1| + 0.25 = 1.25, for the slots that were drawn
    assert indices.tolist() == [0, 1]
    np.testing.assert_allclose(priorities, [1.75, 1.25], rtol=1e-6)
    # The replay raises them to alpha (1 here) itself; the next new transition gets the largest, 1.75.
    np.testing.assert_allclose(memory.priorities(), [1.75, 1.25], rtol=1e-6)
    assert memory.max_priority == pytest.approx(1.75)


def test_prioritized_dqn_anneals_beta_on_env_steps():
    # beta goes 0.4 -> 1 over env steps 0..10: the one draw, at env step 2, asks for 0.4 + 0.6 * 2 / 10 = 0.52.
    agent, _, memory = _prioritized_agent(beta=LinearSchedule(0.4, 1.0, 0, 10))
    assert memory.betas == [pytest.approx(0.52)]
    assert agent.statistics["importance_sampling_exponent"] == pytest.approx(0.52)


def test_prioritized_dqn_is_double_dqn_inside():
    # The same two transitions drawn with weights 1: with DQN's target max, A's target would be
    # 1 + 0.5 * 5 = 3.5 (td 2.5), not 2.5; the priorities tell which target was used.
    network = TableQNetwork([[9.0, 9.0], [3.0, 5.0], [2.0, 6.0]])
    memory = ScriptedPrioritizedReplay(2, indices=[0, 0], weights=[1.0, 1.0])
    agent = make_prioritized_dqn(network, replay=memory, batch_size=2, priority_epsilon=0.0)
    set_online(network, table=[[0.0, 1.0], [2.0, 0.0], [0.0, 4.0]])
    feed(agent, [first(0), mid(1, 1.0), mid(2, -2.0)])
    np.testing.assert_allclose(memory.updates[0][1], [1.5, 1.5])  # |td of A| twice
    assert agent.statistics["loss"] == pytest.approx(1.125)  # 0.5 * 1.5^2


# ----------------------------------------------------------------------------------------------------
# C51 and Rainbow: which distribution is projected.
#
# Atoms 0, 1, 2; reward 1, gamma 0.5, so the target atoms are 1 + 0.5 * (0, 1, 2) = (1, 1.5, 2).
# A distribution all on one atom projects to:  all on 0 -> (0, 1, 0); all on 1 -> (0, .5, .5);
# all on 2 -> (0, 0, 1).
#                 s1, action 0        s1, action 1         mean (0, 1)
#   target      (0, 1, 0)           (0, 0, 1)              (1, 2)   target picks 1
#   online      (0, .5, .5)         (1, 0, 0)              (1.5, 0) online picks 0
# Projected target of each wiring:
#   C51 (target picks 1, target's 1)           (0, 0, 1)
#   Rainbow (online picks 0, target's 0)       (0, .5, .5)
#   target picks 1, online's 1                 (0, 1, 0)
#   online picks 0, online's 0                 (0, .25, .75)   [.5 on 1.5 -> .25/.25, .5 on 2]
# In s0 the greedy action 0 predicts p = (.25, .5, .25) (action 1: (.5, .25, .25), mean .75 < 1), so the
# cross-entropy -sum target * log p is, in units of log 2: 2, 1.5, 1 and 1.75 for the four, and 1 for
# a termination (all mass on the reward, atom 1).
ATOMS = [0.0, 1.0, 2.0]
S0_LOGITS = [[0.25, 0.5, 0.25], [0.5, 0.25, 0.25]]
CATEGORICAL_TARGET = probs_to_logits([S0_LOGITS, [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
CATEGORICAL_ONLINE = probs_to_logits([S0_LOGITS, [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]])


def _categorical_transition(make, last_step, episodes=1, **kwargs):
    network = TableCategoricalNetwork(CATEGORICAL_TARGET, ATOMS)
    agent = make(network, **kwargs)
    set_online(network, table=CATEGORICAL_ONLINE)
    actions = feed(agent, [first(0), last_step] * episodes)
    assert actions[0] == 0 and agent.statistics["learner_steps"] == 1
    return agent, network


def test_c51_projects_the_target_networks_greedy_distribution():
    agent, network = _categorical_transition(make_c51, mid(1, 1.0))
    assert agent.statistics["loss"] == pytest.approx(2 * LOG2)  # -log .25 on the atom 2
    # Only the logits of (s0, action 0) get a gradient: softmax(.) - target = (.25, .5, -.75).
    moved = network.table.detach() - CATEGORICAL_ONLINE
    torch.testing.assert_close(moved[0, 0], -0.5 * torch.tensor([0.25, 0.5, -0.75]))
    assert torch.equal(moved[0, 1], torch.zeros(3)) and torch.equal(
        moved[1].nan_to_num(0.0), torch.zeros(2, 3)
    )


@pytest.mark.parametrize("make", [make_c51, make_rainbow])
def test_categorical_agents_stop_the_bootstrap_at_a_termination_only(make):
    kwargs = {} if make is make_c51 else {"replay": ScriptedPrioritizedReplay(1, [0], [1.0])}
    agent, _ = _categorical_transition(make, terminated(1, 1.0), **kwargs)
    assert agent.statistics["loss"] == pytest.approx(LOG2)  # target all on atom 1: -log .5
    kwargs = {} if make is make_c51 else {"replay": ScriptedPrioritizedReplay(1, [0], [1.0])}
    agent, _ = _categorical_transition(make, truncated(1, 1.0), **kwargs)
    assert agent.statistics["loss"] == pytest.approx((2.0 if make is make_c51 else 1.5) * LOG2)


def test_rainbow_projects_the_target_networks_distribution_of_the_online_networks_choice():
    memory = ScriptedPrioritizedReplay(1, indices=[0], weights=[0.5])
    agent, _ = _categorical_transition(make_rainbow, mid(1, 1.0), replay=memory, priority_epsilon=0.25)
    # cross-entropy of (0, .5, .5) against (.25, .5, .25): .5 log 2 + .5 log 4 = 1.5 log 2, weighted by 0.5
    assert agent.statistics["loss"] == pytest.approx(0.75 * LOG2)
    # priority = KL = cross-entropy - entropy of the target = 1.5 log 2 - log 2 = 0.5 log 2, plus 0.25
    ((indices, priorities),) = memory.updates
    assert indices.tolist() == [0]
    np.testing.assert_allclose(priorities, [0.5 * LOG2 + 0.25], rtol=1e-5)


def test_rainbow_anneals_beta_on_env_steps():
    memory = ScriptedPrioritizedReplay(1, indices=[0], weights=[1.0])
    agent, _ = _categorical_transition(
        make_rainbow, mid(1, 1.0), replay=memory, beta=LinearSchedule(0.5, 1.0, 0, 4)
    )
    assert memory.betas == [pytest.approx(0.625)]  # env step 1: 0.5 + 0.5 * 1 / 4


# ----------------------------------------------------------------------------------------------------
# QR-DQN: fixed fractions (1/4, 3/4) and the target network's quantiles.
#
# N = 2 quantiles, so tau = (2i + 1) / 4 = (.25, .75). Reward 1, gamma 0.5, plain quantile loss
# rho = |tau - 1{u < 0}| * |u| with u = target sample - predicted quantile, summed over i, mean over j.
#                 s0, actions 0 / 1        s1, actions 0 / 1
#   online      (0, 2) / (0, 0)          (5, 5) / (0, 0)      greedy in s0: action 0 (mean 1)
#   target      (9, 9) / (9, 9)          (1, 1) / (0, 4)      target picks action 1 in s1 (mean 2 > 1)
# Target samples: 1 + 0.5 * (0, 4) = (1, 3).
#   i=0, tau .25, q = 0: u = (1, 3) >= 0:            mean(.25 * 1, .25 * 3) = 0.5
#   i=1, tau .75, q = 2: u = (-1, 1): mean(.25 * 1, .75 * 1)              = 0.5    loss = 1.0
# (the online network's s1, or the fractions reversed, would both give 2.0.)


def _quantiles(per_action):
    """[A][N] -> the [N, A] layout of q_dist."""
    return torch.tensor(per_action, dtype=torch.float32).T


def _qr_transition(last_step, episodes=1, **kwargs):
    network = TableQuantileNetwork(torch.stack([_quantiles([[9, 9], [9, 9]]), _quantiles([[1, 1], [0, 4]])]))
    agent = make_qr_dqn(network, **kwargs)
    set_online(network, table=torch.stack([_quantiles([[0, 2], [0, 0]]), _quantiles([[5, 5], [0, 0]])]))
    actions = feed(agent, [first(0), last_step] * episodes)
    assert actions[0] == 0 and agent.statistics["learner_steps"] == 1
    return agent, network


def test_qr_dqn_regresses_the_midpoint_quantiles_on_the_target_networks_quantiles():
    agent, network = _qr_transition(mid(1, 1.0))
    assert agent.statistics["loss"] == pytest.approx(1.0)
    # Gradients of rho in the predicted quantile: i=0: -mean(.25, .25) = -.25; i=1: mean(.25, -.75) = -.25.
    # SGD, lr 0.5: both quantiles of (s0, action 0) rise by 0.125.
    torch.testing.assert_close(network.table[0, :, 0].detach(), torch.tensor([0.125, 2.125]))


def test_qr_dqn_stops_the_bootstrap_at_a_termination_only():
    # termination: samples (1, 1): i=0: .25 * 1 = .25; i=1: q = 2, u = -1: .25 * 1 = .25 -> 0.5
    assert _qr_transition(terminated(1, 1.0))[0].statistics["loss"] == pytest.approx(0.5)
    assert _qr_transition(truncated(1, 1.0))[0].statistics["loss"] == pytest.approx(1.0)


# ----------------------------------------------------------------------------------------------------
# IQN: sampled fractions for the online quantiles (N = 2), the target's choice (K = 3) and the
# target samples (N' = 1), all from the target network. The fractions are fixed by the test:
#   N = 2: (.25, .75)    K = 3: (.6, .7, .8)    N' = 1: (.25)
# Quantiles base + slope * tau; reward 2, gamma 0.5, plain quantile loss.
#                 s0, actions 0 / 1       s1, actions 0 / 1
#   online      2 tau / 0                5 / 0
#   target      0 / 0                    1.5 / 4 tau
# Acting (mean over K): s0: 2 * .7 = 1.4 > 0, action 0; at (.25, .75) its quantiles are (.5, 1.5).
# Target picks, with K: mean 1.5 vs 4 * .7 = 2.8 -> action 1 (with N' it would pick 0: 1.5 > 1);
# its sample at N': 4 * .25 = 1, so the target is 2 + 0.5 * 1 = 2.5.
#   i=0, tau .25, q = .5: u = 2:   .25 * 2 = .5
#   i=1, tau .75, q = 1.5: u = 1:  .75 * 1 = .75      loss = 1.25
FIXED_TAUS = {2: [0.25, 0.75], 3: [0.6, 0.7, 0.8], 1: [0.25]}


def _iqn_transition(monkeypatch, last_step, episodes=1, **kwargs):
    def fixed_taus(batch_size, num_taus, generator, device):
        return torch.tensor(FIXED_TAUS[num_taus]).expand(batch_size, num_taus).clone()

    monkeypatch.setattr(iqn_agent, "sample_taus", fixed_taus)
    network = LinearTauNetwork(base=[[0, 0], [1.5, 0]], slope=[[0, 0], [0, 4]])
    agent = make_iqn(network, taus=(2, 3, 1), **kwargs)
    set_online(network, base=[[0, 0], [5, 0]], slope=[[2, 0], [0, 0]])
    calls = []
    network.register_forward_hook(lambda module, args, output: calls.append(args[1][0].tolist()))
    actions = feed(agent, [first(0), last_step] * episodes)
    assert actions[0] == 0 and agent.statistics["learner_steps"] == 1
    return agent, calls


def test_iqn_regresses_sampled_quantiles_on_the_target_networks_samples(monkeypatch):
    agent, online_calls = _iqn_transition(monkeypatch, mid(1, 2.0))
    assert agent.statistics["loss"] == pytest.approx(1.25)
    # The online network acts with K fractions at s0 and s1, then learns at the N fractions only.
    assert online_calls == [pytest.approx(FIXED_TAUS[3])] * 2 + [pytest.approx(FIXED_TAUS[2])]


def test_iqn_stops_the_bootstrap_at_a_termination_only(monkeypatch):
    # termination: target 2: i=0: .25 * (2 - .5) = .375; i=1: .75 * (2 - 1.5) = .375 -> 0.75
    assert _iqn_transition(monkeypatch, terminated(1, 2.0))[0].statistics["loss"] == pytest.approx(0.75)
    assert _iqn_transition(monkeypatch, truncated(1, 2.0))[0].statistics["loss"] == pytest.approx(1.25)


# ----------------------------------------------------------------------------------------------------
# DRQN: burn-in from the zero state, loss on the post-burn-in transitions only, episode-end masks.


class RunningSumNetwork(nn.Module):
    """A recurrent Q-network stand-in. An observation is [id, value] (or [id], value 0); the recurrent
    state h is the running sum of the values since the last reset (a `first` step, or the state the
    agent passes in), and Q(o_t)[a] = table[id_t, a] + h_t."""

    def __init__(self, table):
        super().__init__()
        self.table = nn.Parameter(torch.as_tensor(table, dtype=torch.float32).clone())

    def initial_state(self, batch_size: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        zeros = torch.zeros(1, batch_size, 1, device=device)
        return zeros, zeros.clone()

    def forward(self, x: torch.Tensor, hidden_state, first=None) -> RecurrentQNetworkOutput:
        h, c = hidden_state  # [1, B, 1]
        q_values = []
        for t, x_t in enumerate(x):  # [B, D]
            if first is not None:  # the sum restarts at an episode's first step, as DrqnNetwork's state
                h = h * (~first[t]).float().view(1, -1, 1)
            h = h + (x_t[:, 1].view(1, -1, 1) if x_t.shape[1] > 1 else 0.0)
            q_values.append(self.table[x_t[:, 0].long()] + h[0])
        return RecurrentQNetworkOutput(q_values=torch.stack(q_values), hidden_state=(h, c))


def make_drqn(
    network,
    *,
    lr=0.5,
    replay=None,
    n_step=1,
    discount=0.5,
    epsilon=0.0,
    burn_in=1,
    unroll_length=1,
    **overrides,
):
    replay = replay or SequenceReplay(100, burn_in + unroll_length + 1, rng=np.random.default_rng(1))
    kwargs = dict(
        network=network,
        optimizer=torch.optim.SGD(network.parameters(), lr=lr),
        replay=replay,
        discount=discount,
        burn_in=burn_in,
        min_replay_size=1,
        learn_interval=1,
        batch_size=1,
        target_network_update_period=NEVER,
        max_grad_norm=0.0,
        device=CPU,
        double_q=True,
        huber_delta=None,
        n_step=n_step,
    )
    kwargs.update(overrides)
    return Drqn(**kwargs, **_epsilon_kwargs(epsilon))


def observed(s: int, value: float, reward: float = 0.0, *, first=False, terminated=False, truncated=False):
    return TimeStep(np.array([s, value], dtype=np.float32), reward, terminated, truncated, first, {})


# Window of 4 = 2 burn-in steps + 1 transition + its bootstrap state; the replay holds exactly that
# window. Observations [id, value] = o0 [0, 1], o1 [1, 2], o2 [2, 0], o3 [3, 0]; reward 2 on reaching
# o3; gamma 0.5; squared loss; SGD with lr 0.2. The state is h = 1 + 2 = 3 from o1 on, when burnt in
# from zero over o0, o1 (and 0 if the burn-in were skipped).
#                 o2        o3
#   online      [0, 2]    [5, 0]     + h = 3: [3, 5] (acts 1, Q = 5) and [8, 3] (picks 0)
#   target      [0, 0]   [-2, 0]     + h = 3: [1, 3]
# Double:     target = 2 + 0.5 * 1 = 2.5; td = 2.5 - 5 = -2.5; loss = 0.5 * 2.5^2 = 3.125
# Max:        target = 2 + 0.5 * 3 = 3.5; td = -1.5; loss = 1.125
# Terminal:   target = 2;                 td = -3;   loss = 4.5
# (No burn-in: Q(o2, 1) = 2, td = 0.5, loss 0.125; target net unrolled from o2 at zero: target
# 2 + 0.5 * -2 = 1, loss 8.)
DRQN_TARGET = [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [-2.0, 0.0]]
DRQN_ONLINE = [[0.0, 0.0], [0.0, 0.0], [0.0, 2.0], [5.0, 0.0]]


def _drqn_window(last_step: TimeStep, **kwargs):
    network = RunningSumNetwork(DRQN_TARGET)
    agent = make_drqn(
        network, lr=0.2, replay=SequenceReplay(4, 4, np.random.default_rng(0)), burn_in=2, **kwargs
    )
    set_online(network, table=DRQN_ONLINE)
    actions = feed(agent, [observed(0, 1.0, first=True), observed(1, 2.0), observed(2, 0.0), last_step])
    assert actions[2] == 1 and agent.statistics["learner_steps"] == 1
    return agent, network


@pytest.mark.parametrize("double_q, loss", [(True, 3.125), (False, 1.125)])
def test_drqn_burns_in_from_the_zero_state_and_learns_from_the_steps_after_it(double_q, loss):
    agent, network = _drqn_window(observed(3, 0.0, 2.0), double_q=double_q)
    assert agent.statistics["loss"] == pytest.approx(loss)
    # Only Q(o2, 1) gets a gradient, -td: the burn-in rows 0 and 1 and the bootstrap row 3 stay.
    td = -2.5 if double_q else -1.5
    expected = torch.tensor(DRQN_ONLINE)
    expected[2, 1] += 0.2 * td
    torch.testing.assert_close(network.table.detach(), expected)


def test_drqn_stops_the_bootstrap_at_a_termination_only():
    agent, _ = _drqn_window(observed(3, 0.0, 2.0, terminated=True))
    assert agent.statistics["loss"] == pytest.approx(4.5)
    agent, _ = _drqn_window(observed(3, 0.0, 2.0, truncated=True))
    assert agent.statistics["loss"] == pytest.approx(3.125)


def test_drqn_masks_the_transition_across_an_episode_start():
    # Burn-in 1, 2 transitions: o0 [0, 1] first, o1 [1, 2] terminal (reward 5), o2 [2, 4] first,
    # o3 [3, 0] (reward 1). Transition o1 -> o2 crosses into a new episode: no loss from it. The state
    # is reset at o2: h = 4 at o2 and o3, in the online and the target unroll alike.
    #                 o1        o2        o3
    #   online      [0, 0]    [0, 2]    [5, 0]    + 4: o2 [4, 6] (acts 1, Q = 6), o3 [9, 4] (picks 0)
    #   target      [1, 1]    [0, 0]   [-2, 0]    + 4: o3 [2, 4]
    # o2 -> o3: target = 1 + 0.5 * 2 = 2; td = 2 - 6 = -4; loss = 0.5 * 16 = 8, the mean over 1 valid
    # transition (with the invalid one averaged in, it would be (8 + 0.5 * (4 - 3)^2) / 2 = 4.25).
    network = RunningSumNetwork([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [-2.0, 0.0]])
    agent = make_drqn(
        network, lr=0.25, replay=SequenceReplay(4, 4, np.random.default_rng(0)), burn_in=1, unroll_length=2
    )
    online = [[0.0, 0.0], [0.0, 0.0], [0.0, 2.0], [5.0, 0.0]]
    set_online(network, table=online)
    actions = feed(
        agent,
        [
            observed(0, 1.0, first=True),
            observed(1, 2.0, 5.0, terminated=True),
            observed(2, 4.0, first=True),
            observed(3, 0.0, 1.0),
        ],
    )
    assert actions[1:3] == [0, 1] and agent.statistics["learner_steps"] == 1
    assert agent.statistics["loss"] == pytest.approx(8.0)
    expected = torch.tensor(online)
    expected[2, 1] -= 0.25 * 4  # d loss / d Q(o2, 1) = -td = 4; row 1 (the masked transition) stays
    torch.testing.assert_close(network.table.detach(), expected)


# ----------------------------------------------------------------------------------------------------
# The loss is a mean over the batch, and the gradient is clipped when asked.


@pytest.mark.parametrize(
    "kind, loss",
    [
        ("dqn", 3.125),
        ("double_dqn", 1.125),
        ("c51", 2 * LOG2),
        ("rainbow", 1.5 * LOG2),  # both weights are 1: two slots of priority 1
        ("qr_dqn", 1.0),
        ("iqn", 1.25),
        ("drqn", 3.125),
    ],
)
def test_the_loss_is_the_mean_over_the_batch(kind, loss, monkeypatch):
    # The worked examples above, with the same transition stored twice (two identical episodes) and a
    # batch of 2: the mean is the one example's loss; a sum would double it.
    two = replay_lib.UniformReplay(2, rng=np.random.default_rng(1))
    if kind in ("dqn", "double_dqn"):
        agent, _ = _one_transition(BUILDERS[kind], mid(1, 1.0), episodes=2, replay=two, batch_size=2)
    elif kind in ("c51", "rainbow"):
        if kind == "rainbow":
            two = replay_lib.PrioritizedReplay(2, 0.5, rng=np.random.default_rng(1))
        agent, _ = _categorical_transition(BUILDERS[kind], mid(1, 1.0), episodes=2, replay=two, batch_size=2)
    elif kind == "qr_dqn":
        agent, _ = _qr_transition(mid(1, 1.0), episodes=2, replay=two, batch_size=2)
    elif kind == "iqn":
        agent, _ = _iqn_transition(monkeypatch, mid(1, 2.0), episodes=2, replay=two, batch_size=2)
    else:  # the replay holds one window; a batch of 2 draws it twice
        agent, _ = _drqn_window(observed(3, 0.0, 2.0), batch_size=2)
    assert agent.statistics["loss"] == pytest.approx(loss)


def test_dqn_clips_the_gradient_norm_it_is_given():
    # The DQN example's only gradient is -2.5 on Q(s0, 1); clipped to norm 0.5, SGD (lr 0.5) adds 0.25.
    _, network = _one_transition(make_dqn, mid(1, 1.0), max_grad_norm=0.5)
    assert network.table[0, 1].item() == pytest.approx(0.25)


def test_drqn_clips_the_gradient_norm_it_is_given():
    # The DRQN example's only gradient is 2.5 on Q(o2, 1); clipped to norm 0.5, SGD (lr 0.2) takes 0.1.
    _, network = _drqn_window(observed(3, 0.0, 2.0), max_grad_norm=0.5)
    assert network.table[2, 1].item() == pytest.approx(1.9)


# ----------------------------------------------------------------------------------------------------
# What every agent does the same way: target-network period, learning cadence, epsilon on env steps.
# Each is built around a small table (4 states, 2 actions) in which action 1 is greedy everywhere.


def _generic_network(kind: str) -> nn.Module:
    rows = torch.tensor([[0.0, 1.0], [0.5, 2.0], [-1.0, 0.0], [1.0, 1.5]])  # [S=4, A=2]
    if kind in ("c51", "rainbow"):
        logits = torch.stack([torch.stack([-r, torch.zeros(2), r], dim=1) for r in rows])  # [4, 2, 3]
        return TableCategoricalNetwork(logits, ATOMS)
    if kind == "qr_dqn":
        return TableQuantileNetwork(torch.stack([rows - 1.0, rows + 1.0], dim=1))  # [4, N=2, 2]
    if kind == "iqn":
        return LinearTauNetwork(base=rows, slope=torch.ones(4, 2))
    if kind == "drqn":
        return RunningSumNetwork(rows)
    return TableQNetwork(rows)


BUILDERS = {
    "dqn": make_dqn,
    "double_dqn": make_double_dqn,
    "prioritized_dqn": make_prioritized_dqn,
    "c51": make_c51,
    "rainbow": make_rainbow,
    "qr_dqn": make_qr_dqn,
    "iqn": make_iqn,
    "drqn": make_drqn,  # windows of 3 steps: burn-in 1, 1 transition
}
WITH_EPSILON = [kind for kind in BUILDERS if kind != "rainbow"]  # Rainbow explores with noisy layers


def _generic_agent(kind: str, **overrides):
    if kind == "drqn":
        memory = SequenceReplay(100, 3, rng=np.random.default_rng(1))
    elif kind in ("prioritized_dqn", "rainbow"):
        memory = replay_lib.PrioritizedReplay(100, 0.5, rng=np.random.default_rng(1))
    else:
        memory = replay_lib.UniformReplay(100, rng=np.random.default_rng(1))
    return BUILDERS[kind](_generic_network(kind), lr=0.1, replay=memory, **overrides)


def _episode(length: int, start: int = 0) -> list[TimeStep]:
    """first, then `length` steps through states 0..3 with reward 1, the last one terminal."""
    steps = [first(start % 4)]
    for t in range(1, length + 1):
        s = (start + t) % 4
        steps.append(terminated(s, 1.0) if t == length else mid(s, 1.0))
    return steps


def _parameters(state_dict: dict) -> dict:
    return {name: tensor.clone() for name, tensor in state_dict.items()}


def _equal(a: dict, b: dict) -> bool:
    return all(torch.equal(a[name].nan_to_num(), b[name].nan_to_num()) for name in a)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_the_target_network_is_refreshed_exactly_every_period_gradient_steps(kind):
    agent = _generic_agent(kind, target_network_update_period=3, batch_size=2, min_replay_size=2)
    expected_target = _parameters(agent.state_dict()["target_network"])
    refreshed, moved = [], 0
    agent.reset()
    for timestep in _episode(12) + _episode(6, start=1):
        if timestep.first:
            agent.reset()
        before = agent.statistics["learner_steps"]
        agent.step(timestep)
        state = agent.state_dict()
        k = agent.statistics["learner_steps"]
        if k == before:
            assert _equal(state["target_network"], expected_target)
            continue
        assert k == before + 1
        moved += not _equal(state["network"], expected_target)
        if k % 3 == 0:  # a copy of the online network as it is after this gradient step
            expected_target = _parameters(state["network"])
            refreshed.append(k)
        assert _equal(state["target_network"], expected_target), f"after gradient step {k}"
    assert refreshed == [3, 6, 9, 12, 15]
    # The equalities above mean something only if the online network moves: it does, except when a
    # DRQN batch holds only masked transitions (window ends across an episode start).
    assert moved >= 15


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_gradient_step_every_learn_interval_env_steps_and_never_on_a_first_step(kind):
    agent = _generic_agent(kind, learn_interval=2, batch_size=2, min_replay_size=3)
    # Episode 1: env steps 1..4 store transitions 1..4 (n = 1): learning at env step 4 only (at 2, only
    # 2 < 3 transitions are stored). DRQN stores steps, first included: 3 at env step 2, so it learns then too.
    before = 2 if kind == "drqn" else 1
    feed(agent, _episode(4))
    assert agent.statistics["learner_steps"] == before
    # Episode 2: its first timestep is no env step (env steps stay 4, even) and teaches nothing;
    # env steps 5..8: learning at 6 and 8.
    agent.reset()
    agent.step(first(1))
    assert agent.statistics["learner_steps"] == before
    feed(agent, _episode(4, start=1)[1:])
    assert agent.statistics["learner_steps"] == before + 2


@pytest.mark.parametrize("kind", WITH_EPSILON)
def test_epsilon_follows_env_steps_not_learner_steps_nor_first_timesteps(kind):
    # Epsilon goes 1 -> 0 over env steps 0..10; learning never starts (min_replay_size 50).
    agent = _generic_agent(kind, epsilon=LinearSchedule(1.0, 0.0, 0, 10), min_replay_size=50)
    feed(agent, _episode(4))
    assert agent.epsilon == pytest.approx(0.6)  # 4 env steps: 1 - 4 / 10
    feed(agent, [first(2)])
    assert agent.epsilon == pytest.approx(0.6)  # a first timestep is not an env step
    assert agent.statistics["epsilon"] == pytest.approx(0.6)


@pytest.mark.parametrize("kind", WITH_EPSILON)
def test_actions_are_greedy_at_epsilon_0_and_uniform_at_epsilon_1(kind):
    greedy = _generic_agent(kind, epsilon=0.0, min_replay_size=50)
    assert set(feed(greedy, _episode(30))) == {1}  # action 1 is the best in every state
    uniform = _generic_agent(kind, epsilon=1.0, min_replay_size=50)
    actions = feed(uniform, _episode(30))
    assert 8 <= actions.count(0) <= 23  # about half of 31


# The agent state every checkpoint written so far holds: a change to the shared agent
# (replay_q_agents.ReplayQAgent) must keep it, or old runs stop resuming.
_SHARED_STATE = {"network", "target_network", "optimizer", "env_steps", "learner_steps", "replay_rng"}
CHECKPOINT_KEYS = {
    **{kind: _SHARED_STATE | {"rng"} for kind in WITH_EPSILON},
    "iqn": _SHARED_STATE | {"rng", "tau_generator"},
    "rainbow": _SHARED_STATE | {"torch_rng"},  # no epsilon: no exploration generator
}


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_checkpoint_state_keeps_the_keys_earlier_checkpoints_hold_and_round_trips(kind):
    agent = _generic_agent(kind, batch_size=2, min_replay_size=2)
    feed(agent, _episode(6))
    state = agent.state_dict()
    assert set(state) == CHECKPOINT_KEYS[kind]
    assert state["env_steps"] == 6 and state["learner_steps"] > 0
    other = _generic_agent(kind, batch_size=2, min_replay_size=2)
    other.load_state_dict(state)
    restored = other.state_dict()
    assert (restored["env_steps"], restored["learner_steps"]) == (6, state["learner_steps"])
    assert _equal(restored["network"], state["network"])
    assert _equal(restored["target_network"], state["target_network"])


def _without_exploration(kind: str):
    """Builds a `kind` agent from everything but exploration_epsilon, num_actions and rng."""
    network = _generic_network(kind)
    if kind == "prioritized_dqn":
        memory = replay_lib.PrioritizedReplay(10, 0.5, rng=np.random.default_rng(1))
    else:
        memory = replay_lib.UniformReplay(10, rng=np.random.default_rng(1))
    common = _common(network, 0.1, memory, 1, 0.9)
    if kind == "prioritized_dqn":
        return PrioritizedDqn(
            **common, importance_sampling_exponent=LinearSchedule(0.4, 1.0, 0, 10), priority_epsilon=0.1
        )
    if kind == "qr_dqn":
        return QrDqn(**common, num_quantiles=2)
    if kind == "iqn":
        taus = dict(num_online_taus=1, num_target_taus=1, num_acting_taus=1)
        return iqn_agent.Iqn(**common, **taus, tau_generator=torch.Generator())
    return {"dqn": Dqn, "double_dqn": DoubleDqn, "c51": C51Dqn}[kind](**common)


@pytest.mark.parametrize("kind", sorted(set(WITH_EPSILON) - {"drqn"}))
def test_an_epsilon_greedy_agent_without_its_exploration_arguments_is_refused(kind):
    with pytest.raises(ValueError, match="acts epsilon-greedily: it needs exploration_epsilon, num_actions"):
        _without_exploration(kind)
