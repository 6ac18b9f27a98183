"""Index arithmetic on torch tensors shared by the kernels (`search.arrays` is its
numpy counterpart for the search layer)."""

from __future__ import annotations

import torch


def concatenated_ranges(starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """`(sum(ends - starts),)` the integers of each half-open range, concatenated, without a
    Python loop."""
    lengths = ends - starts
    offsets = torch.cumsum(lengths, 0) - lengths
    return torch.repeat_interleave(starts - offsets, lengths) + torch.arange(int(lengths.sum()))
