"""Speed of prioritized replay at 1M capacity: sampling a batch of 32 and updating its 32 priorities.

Fills a `PrioritizedReplay` of 1M small transitions (CartPole-sized states; the cost of sampling does
not depend on the item size beyond copying the batch out), gives every item a random priority, then
times `sample(32)` + `update_priorities(32)` on the sum tree against a naive O(N) proportional sampler
(normalise all N priorities, cumulative sum, binary search, write 32 priorities back). Also prints
how long one numpy call on 32 numbers takes, because on a busy shared machine every figure scales
with it. Exits with status 1 if the sum tree's sample + update exceeds --limit_ms.

    python benchmarks/prioritized_replay_speed.py [--capacity=1000000] [--batch_size=32]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

try:
    from deep_rl_zoo import replay
except ImportError:  # run as a script from a checkout that was not `pip install -e`-ed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deep_rl_zoo import replay


def _microseconds_per_call(fn, seconds: float = 2.0) -> float:
    """Median over repeated timings of `fn` (robust to other processes stealing the CPU)."""
    timings = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(timings) < 5:
        start = time.perf_counter()
        fn()
        timings.append(time.perf_counter() - start)
    return float(np.median(timings)) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--priority_exponent", type=float, default=0.6)
    parser.add_argument("--limit_ms", type=float, default=1.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    capacity, batch_size = args.capacity, args.batch_size

    start = time.perf_counter()
    memory = replay.PrioritizedReplay(capacity, args.priority_exponent, rng=np.random.default_rng(1))
    state = np.zeros(4, dtype=np.float32)
    for i in range(capacity):
        memory.add(replay.Transition(state, i % 2, np.float32(1.0), np.float32(0.99), state))
    priorities = rng.exponential(size=capacity) + 1e-3
    memory.update_priorities(np.arange(capacity), priorities)
    fill_s = time.perf_counter() - start

    def tree_step():
        sample = memory.sample(batch_size, importance_sampling_exponent=0.5)
        memory.update_priorities(sample.indices, rng.exponential(size=batch_size))

    naive = priorities**args.priority_exponent  # the naive sampler keeps priority^alpha in a flat array

    def naive_step():
        probabilities = naive / naive.sum()
        indices = np.searchsorted(np.cumsum(probabilities), rng.random(batch_size), side="right")
        indices = np.minimum(indices, capacity - 1)
        weights = (capacity * probabilities[indices]) ** -0.5
        weights /= weights.max()
        naive[indices] = rng.exponential(size=batch_size) ** args.priority_exponent

    numpy_call = _microseconds_per_call(lambda: np.add(priorities[:32], 1.0), seconds=0.5)
    tree_us = _microseconds_per_call(tree_step)
    naive_us = _microseconds_per_call(naive_step)
    print(f"capacity {capacity:,}, batch {batch_size}, filled in {fill_s:.1f} s")
    print(f"one numpy call on 32 numbers: {numpy_call:.2f} us (about 0.5 us on an idle core)")
    print(f"sum tree  sample + update: {tree_us:8.1f} us")
    print(f"naive O(N) sample + update: {naive_us:8.1f} us  ({naive_us / tree_us:.0f}x slower)")
    if tree_us > args.limit_ms * 1000:
        print(f"FAIL: above the {args.limit_ms} ms limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
