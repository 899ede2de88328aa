"""Bytes per stored env step of R2D2's Atari replay (`sequence_replay.PrioritizedSequenceReplay`).

Builds the replay with run_atari's shapes (84x84 frames, stacks of 4 kept as single frames, sequences
of 40 + 80 + 1 steps, a new one every 40, an LSTM state of 2 x 512 float32 per sequence), fills it past capacity
with blocks from 16 interleaved actors, and prints the bytes it allocated per env step it holds, next
to the 7,056 bytes of one frame. Exits with status 1 above 110% of that.

    python benchmarks/r2d2_replay_memory.py [--capacity=40000]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

try:
    from deep_rl_zoo.sequence_replay import PrioritizedSequenceReplay, SequenceBlock
except ImportError:  # run as a script from a checkout that was not `pip install -e`-ed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deep_rl_zoo.sequence_replay import PrioritizedSequenceReplay, SequenceBlock

FRAME_BYTES = 84 * 84


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=40_000, help="env steps the replay holds")
    parser.add_argument("--sequence_length", type=int, default=121, help="T = burn-in + trace length + 1")
    parser.add_argument("--replay_period", type=int, default=40, help="steps between sequence starts")
    parser.add_argument("--lstm_size", type=int, default=512)
    parser.add_argument("--num_actors", type=int, default=16)
    args = parser.parse_args()
    period = args.replay_period
    rng = np.random.default_rng(0)
    replay = PrioritizedSequenceReplay(
        args.capacity, args.sequence_length, 0.9, rng, stack_size=4, period=period
    )
    frames = rng.integers(0, 256, (period, 84, 84), dtype=np.uint8)
    state = (np.zeros(args.lstm_size, np.float32), np.zeros(args.lstm_size, np.float32))
    flags = np.zeros(period, bool)
    for j in range(args.capacity // period * 2):
        replay.add_block(
            SequenceBlock(
                j % args.num_actors,
                frames,
                np.zeros(period, np.int64),
                np.zeros(period, np.float32),
                flags,
                flags,
                flags,
                state,
            )
        )
    replay.sample(64, 0.6)  # one batch of stacks rebuilt, as the learner does
    per_step = replay.nbytes / replay.num_steps
    print(
        f"capacity {args.capacity} env steps, {replay.num_sequences} live sequences of {args.sequence_length}: "
        f"{replay.nbytes / 1e6:.1f} MB, {per_step:.0f} bytes per env step "
        f"({per_step / FRAME_BYTES:.3f} x the {FRAME_BYTES} bytes of one frame)"
    )
    return 0 if per_step <= 1.10 * FRAME_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())
