"""Shape and dtype checks used on entry to every loss function."""

from collections.abc import Sequence

import torch


def assert_rank_and_dtype(x: torch.Tensor, rank: int, dtype: torch.dtype | None, name: str) -> None:
    """Raises ValueError unless `x` is a tensor of the given rank (and dtype, when given)."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != rank:
        raise ValueError(f"{name} must have rank {rank}, got shape {tuple(x.shape)}")
    if dtype is not None and x.dtype != dtype:
        raise ValueError(f"{name} must have dtype {dtype}, got {x.dtype}")


def assert_batch_dims_equal(tensors: Sequence[torch.Tensor], num_dims: int = 1) -> None:
    """Raises ValueError unless all tensors agree on their leading `num_dims` dimensions."""
    shapes = [tuple(t.shape[:num_dims]) for t in tensors]
    if len(set(shapes)) > 1:
        raise ValueError(f"leading dimensions differ: {shapes}")
