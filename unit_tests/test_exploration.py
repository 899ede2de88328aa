"""NGU's episodic and life-long novelty, its policy family, and Agent57's bandit, by hand."""

import math

import numpy as np
import pytest
import torch

from deep_rl_zoo import exploration


def test_episodic_reward_of_a_state_seen_twice_before():
    # two identical neighbours: d = max(0 - 0.008, 0) = 0, K = 1e-4 / (0 + 1e-4) = 1 each
    # s = sqrt(1 + 1) + 0.001 = 1.415214; r = 1 / s = 0.706607
    r = exploration.episodic_intrinsic_reward(torch.tensor([[0.0, 0.0]]), 1.0)
    torch.testing.assert_close(r, torch.tensor([1.0 / (math.sqrt(2.0) + 0.001)]))


def test_episodic_reward_of_a_novel_state():
    # d^2 = 1.008 with running mean 1: d = 1.008 - 0.008 = 1, K = 1e-4 / 1.0001 each
    # s = sqrt(2 * 1e-4 / 1.0001) + 0.001 = 0.0151414; r = 66.045
    r = exploration.episodic_intrinsic_reward(torch.tensor([[1.008, 1.008]]), 1.0)
    expected = 1.0 / (math.sqrt(2e-4 / 1.0001) + 0.001)
    torch.testing.assert_close(r, torch.tensor([expected]))


def test_episodic_reward_is_zero_past_the_maximum_similarity():
    # 100 identical neighbours: s = sqrt(100) + 0.001 = 10.001 > 8, so no bonus at all
    r = exploration.episodic_intrinsic_reward(torch.zeros(1, 100), 1.0)
    assert r.item() == 0.0


def test_episodic_reward_does_not_depend_on_the_embedding_scale():
    distances = torch.tensor([[0.5, 2.0, 3.0], [0.1, 0.2, 0.3]])
    means = torch.tensor([1.5, 0.2])
    r = exploration.episodic_intrinsic_reward(distances, means)
    torch.testing.assert_close(exploration.episodic_intrinsic_reward(distances * 10, means * 10), r)


def test_lifelong_factor_is_clipped_between_one_and_L():
    errors = torch.tensor([0.5, 3.0, 10.0])
    # alpha = 1 + (err - 1) / 1 = 0.5, 3, 10 -> clipped to [1, 5]
    torch.testing.assert_close(
        exploration.lifelong_novelty_factor(errors, error_mean=1.0, error_std=1.0),
        torch.tensor([1.0, 3.0, 5.0]),
    )


def test_policy_family_ends_and_middle():
    betas, gammas = exploration.policy_family(32, beta=0.3, gamma_max=0.997, gamma_min=0.99)
    assert betas[0] == 0.0 and betas[31] == 0.3
    # j = 15: 10 * (30 - 30) / 30 = 0, sigmoid(0) = 0.5, beta = 0.15
    assert betas[15] == pytest.approx(0.15)
    assert gammas[0] == pytest.approx(0.997) and gammas[31] == pytest.approx(0.99)
    assert all(g1 > g2 for g1, g2 in zip(gammas, gammas[1:], strict=False))
    assert all(b1 <= b2 for b1, b2 in zip(betas, betas[1:], strict=False))


def test_policy_family_of_three():
    betas, gammas = exploration.policy_family(3, beta=0.3, gamma_max=0.997, gamma_min=0.99)
    # j = 1: beta * sigmoid(10 * (2 - 1) / 1) = 0.3 / (1 + e^-10)
    assert betas == pytest.approx([0.0, 0.3 / (1.0 + math.exp(-10.0)), 0.3])
    # 1 - gamma_1 = exp((log 0.003 + log 0.01) / 2) = sqrt(0.003 * 0.01)
    assert gammas[1] == pytest.approx(1.0 - math.sqrt(0.003 * 0.01))


def test_bandit_tries_every_arm_first():
    rng = np.random.default_rng(0)
    assert exploration.sliding_window_ucb_choice([], [], 3, rng) == 0
    assert exploration.sliding_window_ucb_choice([0, 1], [1.0, 1.0], 3, rng) == 2


def test_bandit_picks_the_best_upper_bound_when_greedy():
    rng = np.random.default_rng(0)
    # counts 2, 1, 1; means (1 + 3) / 2 = 2, 5, 2; bounds 2 + sqrt(1/2), 5 + 1, 2 + 1 -> arm 1
    arm = exploration.sliding_window_ucb_choice([0, 1, 2, 0], [1.0, 5.0, 2.0, 3.0], 3, rng, epsilon=0.0)
    assert arm == 1


def test_bandit_forgets_episodes_outside_its_window():
    rng = np.random.default_rng(0)
    # window 3 sees arms 2, 0, 2 only: arm 1 is unplayed within the window, so it is played
    arm = exploration.sliding_window_ucb_choice([0, 1, 2, 0, 2], [9.0, 1.0, 1.0, 0.0, 1.0], 3, rng, window=3)
    assert arm == 1


def test_bandit_explores_uniformly_with_probability_epsilon():
    rng = np.random.default_rng(0)
    arms, returns = [0, 1, 2], [0.0, 100.0, 0.0]  # greedy would always pick arm 1
    picks = [exploration.sliding_window_ucb_choice(arms, returns, 3, rng, epsilon=1.0) for _ in range(300)]
    assert set(picks) == {0, 1, 2}
    greedy = [exploration.sliding_window_ucb_choice(arms, returns, 3, rng, epsilon=0.0) for _ in range(20)]
    assert set(greedy) == {1}
