"""Pretrained agents: a training checkpoint slimmed to what playing needs.

    python -m deep_rl_zoo.pretrained --checkpoint=checkpoints/PPO_Pong/PPO_Pong_best.ckpt \
        --output=pretrained/PPO_Pong_s1.ckpt
    python -m deep_rl_zoo.ppo.eval_agent --environment_name=Pong --load_checkpoint_file=pretrained/PPO_Pong_s1.ckpt

A pretrained file is an ordinary zoo checkpoint (same format, same safe loader, same agent and
environment checks), so every `eval_agent` plays it as it plays a training checkpoint. What it drops:
the optimiser's state, random-number-generator states and the main loop's resume state (so it cannot be
resumed, only played and fine-tuned from scratch), and the run's machine-specific paths. What it keeps:
every network's weights, normalisers' statistics and the run's flags, from which evaluation rebuilds the
network. Layer weights are stored in float16 unless `--nofloat16`; they are cast back to the
network's float32 when loaded (buffers such as normalisers' statistics stay float32) (`load_state_dict` copies across dtypes), and the file records that it was
converted. A Nature-CNN agent is about 3.4 MB in float16.
"""

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import torch

from deep_rl_zoo import checkpoint
from deep_rl_zoo.errors import CheckpointError

# Agent-state entries that only training needs. Everything else in a checkpoint's "agent" is kept.
TRAINING_ONLY_KEYS = ("optimizer", "optimizers", "rng", "replay", "env_steps", "learner_steps")
# Run flags that name folders on the machine that trained the agent: meaningless elsewhere.
MACHINE_PATH_FLAGS = ("runs_dir", "checkpoint_dir", "results_csv_path", "video_dir", "load_checkpoint_file")


def _is_training_only(key: str) -> bool:
    return key in TRAINING_ONLY_KEYS or "optimizer" in key or key.endswith("_rng")


def _is_layer_weight(key: str) -> bool:
    """Layer parameters (`conv.weight`, `lstm.bias_hh_l0`, `noisy.weight_sigma`) go to float16 with little
    loss; buffers such as a normaliser's running count (which overflows float16 past 65,504) stay."""
    return key.rsplit(".", 1)[-1].startswith(("weight", "bias"))


def _slim(value: Any, float16: bool, key: str = "") -> Any:
    """Drops training-only entries of nested dicts; casts layer weights to float16 if asked."""
    if isinstance(value, dict):
        return {k: _slim(v, float16, str(k)) for k, v in value.items() if not _is_training_only(str(k))}
    if isinstance(value, list | tuple):
        return type(value)(_slim(v, float16, key) for v in value)
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().clone()
        if float16 and value.dtype == torch.float32 and _is_layer_weight(key):
            return value.half()
        return value
    return value


def slim_payload(payload: dict, float16: bool = True) -> dict:
    """The pretrained version of a loaded checkpoint payload (see the module docstring)."""
    config = {k: v for k, v in payload.get("config", {}).items() if k not in MACHINE_PATH_FLAGS}
    return {
        "format": payload["format"],
        "agent_name": payload["agent_name"],
        "environment_name": payload["environment_name"],
        "iteration": payload.get("iteration", 0),
        "agent": _slim(payload["agent"], float16),
        "loop": {"pretrained": True, "float16": float16},
        "config": config,
    }


def export(source: str, output: str, float16: bool = True) -> dict:
    """Writes the pretrained version of checkpoint file `source` to `output` (atomically); returns it."""
    if not os.path.isfile(source):
        raise CheckpointError(f"no checkpoint file at {source}")
    try:
        payload = torch.load(source, map_location="cpu", weights_only=True)
    except Exception as e:  # same refusal as checkpoint.load_checkpoint: never unpickle objects
        raise CheckpointError(f"{source} is truncated or not a checkpoint ({type(e).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != checkpoint.FORMAT:
        raise CheckpointError(f"{source} is not a Deep RL Zoo checkpoint")
    slim = slim_payload(payload, float16)
    checkpoint.save_checkpoint(
        output,
        slim["agent_name"],
        slim["environment_name"],
        slim["iteration"],
        slim["agent"],
        slim["loop"],
        slim["config"],
    )
    return slim


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m deep_rl_zoo.pretrained",
        description="Slim a training checkpoint to a pretrained agent: weights only, float16.",
    )
    parser.add_argument("--checkpoint", required=True, help="The training checkpoint (.ckpt) to export.")
    parser.add_argument("--output", required=True, help="Where to write the pretrained file (.ckpt).")
    parser.add_argument(
        "--float16", action=argparse.BooleanOptionalAction, default=True, help="Store weights in float16."
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.output.endswith(checkpoint.SUFFIX):
        print(f"error: --output must end in {checkpoint.SUFFIX}, got {args.output}", file=sys.stderr)
        return 2
    try:
        slim = export(args.checkpoint, args.output, args.float16)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    size_mb = os.path.getsize(args.output) / 2**20
    print(
        f"wrote {args.output}: {slim['agent_name']} on {slim['environment_name']}, iteration "
        f"{slim['iteration']}, {size_mb:.1f} MB ({'float16' if args.float16 else 'float32'} weights)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
