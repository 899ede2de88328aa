"""NGU: the episodic memory (running mean of k-NN distances, reset per episode), the actor's blocks
(policy index, previous action, intrinsic reward = episodic x life-long factor), the learner's wiring
(r^e + beta_j r^i and gamma_j per sequence reach the target, memory rows kept from the actors'
messages), smoke runs of every script, resume, bad input, and a learning milestone on MountainCar."""

import dataclasses
import functools
import os

import numpy as np
import pytest
import torch
from torch import nn

from deep_rl_zoo import exploration, value_learning
from deep_rl_zoo.agent57 import agent as agent57_agent
from deep_rl_zoo.agent57 import train as agent57_train
from deep_rl_zoo.errors import ConfigError
from deep_rl_zoo.networks.value import RecurrentQInput, RecurrentQNetworkOutput
from deep_rl_zoo.ngu import agent, eval_agent, run_atari, train
from unit_tests.distributed_helpers import (
    TINY_SEQUENCE_RUN,
    PositionVelocityEnv,
    RecordingLink,
    evaluate_latest,
    novelty_learner,
    recurrent_replay_atari_smoke,
    timestep,
    tiny_config,
    train_then_resume,
    train_until_mountaincar_flag,
)

h = value_learning.signed_hyperbolic

# ----------------------------------------------------------------------------------------------------
# Episodic memory


def test_episodic_memory_rewards_novelty_against_this_episode_only_with_a_running_mean_of_distances():
    config = agent.EpisodicNoveltyConfig(memory_capacity=10, num_neighbours=2)
    memory = agent.EpisodicMemory(config)
    assert memory.reward(torch.tensor([0.0, 0.0])) == 0.0  # nothing to compare with yet
    assert memory.reward(torch.tensor([3.0, 4.0])) == 0.0  # one neighbour, fewer than k = 2
    assert memory.distance_mean == 0.0  # nor does it enter the running mean
    # Two neighbours now: (0,1) is at 1 from (0,0) and 3^2 + 3^2 = 18 from (3,4); mean (1 + 18) / 2.
    r = memory.reward(torch.tensor([0.0, 1.0]))
    assert memory.distance_mean == pytest.approx(9.5)
    expected = exploration.episodic_intrinsic_reward(torch.tensor([[1.0, 18.0]]), 9.5)
    assert r == pytest.approx(float(expected[0]))
    memory.reset()  # a new episode: the memory is empty again, the running mean stays
    assert memory.reward(torch.tensor([0.0, 1.0])) == 0.0
    assert memory.distance_mean == pytest.approx(9.5)


def test_episodic_reward_is_zero_until_the_memory_holds_k_neighbours():
    # Kernel epsilon 1, no cluster distance, c = 0: each neighbour at normalised distance 1 adds
    # 1 / (1 + 1) = 0.5 to the kernel sum. With k = 3, steps 1-3 of the episode get nothing (the old
    # rule gave step 2 1 / sqrt(0.5) = 1.41, step 3 1 / sqrt(1.0) = 1: more than the steady value);
    # step 4 sees 1, -1, 1 at squared distance 1 each (mean 1): 1 / sqrt(3 * 0.5) = 0.816.
    config = agent.EpisodicNoveltyConfig(
        memory_capacity=10,
        num_neighbours=3,
        kernel_epsilon=1.0,
        cluster_distance=0.0,
        pseudo_count_constant=0.0,
    )
    memory = agent.EpisodicMemory(config)
    rewards = [memory.reward(torch.tensor([x])) for x in (1.0, -1.0, 1.0, 0.0)]
    assert rewards == pytest.approx([0.0, 0.0, 0.0, 1.0 / 1.5**0.5])
    assert memory.distance_mean == pytest.approx(1.0)


def test_episodic_memory_overwrites_its_oldest_embedding_when_full():
    memory = agent.EpisodicMemory(agent.EpisodicNoveltyConfig(memory_capacity=2, num_neighbours=1))
    for x in (0.0, 10.0, 20.0):  # (0) is overwritten by (20)
        memory.reward(torch.tensor([x]))
    memory.reward(torch.tensor([1.0]))  # nearest is 10 (at 81), not the forgotten 0 (at 1)
    # running mean of squared distances: 100 (10 vs 0), then 100 (20 vs 10), then 81 -> 281 / 3
    assert memory.distance_mean == pytest.approx(281.0 / 3.0)


# ----------------------------------------------------------------------------------------------------
# The policy family's reward and discount


def test_each_transition_gets_the_reward_and_discount_of_its_policy():
    betas, gammas = torch.tensor([0.0, 0.5]), torch.tensor([0.9, 0.5])
    reward, discount = agent.policy_reward_and_discount(
        r_e=torch.tensor([[-1.0, -1.0], [1.0, 1.0]]),
        r_i=torch.tensor([[2.0, 2.0], [4.0, 4.0]]),
        terminated=torch.tensor([[False, False], [True, False]]),
        policy_index=torch.tensor([[0, 1], [0, 1]]),
        betas=betas,
        gammas=gammas,
    )
    # column 0 plays j = 0 (beta 0, gamma 0.9): -1 + 0 * 2 = -1, 1 + 0 * 4 = 1, terminated -> discount 0
    # column 1 plays j = 1 (beta 0.5, gamma 0.5): -1 + 0.5 * 2 = 0, 1 + 0.5 * 4 = 3
    torch.testing.assert_close(reward, torch.tensor([[-1.0, 0.0], [1.0, 3.0]]))
    torch.testing.assert_close(discount, torch.tensor([[0.9, 0.5], [0.0, 0.5]]))


class _ZeroQ(nn.Module):
    """h(Q) = 0 everywhere: a target is then h(discounted rewards) alone, and |td| is |target|."""

    def __init__(self, num_actions=2):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(()))
        self.num_actions = num_actions

    def initial_state(self, batch_size, device=None):
        zeros = torch.zeros(1, batch_size, 1)
        return zeros, zeros.clone()

    def forward(self, x, hidden_state):
        steps, batch = x.observation.shape[:2]
        return RecurrentQNetworkOutput(
            torch.zeros(steps, batch, self.num_actions) + 0 * self.bias, hidden_state
        )

    def acting_q_values(self, q_values, beta):
        return q_values


def _learner(q: nn.Module, **overrides):
    networks = train.build_novelty_modules({"num_actors": 2}, q, (2,), 2)
    return novelty_learner(agent.Ngu, networks, **overrides)


def _sequences(policy_index, r_e=1.0, r_i=2.0, steps=4):
    """Two sequences of `steps` steps within one episode each, sequence b played by policy_index[b]."""
    batch = len(policy_index)
    j = torch.tensor(policy_index)[None].expand(steps, batch)
    reward = torch.full((steps, batch), r_e)
    intrinsic = torch.full((steps, batch), r_i)
    zeros = torch.zeros(steps, batch, dtype=torch.int64)
    inputs = RecurrentQInput(torch.zeros(steps, batch, 2), zeros, reward, j, intrinsic)
    return agent.SequenceTensors(
        inputs=inputs,
        action=zeros,
        extrinsic_reward=reward,
        intrinsic_reward=intrinsic,
        terminated=torch.zeros(steps, batch, dtype=torch.bool),
        first=torch.zeros(steps, batch, dtype=torch.bool),
        policy_index=j,
        stored_state=(torch.zeros(1, batch, 1), torch.zeros(1, batch, 1)),
        weights=torch.ones(batch),
    )


def test_intrinsic_reward_reaches_the_target_with_beta_and_gamma_of_each_sequences_policy():
    learner = _learner(_ZeroQ())  # betas 0, 0.5; gammas 0.9, 0.5; n = 2
    per_sequence, abs_td, mask, _ = learner.q_loss(_sequences([0, 1]))
    # Transition 0, two steps then a bootstrap of h^-1(0) = 0:
    # sequence 0 (j = 0): r = 1 + 0 * 2 = 1, y = h(1 + 0.9 * 1) = h(1.9)
    # sequence 1 (j = 1): r = 1 + 0.5 * 2 = 2, y = h(2 + 0.5 * 2) = h(3)
    torch.testing.assert_close(abs_td[0], h(torch.tensor([1.9, 3.0])))
    # The last transition has one reward before the sequence ends: y = h(1), h(2).
    torch.testing.assert_close(abs_td[-1], h(torch.tensor([1.0, 2.0])))
    assert mask.shape == (3, 2) and bool(mask.all())
    torch.testing.assert_close(per_sequence, 0.5 * abs_td.square().mean(0))


def test_retrace_target_by_hand():
    # o_0 -> o_1 -> o_2, one sequence, 2 actions; real target-network values Q'(o_1) = [2, 4],
    # Q'(o_2) = [6, 8]; the online network is greedy in action 1 at o_1 and action 0 at o_2; target
    # epsilon 0.5 makes pi(o_1) = [0.25, 0.75], pi(o_2) = [0.75, 0.25]. a_1 = 0 with mu = 0.5, r = 1,
    # gamma 0.5, lambda 1:
    #   G_1 = 1 + 0.5 * (0.75 * 6 + 0.25 * 8) = 4.25
    #   c_1 = min(1, 0.25 / 0.5) = 0.5
    #   G_0 = 1 + 0.5 * ((0.25 * 2 + 0.75 * 4) + 0.5 * (G_1 - Q'(o_1, a_1 = 0) = 2)) = 3.3125
    q_online = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])[:, None]  # [3, 1, 2]
    q_target = h(torch.tensor([[0.0, 0.0], [2.0, 4.0], [6.0, 8.0]]))[:, None]
    extra = agent.retrace_td_errors(
        q_online,
        q_target,
        agent.epsilon_greedy_probabilities(q_online, 0.5),
        a_tm1=torch.tensor([[1], [0]]),
        r_t=torch.ones(2, 1),
        discount_t=torch.full((2, 1), 0.5),
        valid_t=torch.ones(2, 1, dtype=torch.bool),
        mu_a_tm1=torch.tensor([[0.9], [0.5]]),  # mu of a_0 is never used
        lambda_=1.0,
    )
    torch.testing.assert_close(extra.target, h(torch.tensor([[3.3125], [4.25]])))
    # td = y - q_online(o_j, a_j): q_online(o_0, 1) = 0, q_online(o_1, 0) = 0
    torch.testing.assert_close(extra.td_error, h(torch.tensor([[3.3125], [4.25]])))


def test_retrace_learner_learns_from_the_stored_behaviour_probabilities():
    # h(Q) = 0 everywhere: pi is greedy in action 0 (ties: the first), E_pi Q' = 0, so G_j = r_j + gamma_j
    # c_{j+1} G_{j+1} with c = min(1, pi(a = 0) / mu) = min(1, 1 / 0.25) = 1 (lambda 1, target epsilon 0).
    learner = _learner(_ZeroQ(), retrace=agent.RetraceSettings(lambda_=1.0, target_epsilon=0.0))
    data = _sequences([0, 1])._replace(behaviour_probability=torch.full((4, 2), 0.25))
    _, abs_td, _, _ = learner.q_loss(data)
    # j = 0 (r = 1, gamma 0.9): G_2 = 1, G_1 = 1 + 0.9 = 1.9, G_0 = 1 + 0.9 * 1.9 = 2.71
    # j = 1 (r = 1 + 0.5 * 2 = 2, gamma 0.5): G_2 = 2, G_1 = 3, G_0 = 3.5
    torch.testing.assert_close(abs_td, h(torch.tensor([[2.71, 3.5], [1.9, 3.0], [1.0, 2.0]])))
    # Actions 1, which the greedy pi never takes: c = 0 / 0.25 = 0 cuts every trace, G_j = r_j + gamma_j * 0.
    data = data._replace(action=torch.ones(4, 2, dtype=torch.int64))
    _, abs_td, _, _ = learner.q_loss(data)
    torch.testing.assert_close(abs_td, h(torch.tensor([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]])))


def test_inverse_model_learns_only_transitions_within_an_episode():
    torch.manual_seed(0)
    networks = train.build_networks({"num_actors": 1}, (2,), 3)
    observation = torch.randn(3, 1, 2)  # o_0, o_1, o_2; o_2 starts a new episode
    action = torch.tensor([[1], [2]])
    valid = torch.tensor([[True], [False]])
    inverse_loss, rnd_loss = agent.auxiliary_losses(networks, observation, action, valid)
    phi = networks.embedding.embed(observation[:, 0])
    logits = networks.embedding.inverse_model(torch.cat([phi[0], phi[1]])[None])
    # only o_0 -> o_1 counts: -log p(a_0 = 1 | f(o_0), f(o_1))
    torch.testing.assert_close(inverse_loss, -torch.log_softmax(logits, -1)[0, 1])
    prediction, target = networks.rnd(observation[1:, 0])  # RND learns o_1, o_2 (every observation)
    torch.testing.assert_close(rnd_loss, (prediction - target).square().mean())


def _stepped_learner(learner_class, networks, max_grad_norm: float, **overrides):
    """A learner over `networks` after one gradient step on two replayed sequences of actor 0 (the
    gradients stay in `.grad`)."""
    learner = novelty_learner(
        learner_class, networks, min_replay_size=1000, max_grad_norm=max_grad_norm, **overrides
    )
    rng = np.random.default_rng(0)
    for k in range(3):  # blocks of 2 steps: blocks 0 + 1 and 1 + 2 make two sequences of 4
        block = agent.SequenceBlock(
            actor_index=0,
            observation=rng.normal(size=(2, 2)).astype(np.float32),
            action=np.array([0, 1]),
            reward=np.array([0.0, 1.0], np.float32),
            terminated=np.zeros(2, bool),
            truncated=np.zeros(2, bool),
            first=np.array([k == 0, False]),
            core_state=tuple(x[0, 0].numpy() for x in networks.q.initial_state(1)),
            extras={
                "policy_index": np.array([1, 1]),
                "previous_action": np.array([0, 0]),
                "intrinsic_reward": np.array([0.5, 0.5], np.float32),
            },
        )
        learner.learn([agent.NguMessage(block, networks.actor_memory.read(0))])
    learner.gradient_step()
    return learner


@pytest.mark.parametrize("auxiliary_steps", [0, 1, 2])
def test_embedding_and_rnd_learn_the_last_auxiliary_steps_transitions_of_each_sequence(
    auxiliary_steps, monkeypatch
):
    # Sequences of T = 4 steps, no burn-in: 3 learned transitions o_0 -> o_1 .. o_2 -> o_3. With K of
    # them (0: all 3) the inverse model reads o_{3-K} .. o_3 and actions a_{3-K} .. a_2, its mask says
    # which of o_{4-K} .. o_3 continue an episode, and RND learns o_{4-K} .. o_3.
    seen = {}

    def recorded(name, function):
        def record(*args):
            seen[name] = (*args, function(*args))
            return seen[name][-1]

        return record

    monkeypatch.setattr(agent, "sequence_tensors", recorded("batch", agent.sequence_tensors))
    monkeypatch.setattr(agent, "auxiliary_losses", recorded("auxiliary", agent.auxiliary_losses))
    torch.manual_seed(0)
    networks = train.build_networks({"num_actors": 1}, (2,), 2)
    learner = _stepped_learner(agent.Ngu, networks, 0.0, auxiliary_steps=auxiliary_steps)
    data = seen["batch"][-1]  # the sampled batch as the step's tensors
    _, observation, action, valid, (inverse_loss, rnd_loss) = seen["auxiliary"]
    k = auxiliary_steps or 3
    assert torch.equal(observation, data.inputs.observation[4 - k - 1 :])
    assert torch.equal(action, data.action[4 - k - 1 : 3])
    assert torch.equal(valid, ~data.first[4 - k :])
    # and those losses are the ones the step logged (and minimised)
    assert learner.statistics["inverse_dynamics_loss"] == inverse_loss.item()
    assert learner.statistics["rnd_loss"] == rnd_loss.item()


def _grad_norm(parameters) -> float:
    return float(
        torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in parameters if p.grad is not None]))
    )


@pytest.mark.parametrize("package", ["ngu", "agent57"])
def test_each_trained_network_is_clipped_on_its_own_and_the_logged_norm_covers_all(package):
    build, learner_class = {
        "ngu": (train.build_networks, agent.Ngu),
        "agent57": (agent57_train.build_networks, agent57_agent.Agent57),
    }[package]
    config = dict(
        num_actors=2,
        num_policies=2,
        hidden_sizes=(8,),
        lstm_size=8,
        head_hidden_sizes=(8,),
        embedding_hidden_sizes=(4,),
        rnd_hidden_sizes=(8,),
        rnd_feature_size=4,
    )
    torch.manual_seed(0)
    networks = build(config, (2,), 2)
    groups = networks.trained_parameter_groups()
    expected = {"ngu": ["q"], "agent57": ["q_extrinsic", "q_intrinsic"]}[package] + ["embedding", "rnd"]
    assert list(groups) == expected
    trained = {id(p) for group in groups.values() for p in group}
    optimised = {
        id(p)
        for group in train.optimizer_for(train.NguConfig(), networks).param_groups
        for p in group["params"]
    }
    assert trained == optimised  # every parameter the optimiser steps is in exactly one clipped group
    limit = 1e-4  # far below every network's gradient norm here
    learner = _stepped_learner(learner_class, networks, limit)
    for name, parameters in groups.items():
        assert _grad_norm(parameters) == pytest.approx(limit, rel=1e-3), name  # each clipped to the limit
    # Without clipping, the logged norm is the global norm of every trained network's gradient.
    torch.manual_seed(0)
    networks = build(config, (2,), 2)
    learner = _stepped_learner(learner_class, networks, 0.0)
    norms = [_grad_norm(p) for p in networks.trained_parameter_groups().values()]
    assert min(norms) > 0
    assert learner.statistics["grad_norm"] == pytest.approx(sum(n * n for n in norms) ** 0.5, rel=1e-5)


def test_learner_keeps_each_actors_memory_row_and_rnd_statistics_from_its_messages():
    learner = _learner(_ZeroQ(), min_replay_size=1000)
    block = agent.SequenceBlock(
        actor_index=1,
        observation=np.array([[1.0, 2.0], [3.0, 4.0]], np.float32),
        action=np.zeros(2, np.int64),
        reward=np.zeros(2, np.float32),
        terminated=np.zeros(2, bool),
        truncated=np.zeros(2, bool),
        first=np.array([True, False]),
        core_state=(np.zeros(1, np.float32), np.zeros(1, np.float32)),
        extras={
            "policy_index": np.array([1, 1]),
            "previous_action": np.array([0, 0]),
            "intrinsic_reward": np.array([0.0, 0.5], np.float32),
        },
    )
    state = {"distance_mean": 2.5, "distance_count": 8.0, "bandit_arms": [], "bandit_returns": []}
    learner.learn([agent.NguMessage(block, state)])
    row = learner.networks.actor_memory.read(1)
    assert row["distance_mean"] == 2.5 and row["distance_count"] == 8.0
    assert learner.networks.actor_memory.read(0)["distance_count"] == 0.0  # other rows untouched
    # RND's observation statistics saw the two observations: mean (1 + 3) / 2, (2 + 4) / 2
    torch.testing.assert_close(
        learner.networks.rnd.normalizer.mean, torch.tensor([2.0, 3.0], dtype=torch.float64), atol=1e-3, rtol=0
    )
    assert learner.statistics["env_steps_received"] == 2


# ----------------------------------------------------------------------------------------------------
# The actor


def test_actor_blocks_carry_policy_index_previous_action_and_episodic_times_lifelong_reward():
    config = train.NguConfig(
        environment_name="MountainCar-v0",
        num_actors=3,
        num_policies=2,
        burn_in=1,
        trace_length=2,
        replay_period=2,
        num_neighbours=1,  # so that step 1 already has its k neighbours
    )
    networks = train.build_networks(dataclasses.asdict(config), (2,), 3).requires_grad_(False)
    observations = [[0.1, 0.0], [0.2, 0.01], [0.3, 0.02], [0.35, 0.03]]
    prediction, target = networks.rnd(torch.tensor([observations[1]]))
    error = float((prediction - target).square().mean())  # RND's error at o_1
    with torch.no_grad():  # pretend a learner has set RND's error statistics: mean 0, std error / 2
        networks.rnd_error.mean.fill_(0.0)
        networks.rnd_error.var.fill_((error / 2) ** 2 - 1e-8)
        networks.actor_memory.distance_mean[2] = 4.0  # actor 2's running mean from an earlier life
        networks.actor_memory.distance_count[2] = 1.0
    link = RecordingLink(actor_index=2)
    actor = train.actor_for(
        config, PositionVelocityEnv(), torch.device("cpu"), link, 0, networks, agent.FixedPolicy(2 % 2), "NGU"
    )
    actions = [actor.step(timestep(observations[0], first=True))]
    for o in observations[1:]:
        actions.append(actor.step(timestep(o, reward=-1.0)))
    (message,) = link.sent[:1]
    block = message.block
    assert block.extras["policy_index"].tolist() == [0, 0]  # actor 2 of 2 policies plays j = 0
    assert block.extras["previous_action"].tolist() == [0, actions[0]]
    assert block.extras["intrinsic_reward"][0] == 0.0  # first step: masked, 0
    # Step 1 by hand: episodic reward of f(o_1) against {f(o_0)} with the running mean carried on
    # from actor 2's row (4.0 over 1 distance), times the life-long factor.
    e0, e1 = (networks.embedding.embed(torch.tensor([o]))[0] for o in observations[:2])
    d2 = float((e1 - e0).square().sum())
    mean = (4.0 + d2) / 2.0
    episodic = float(exploration.episodic_intrinsic_reward(torch.tensor([[d2]]), mean)[0])
    # life-long factor: 1 + (error - 0) / (error / 2) = 3, within [1, 5]
    assert block.extras["intrinsic_reward"][1] == pytest.approx(episodic * 3.0, rel=1e-4)
    assert message.actor_state["distance_count"] == 1.0 + 1.0  # sent after 2 steps: 1 carried, then k = 1
    assert link.statistics[0]["epsilon"] == pytest.approx(exploration.apex_actor_epsilon(2, 3))
    # Retrace's mu(a_t | o_t): epsilon / 3 for a non-greedy action, 1 - epsilon + epsilon / 3 for the greedy
    epsilon = exploration.apex_actor_epsilon(2, 3)
    for mu in block.extras["behaviour_probability"]:
        assert mu == pytest.approx(epsilon / 3) or mu == pytest.approx(1 - epsilon + epsilon / 3)


def test_actor_i_plays_policy_i_mod_n_and_empties_its_memory_at_each_episode_start():
    config = train.NguConfig(num_actors=4, num_policies=3, burn_in=1, trace_length=2, replay_period=2)
    actor, _ = train.build_actor(
        config, PositionVelocityEnv(), torch.device("cpu"), RecordingLink(actor_index=3), 0
    )
    actor.step(timestep([0.0, 0.0], first=True))
    assert actor.statistics["policy_index"] == 0.0  # 3 mod 3
    actor.step(timestep([0.5, 0.0], reward=-1.0))
    actor.step(timestep([1.0, 0.0], reward=-1.0, terminated=True))
    assert actor._memory._size == 3
    actor.step(timestep([0.0, 0.0], first=True))
    assert actor._memory._size == 1  # only the new episode's first embedding
    actor, _ = train.build_actor(
        config, PositionVelocityEnv(), torch.device("cpu"), RecordingLink(actor_index=2), 0
    )
    actor.step(timestep([0.0, 0.0], first=True))
    assert actor.statistics["policy_index"] == 2.0


# ----------------------------------------------------------------------------------------------------
# Configuration and bad input


def _config(tmp_path, **overrides) -> train.NguConfig:
    mountain_car = dict(environment_name="MountainCar-v0", max_episode_steps=40, num_policies=2)
    return tiny_config(train.NguConfig, tmp_path, TINY_SEQUENCE_RUN, mountain_car, overrides)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(num_policies=0), "num_policies"),
        (dict(gamma_min=0.999), "gamma_min"),
        (dict(max_lifelong_scale=0.5), "max_lifelong_scale"),
        (dict(num_neighbours=0), "num_neighbours"),
        (dict(embedding_hidden_sizes=()), "embedding_hidden_sizes"),
        (dict(replay_period=9), "replay_period"),
        (dict(auxiliary_steps=-1), "auxiliary_steps"),
        (dict(auxiliary_steps=10, trace_length=9), r"auxiliary_steps must be in \[0, --trace_length=9\]"),
    ],
)
def test_bad_flags_are_config_errors(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, **overrides)


def test_continuous_env_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="discrete"):
        train.main(_config(tmp_path, environment_name="Pendulum-v1"))
    assert not os.path.exists(tmp_path / "runs")


def test_several_envs_per_actor_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="num_envs"):
        train.main(_config(tmp_path, num_envs=2))
    assert not os.path.exists(tmp_path / "runs")


# ----------------------------------------------------------------------------------------------------
# Smoke runs of every script


@pytest.mark.smoke
def test_run_classic_resume_restores_everything_then_eval_agent(tmp_path):
    first, later = train_then_resume(train, functools.partial(_config, tmp_path), "NGU")
    assert first["learner_steps"] > 0
    saved = first["networks"]
    assert float(saved["rnd.normalizer.count"]) > 1 and float(saved["rnd_error.count"]) > 1
    assert float(saved["actor_memory.distance_count"].sum()) > 0  # the actors' rows reached the learner

    # Resuming loads every buffer and parameter exactly (the learner before its first new step).
    learner = train.build_learner(_config(tmp_path), _MountainCarSpaces(), torch.device("cpu")).learner
    learner.load_state_dict(first)
    for name, value in learner.state_dict()["networks"].items():
        torch.testing.assert_close(value, saved[name], rtol=0, atol=0)

    assert later["env_steps"] > first["env_steps"]  # counted on, not restarted
    returns = evaluate_latest(
        eval_agent, tmp_path, environment_name="MountainCar-v0", num_episodes=1, max_episode_steps=40
    )
    assert returns == [-40.0]


class _MountainCarSpaces:
    import gymnasium as _gym

    observation_space = _gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
    action_space = _gym.spaces.Discrete(3)


@pytest.mark.smoke
def test_run_atari_smoke_with_one_actor(tmp_path):
    recurrent_replay_atari_smoke(
        tmp_path,
        "NGU",
        train,
        train.NguConfig,
        run_atari.DEFAULTS,
        eval_agent,
        num_policies=2,
        episodic_memory_capacity=100,
    )


# ----------------------------------------------------------------------------------------------------
# Learning


def test_an_actors_own_statistics_travel_with_its_message_beside_the_links():
    from deep_rl_zoo.runtime.interface import ActorLinkBase

    class Link(ActorLinkBase):
        sent = []

        def should_stop(self):
            return False

        def _transmit(self, message):
            self.sent.append(message)

        def _published_version(self):
            return 0

        def _copy_parameters(self, module):
            return 0

        def _wait_for_version_above(self, version):
            pass

    link = Link(actor_index=5)
    link.send("payload", {"epsilon": 0.4, "policy_index": 3.0})
    (message,) = Link.sent
    assert message.statistics["epsilon"] == 0.4 and message.statistics["policy_index"] == 3.0
    assert "steps_per_second" in message.statistics and message.actor_index == 5


@pytest.mark.learning
def test_ngu_actors_reach_the_mountaincar_flag_within_40k_steps(tmp_path):
    """A milestone short of the issue's target (greedy -150 within 1M env steps, not reached in the
    session that built NGU, see README): with the classic defaults, some training episode of the
    actors reaches MountainCar's flag (an iteration's training mean above -200) within 40k env steps.
    Guards that the whole path runs and learns from sparse reward (actors' novelty, blocks with extras,
    learner); it does not isolate the novelty's advantage: R2D2's epsilon-greedy actors also reach the
    flag at times (measured at load 40-60, flag-reaching training episodes up to ~40k env steps, with 4
    policies: NGU seed 1 32 of 202 (first at 9.4k), seed 2 4 of 99 up to 20k (first at 9.7k); R2D2 seed 1
    11 of 200 (first at 8.1k); with today's 2 policies and 4 actors, NGU seed 1 117 of 564 up to 100k,
    first at 4.8k, iteration means -199.0 and -192.9 at 10k and 20k). Asynchronous actors do not replay
    the same episodes under one seed: one CI run saw no flag in 99 episodes over 20k env steps, so the
    run goes on 10k at a time until the flag, up to 40k. About 1-2 minutes per 10k on a quiet 2-core
    machine (625 learner steps each)."""
    best, iterations = train_until_mountaincar_flag(train, train.NguConfig, "NGU", tmp_path)
    assert best > -200, (
        f"no NGU actor reached MountainCar's flag in {iterations * 10}k env steps (best training mean {best})"
    )


@pytest.mark.parametrize("package", ["ngu", "agent57"])
def test_obscure_probability_reaches_the_actors_environments(tmp_path, monkeypatch, package):
    """--obscure_probability (inherited from R2D2's config) must wrap the actors' envs, not be ignored."""
    import importlib

    from deep_rl_zoo import distributed
    from deep_rl_zoo.drqn.obscured import ObscuredObservation

    module = importlib.import_module(f"deep_rl_zoo.{package}.train")
    seen = {}
    monkeypatch.setattr(
        distributed, "train_distributed", lambda *args, wrap_env=None, **kw: seen.update(w=wrap_env)
    )
    config_class = module.Agent57Config if package == "agent57" else module.NguConfig
    base = dataclasses.asdict(_config(tmp_path, obscure_probability=0.5))
    module.main(config_class(**base))
    assert seen["w"].func is ObscuredObservation and seen["w"].keywords == {"probability": 0.5}


# ----------------------------------------------------------------------------------------------------
# The policy family over few actors


def test_classic_defaults_give_the_greedy_policy_a_noisy_and_a_near_greedy_actor():
    """Actor i plays j = i mod N with the Ape-X epsilon 0.4^(1 + 7 i / 3) of 4 actors. The classic N = 2
    gives j = 0 (the policy evaluated) actors 0 and 2: epsilons 0.4^1 = 0.4 and 0.4^(17/3) ~ 0.0056
    (with N = 4 it had actor 0 alone, epsilon 0.4); j = 1 gets 0.4^(10/3) ~ 0.047 and 0.4^8 ~ 0.00066."""
    config = train.NguConfig()
    assert (config.num_actors, config.num_policies) == (4, 2)
    played = []
    for i in range(4):
        actor, _ = train.build_actor(
            config, PositionVelocityEnv(), torch.device("cpu"), RecordingLink(actor_index=i), 0
        )
        actor.step(timestep([0.0, 0.0], first=True))
        played.append((actor.statistics["policy_index"], actor.statistics["epsilon"]))
    assert [j for j, _ in played] == [0.0, 1.0, 0.0, 1.0]
    assert [eps for _, eps in played] == pytest.approx([0.4, 0.4 ** (10 / 3), 0.4 ** (17 / 3), 0.4**8])
    assert 0.4 ** (17 / 3) == pytest.approx(0.00556, abs=1e-5)
    betas, gammas = train.family_of(dataclasses.asdict(config))
    assert betas == [0.0, 0.3] and gammas == pytest.approx([0.997, 0.99])


def test_atari_ngu_plays_every_policy_and_agent57_keeps_the_papers_32():
    """16 Atari actors: NGU's 8 policies each get 2 actors (j = 0: actors 0 and 8); Agent57's bandit lets
    every actor play any of the paper's 32."""
    from deep_rl_zoo.agent57 import run_atari as agent57_atari

    assert (run_atari.DEFAULTS["num_actors"], run_atari.DEFAULTS["num_policies"]) == (16, 8)
    assert agent57_atari.DEFAULTS["num_policies"] == 32


def test_atari_ngu_uses_ngus_own_table_not_r2d2s():
    config = train.NguConfig(**{**run_atari.DEFAULTS, "environment_name": "MontezumaRevenge"})
    # NGU's table: target copy every 1,500 steps, Adam epsilon 1e-4, no importance-sampling weights,
    # transformed Retrace(0.95) (R2D2's: 2,500, 1e-3, 0.6, 5-step double-Q)
    assert config.target_network_update_period == 1500
    assert config.adam_eps == 1e-4
    assert config.importance_sampling_exponent == 0.0
    assert (config.q_target, config.retrace_lambda) == ("retrace", 0.95)
    assert train.learner_arguments(config, torch.device("cpu"))["retrace"] == agent.RetraceSettings(
        0.95, 0.01
    )


# ----------------------------------------------------------------------------------------------------
# Resuming with other flags


def _saved_run(tmp_path, config) -> None:
    """A checkpoint of a fresh learner at iteration 0, written as a run writes it (no training)."""
    from deep_rl_zoo import main_loop, run_folders

    learner = train.build_learner(config, _MountainCarSpaces(), torch.device("cpu")).learner
    folder = tmp_path / "checkpoints" / "NGU_MountainCar-v0"
    state = main_loop.LoopState()
    state.next_iteration = 1
    run_folders.checkpoint_saver(config, "NGU", "MountainCar-v0", learner, str(folder))(0, state)


@pytest.mark.smoke  # runs train.main (up to the resume), about a second
def test_resuming_with_other_num_actors_is_a_one_line_config_error_before_any_actor(tmp_path):
    """2 actors: 3 memory rows (2 actors + the evaluation actor); resumed with 3 actors the learner has 4."""
    _saved_run(tmp_path, _config(tmp_path))
    with pytest.raises(ConfigError) as raised:
        train.main(_config(tmp_path, num_actors=3, resume=True))
    assert str(raised.value) == (
        "--resume: the checkpoint was trained with --num_actors=2, this run has --num_actors=3; "
        "resume with --num_actors=2"
    )
    assert not os.path.exists(tmp_path / "runs")  # nothing opened, no actor started
    # LSTM input: 128 torso features + N policies + 3 actions + 2 rewards = 135 (N = 2) vs 136 (N = 3)
    with pytest.raises(ConfigError, match=r"q\.lstm\.weight_ih_l0 is \(512, 135\), this run's \(512, 136\)"):
        train.main(_config(tmp_path, num_policies=3, resume=True))


@pytest.mark.parametrize("package", ["ngu", "agent57"])
def test_eval_agent_obscure_probability_wraps_the_evaluation_env(monkeypatch, package):
    """eval_agent --obscure_probability=0.5 evaluates on flickering observations, as R2D2's does."""
    import importlib

    from deep_rl_zoo import evaluation
    from deep_rl_zoo.drqn.obscured import ObscuredObservation

    module = importlib.import_module(f"deep_rl_zoo.{package}.eval_agent")
    seen = {}
    monkeypatch.setattr(evaluation, "evaluate", lambda *args, wrap_env=None, **kw: seen.update(w=wrap_env))
    module.main(eval_agent.NguEvalConfig(environment_name="MountainCar-v0", obscure_probability=0.5))
    assert seen["w"].func is ObscuredObservation and seen["w"].keywords == {"probability": 0.5}
    with pytest.raises(ConfigError, match="obscure_probability"):
        eval_agent.NguEvalConfig(environment_name="MountainCar-v0", obscure_probability=1.5)


def test_learner_checkpoint_keeps_ngus_layout_on_r2d2s_learner(tmp_path):
    """NGU's learner is R2D2's with `networks` in place of `network` and `target_q` of `target_network`:
    the keys and their order are those of checkpoints written before it shared R2D2's code (checked by
    hand on such checkpoints of NGU and Agent57), and a fresh learner takes another's state exactly."""
    from deep_rl_zoo.r2d2.agent import R2d2

    config = _config(tmp_path)
    learner = train.build_learner(config, _MountainCarSpaces(), torch.device("cpu")).learner
    assert isinstance(learner, R2d2) and learner.network is learner.networks.q
    state = learner.state_dict()
    expected = [
        "networks",
        "target_q",
        "optimizer",
        "env_steps",
        "learner_steps",
        "update_credit",
        "replay_rng",
    ]
    assert list(state) == expected
    assert sorted(state["target_q"]) == sorted(n[2:] for n in state["networks"] if n.startswith("q."))
    assert {n.split(".")[0] for n in state["networks"]} == {
        "q",
        "embedding",
        "rnd",
        "rnd_error",
        "actor_memory",
    }
    state["learner_steps"], state["env_steps"], state["update_credit"] = 7, 112, 0.5
    with torch.no_grad():
        state["target_q"]["head.bias"] += 1.0  # the target differs from the online network
    other = train.build_learner(config, _MountainCarSpaces(), torch.device("cpu")).learner
    other.load_state_dict(state)
    assert (other.learner_steps, other.statistics["env_steps_received"]) == (7, 112)
    torch.testing.assert_close(other.target_q.head.bias, state["target_q"]["head.bias"], rtol=0, atol=0)
    torch.testing.assert_close(other.networks.q.head.bias, learner.networks.q.head.bias, rtol=0, atol=0)
