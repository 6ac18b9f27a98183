"""Length-sorted, padded batches of token ids under a token budget.

Sorting by length keeps padding small; the budget (batch size x longest input) keeps every
batch's memory about the same. Rows remember their place in the caller's list, so results
go back in input order.

A few inputs of very different lengths (a posted query's chunks: two of 256 tokens and one of
60) would still be mostly padding in one batch, so on the CPU a batch also ends before an
input that padding would leave more than a quarter empty. A 2-core CPU's cost follows the
padded tokens, and a short batch costs it little more than its own tokens: the 20 AILA
development queries' chunks were 21% padding (4% cut there), and cutting took their
inference from 41.4 to 36.9 ms on average (`benchmarks/query_encoding.py`). A large corpus's
sorted inputs change length slowly, so its batches are cut only where a block's inputs end. A
GPU pays a fixed cost per forward pass, and keeps its batches whole.

Dimensions: B batch, T tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

# Padded tokens and inputs per forward batch where the caller names none. A GPU pays a fixed
# cost per forward pass (kernel launches and host work: about 6 ms for MiniLM on an H200), so
# it wants few, large batches: AILA's 340,178 sentences took 42.6 s at 2,048 tokens a batch
# and 12.1 s at 32,768 there (`benchmarks/device_build.py`). A CPU gains nothing from them.
CPU_BATCHING = (2048, 256)
GPU_BATCHING = (32768, 4096)
# The share of a batch's padded tokens that may be padding (1: any)
CPU_MAX_PADDING = 0.25
GPU_MAX_PADDING = 1.0


def default_batching(device: torch.device) -> tuple[int, int]:
    """`(batch_tokens, max_batch_size)` for a forward pass on `device`."""
    return GPU_BATCHING if device.type == "cuda" else CPU_BATCHING


def default_max_padding(device: torch.device) -> float:
    """How much of an input's padded tokens may be padding on `device` (`plan_batches`)."""
    return GPU_MAX_PADDING if device.type == "cuda" else CPU_MAX_PADDING


@dataclass(frozen=True)
class Batch:
    """One padded batch: `rows` are positions in the caller's input list."""

    rows: np.ndarray  # (B,) int64
    input_ids: torch.Tensor  # (B, T) int64
    attention_mask: torch.Tensor  # (B, T) int64


def plan_batches(
    token_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    batch_tokens: int,
    max_batch_size: int,
    max_padding: float = 1.0,
) -> Iterator[Batch]:
    """Length-sorted (longest first), padded batches whose padded size stays under
    `batch_tokens`, of at most `max_batch_size` inputs (at least one). A batch ends before an
    input shorter than `(1 - max_padding)` times the batch's longest (1: never)."""
    lengths = np.fromiter((len(ids) for ids in token_ids), dtype=np.int64, count=len(token_ids))
    order = np.argsort(-lengths, kind="stable")
    ascending = -lengths[order]  # (n,) minus each length, in batch order
    start = 0
    while start < len(order):
        longest = int(lengths[order[start]])  # sorted descending: the first is the longest
        size = max(1, min(max_batch_size, batch_tokens // max(longest, 1)))
        # the inputs at least (1 - max_padding) * longest long are a prefix of the order
        long_enough = int(np.searchsorted(ascending, -(1 - max_padding) * longest, "right"))
        size = max(1, min(size, long_enough - start))
        rows = order[start : start + size]
        input_ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)  # (B, T)
        attention_mask = torch.zeros((len(rows), longest), dtype=torch.long)  # (B, T)
        for i, row in enumerate(rows):
            ids = token_ids[row]
            input_ids[i, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
            attention_mask[i, : len(ids)] = 1
        yield Batch(rows=rows, input_ids=input_ids, attention_mask=attention_mask)
        start += size
