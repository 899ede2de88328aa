"""Memory of a 1M-transition Atari replay built the way the agents build it.

A FrameStackStore of 84x84 uint8 frames (sized by `frame_store_capacity`) plus a UniformReplay of
`Transition`s whose states are int64 frame handles, int64 actions and float32 rewards and
discounts. Fills a few thousand transitions from fake episodes, rebuilds one batch of stacks, and
prints the bytes allocated against the naive layout that stores both 4-frame stacks of every
transition (1M * 2 * 4 * 84 * 84 bytes = 56.4 GB). Exits with status 1 if the allocation exceeds
7.5 GB (1 GB = 1e9 bytes).

    python benchmarks/atari_replay_memory.py [--capacity=1000000]
"""

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

try:
    from deep_rl_zoo import replay, types_
except ImportError:  # run as a script from a checkout that was not `pip install -e`-ed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deep_rl_zoo import replay, types_

FRAME_SHAPE = (84, 84)
STACK_SIZE = 4
N_STEP = 3
LIMIT_GB = 7.5


def _rss_gb() -> tuple[float, float]:
    """Current and peak resident set size of this process, in GB."""
    current = float("nan")
    try:
        with open("/proc/self/statm") as statm:
            current = int(statm.read().split()[1]) * resource.getpagesize() / 1e9
    except OSError:
        pass
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    return current, peak_kb * 1024 / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000, help="Replay capacity in transitions.")
    parser.add_argument("--num_steps", type=int, default=5_000, help="Env steps of fake episodes to add.")
    parser.add_argument("--batch_size", type=int, default=32, help="Batch size of the sample check.")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    store_capacity = replay.frame_store_capacity(args.capacity, N_STEP, STACK_SIZE)
    store = replay.FrameStackStore(store_capacity, FRAME_SHAPE, STACK_SIZE)
    buffer = replay.UniformReplay(args.capacity, rng)
    accumulator = replay.TransitionAccumulator(N_STEP, 0.99)

    start = time.perf_counter()
    frames = rng.integers(0, 256, size=(256, *FRAME_SHAPE), dtype=np.uint8)  # reused, to be fast
    first = True
    for step in range(args.num_steps):
        last = not first and rng.random() < 1 / 500  # episodes of ~500 env steps
        handle = store.add(frames[step % len(frames)], first)
        timestep = types_.TimeStep(
            observation=frames[0], reward=1.0, terminated=last, truncated=False, first=first, info={}
        )
        action = None if last else np.int64(rng.integers(0, 18))
        for transition in accumulator.step(timestep, handle, action):
            buffer.add(transition)
        first = last
    batch = buffer.sample(min(args.batch_size, buffer.size))
    s_tm1, s_t = store.stacks(batch.s_tm1), store.stacks(batch.s_t)
    elapsed = time.perf_counter() - start
    assert s_tm1.shape == s_t.shape == (len(batch.s_tm1), STACK_SIZE, *FRAME_SHAPE)

    frame_bytes = FRAME_SHAPE[0] * FRAME_SHAPE[1]
    allocated = store.nbytes + buffer.nbytes
    naive = args.capacity * 2 * STACK_SIZE * frame_bytes
    rss, peak_rss = _rss_gb()
    print(
        f"replay capacity          {args.capacity:,} transitions ({buffer.size:,} filled in {elapsed:.2f} s)"
    )
    print(f"frame store              {store.capacity:,} frames of {FRAME_SHAPE}: {store.nbytes / 1e9:.3f} GB")
    print(
        f"transition arrays        {buffer.nbytes / 1e9:.3f} GB ({buffer.nbytes // args.capacity} bytes each)"
    )
    print(f"allocated (sum nbytes)   {allocated / 1e9:.3f} GB")
    print(f"naive 4-stack x 2 layout {naive / 1e9:.3f} GB ({naive / allocated:.1f}x more)")
    print(f"process RSS              {rss:.3f} GB now, {peak_rss:.3f} GB peak (untouched pages uncommitted)")
    if allocated > LIMIT_GB * 1e9:
        print(f"FAIL: {allocated / 1e9:.3f} GB allocated > {LIMIT_GB} GB", file=sys.stderr)
        return 1
    print(f"OK: {allocated / 1e9:.3f} GB <= {LIMIT_GB} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
