"""Tests of replay.SumTree and replay.PrioritizedReplay: worked examples, invariants after many random
updates, and sampling frequencies against a naive O(N) proportional sampler."""

import numpy as np
import pytest

from deep_rl_zoo import replay


def _chi_square_limit(dof: int, z: float = 3.09) -> float:
    """The 99.9% quantile of chi-square with `dof` degrees of freedom (Wilson-Hilferty; z = 3.09 is the
    standard normal's 99.9% quantile). For dof = 49 it is 85.3."""
    return dof * (1 - 2 / (9 * dof) + z * np.sqrt(2 / (9 * dof))) ** 3


def _chi_square(observed: np.ndarray, expected: np.ndarray) -> float:
    return float(np.sum((observed - expected) ** 2 / expected))


def _tree(values, branching=32) -> replay.SumTree:
    tree = replay.SumTree(len(values), branching=branching)
    tree.set(np.arange(len(values)), np.array(values, dtype=np.float64))
    return tree


@pytest.mark.parametrize("branching", [2, 3, 32])
def test_find_worked_example(branching):
    # values 1, 2, 3, 0 -> prefix sums 1, 3, 6, 6: slot 0 owns [0, 1), slot 1 [1, 3), slot 2 [3, 6).
    tree = _tree([1.0, 2.0, 3.0, 0.0], branching)
    assert tree.total == 6.0  # 1 + 2 + 3 + 0
    found = tree.find(np.array([0.0, 0.99, 1.0, 2.99, 3.0, 5.99]))
    np.testing.assert_array_equal(found, [0, 0, 1, 1, 2, 2])


@pytest.mark.parametrize("branching", [2, 32])
def test_find_never_returns_an_empty_slot_even_at_the_total(branching):
    # A target rounded up to the total (6) must not fall into slot 3, which holds 0.
    tree = _tree([1.0, 2.0, 3.0, 0.0], branching)
    np.testing.assert_array_equal(tree.find(np.array([6.0, 6.0 + 1e-9])), [2, 2])
    # Leading zeros: target 0 must skip slots 0 and 1 (0 + 0 <= 0 < 0 + 0 + 5).
    np.testing.assert_array_equal(_tree([0.0, 0.0, 5.0], branching).find(np.array([0.0])), [2])


@pytest.mark.parametrize("capacity", [1, 2, 5, 8, 13, 40])
@pytest.mark.parametrize("branching", [2, 4])
def test_capacities_that_are_not_powers_of_the_branching(capacity, branching):
    values = np.arange(1, capacity + 1, dtype=np.float64)  # 1, 2, ..., capacity
    tree = _tree(values, branching)
    assert tree.total == capacity * (capacity + 1) / 2
    # The left edge of slot k is 1 + 2 + ... + k = k (k + 1) / 2.
    left_edges = np.array([k * (k + 1) / 2 for k in range(capacity)])
    np.testing.assert_array_equal(tree.find(left_edges), np.arange(capacity))


@pytest.mark.parametrize("branching", [2, 32])
def test_invariants_after_many_random_batched_updates(branching):
    rng = np.random.default_rng(0)
    capacity = 1000  # 10 levels below the root for K = 2, 2 for K = 32
    tree = replay.SumTree(capacity, branching)
    naive = np.zeros(capacity)
    for step in range(1500):
        indices = rng.integers(0, capacity, size=32)  # repeats included: the last value wins
        values = rng.exponential(size=32) * (rng.random(32) > 0.1)  # some zeros
        if step % 3 == 0:
            tree._set_one(int(indices[0]), float(values[0]))  # the single-item path of `add`
            indices, values = indices[:1], values[:1]
        else:
            tree.set(indices, values)
        for index, value in zip(indices, values, strict=True):
            naive[index] = value
    np.testing.assert_array_equal(tree.values(), naive)
    # Every internal node is exactly the sum of its children (recomputed, never patched by deltas).
    for depth, children in enumerate(tree._children):
        parents = tree._levels[depth]
        np.testing.assert_array_equal(parents[: len(children)], children.sum(axis=1))
        assert np.all(parents[len(children) :] == 0)  # padding of a level has no children
    assert tree.total == pytest.approx(naive.sum(), rel=1e-12)
    assert np.all(tree._levels[-1][capacity:] == 0)  # padding slots stay empty
    # Prefix-sum search agrees with a linear scan of the naive array.
    targets = rng.random(500) * naive.sum()
    expected = np.searchsorted(np.cumsum(naive), targets, side="right")
    np.testing.assert_array_equal(tree.find(targets), expected)


def test_bad_input_raises():
    tree = replay.SumTree(4)
    with pytest.raises(ValueError, match="indices"):
        tree.set(np.array([4]), np.array([1.0]))
    with pytest.raises(ValueError, match="indices"):
        tree.set(np.array([0.5]), np.array([1.0]))
    with pytest.raises(ValueError, match=">= 0"):
        tree.set(np.array([0]), np.array([-1.0]))
    with pytest.raises(ValueError, match="finite"):
        tree.set(np.array([0]), np.array([np.nan]))
    with pytest.raises(ValueError, match="all 0"):
        tree.find(np.array([0.0]))


# ---------------------------------------------------------------------------------------------------
# PrioritizedReplay


def _filled_replay(capacity, num_items, priority_exponent=1.0, seed=0):
    memory = replay.PrioritizedReplay(capacity, priority_exponent, rng=np.random.default_rng(seed))
    for i in range(num_items):
        memory.add(replay.Transition(np.float32(i), i, np.float32(0), np.float32(1), np.float32(i + 1)))
    return memory


def test_new_items_get_the_maximum_priority_seen():
    memory = _filled_replay(capacity=4, num_items=2)
    np.testing.assert_array_equal(memory.priorities(), [1.0, 1.0])  # nothing seen yet: 1
    memory.update_priorities(np.array([0, 1]), np.array([5.0, 0.5]))
    memory.add(replay.Transition(np.float32(2), 2, np.float32(0), np.float32(1), np.float32(3)))
    np.testing.assert_array_equal(memory.priorities(), [5.0, 0.5, 5.0])  # max(1, 5, 0.5) = 5
    memory.update_priorities(np.array([0]), np.array([0.1]))  # the maximum is a running maximum
    memory.add(replay.Transition(np.float32(3), 3, np.float32(0), np.float32(1), np.float32(4)))
    assert memory.priorities()[3] == 5.0


def test_priority_exponent_and_importance_weights_worked_example():
    # alpha = 1, priorities 1 and 3: P = 1/4 and 3/4, N = 2.
    # w = (N P)^-beta with beta = 1: (2 * 1/4)^-1 = 2 and (2 * 3/4)^-1 = 2/3; / max = 1 and 1/3.
    memory = _filled_replay(capacity=2, num_items=2)
    memory.update_priorities(np.array([0, 1]), np.array([1.0, 3.0]))
    sample = memory.sample(2, importance_sampling_exponent=1.0)
    # Stratified: the draw in [0, 2) hits slot 0 ([0, 1)) or 1, the draw in [2, 4) always slot 1.
    assert sample.indices[1] == 1
    weights = {int(i): float(w) for i, w in zip(sample.indices, sample.weights, strict=True)}
    if 0 in weights:
        assert weights[0] == pytest.approx(1.0) and weights[1] == pytest.approx(1 / 3)
    else:
        assert weights[1] == pytest.approx(1.0)  # a batch of one item only: w / max(w) = 1
    assert sample.weights.dtype == np.float32 and sample.weights.max() == pytest.approx(1.0)
    # alpha = 0.5 stores sqrt(priority): 9 -> 3.
    half = _filled_replay(capacity=2, num_items=2, priority_exponent=0.5)
    half.update_priorities(np.array([0, 1]), np.array([9.0, 1.0]))
    np.testing.assert_allclose(half.priorities(), [3.0, 1.0])


def test_beta_zero_gives_unit_weights_and_items_match_their_indices():
    memory = _filled_replay(capacity=8, num_items=8)
    memory.update_priorities(np.arange(8), np.arange(1.0, 9.0))
    sample = memory.sample(5, importance_sampling_exponent=0.0)
    np.testing.assert_array_equal(sample.weights, np.ones(5, dtype=np.float32))
    np.testing.assert_array_equal(sample.items.a_tm1, sample.indices)  # item i was added with a_tm1 = i


def test_sampling_frequencies_agree_with_a_naive_proportional_sampler():
    rng = np.random.default_rng(1)
    capacity, alpha, batch_size, num_batches = 50, 0.6, 32, 3000
    memory = _filled_replay(capacity, capacity, priority_exponent=alpha, seed=2)
    priorities = rng.exponential(size=capacity) + 0.01
    memory.update_priorities(np.arange(capacity), priorities)
    tree_counts = np.zeros(capacity)
    for _ in range(num_batches):
        np.add.at(tree_counts, memory.sample(batch_size).indices, 1)

    # The naive sampler: a full O(N) normalisation and draw, exactly P(i) = p_i^alpha / sum p^alpha.
    probabilities = priorities**alpha / np.sum(priorities**alpha)
    naive_counts = np.bincount(
        rng.choice(capacity, size=batch_size * num_batches, p=probabilities), minlength=capacity
    )
    # Both against the exact proportions, and against each other (chi-square tests, 0.1% false alarms).
    limit = _chi_square_limit(capacity - 1)
    expected = probabilities * batch_size * num_batches
    assert _chi_square(tree_counts, expected) < limit
    assert _chi_square(naive_counts, expected) < limit
    pooled = (tree_counts + naive_counts) / 2  # two-sample test: equal totals, so each expects the mean
    assert _chi_square(tree_counts, pooled) + _chi_square(naive_counts, pooled) < limit
    # The test has power: a uniform sampler's counts would fail it by far.
    assert _chi_square(np.full(capacity, batch_size * num_batches / capacity), expected) > 10 * limit


def test_sampling_is_proportional_not_uniform():
    # Guard against a sampler that ignores priorities: slot 1 has 99% of the mass.
    memory = _filled_replay(capacity=2, num_items=2)
    memory.update_priorities(np.array([0, 1]), np.array([1.0, 99.0]))
    counts = np.bincount(np.concatenate([memory.sample(2).indices for _ in range(500)]), minlength=2)
    assert counts[1] > 0.95 * counts.sum()


def test_an_overwritten_slot_gets_the_maximum_priority_again():
    memory = _filled_replay(capacity=2, num_items=2)
    memory.update_priorities(np.array([0, 1]), np.array([4.0, 0.5]))
    memory.update_priorities(np.array([0]), np.array([0.25]))
    memory.add(replay.Transition(np.float32(9), 9, np.float32(0), np.float32(1), np.float32(10)))  # slot 0
    np.testing.assert_array_equal(memory.priorities(), [4.0, 0.5])
    assert memory.size == 2 and memory.capacity == 2


def test_replay_bad_input_raises():
    memory = _filled_replay(capacity=4, num_items=2)
    with pytest.raises(ValueError, match="batch_size"):
        memory.sample(3)
    with pytest.raises(ValueError, match="not stored"):
        memory.update_priorities(np.array([3]), np.array([1.0]))
    with pytest.raises(ValueError, match="finite"):
        memory.update_priorities(np.array([0]), np.array([np.inf]))
    with pytest.raises(ValueError, match="shape"):
        memory.update_priorities(np.array([0, 1]), np.array([1.0]))
    with pytest.raises(ValueError, match="empty"):
        replay.PrioritizedReplay(4, 0.6, rng=np.random.default_rng(0)).sample(1)


def test_nbytes_counts_the_tree():
    memory = _filled_replay(capacity=5, num_items=1)
    uniform = replay.UniformReplay(5, rng=np.random.default_rng(0))
    uniform.add(replay.Transition(np.float32(0), 0, np.float32(0), np.float32(1), np.float32(1)))
    assert memory.nbytes == uniform.nbytes + (1 + 32) * 8  # root + one padded level of 32 float64
    # At 1M slots the tree costs about 8 bytes a slot: 1M leaves (padded to 32) + 1/32 of that above.
    assert replay.SumTree(1_000_000).nbytes < 8.5e6
