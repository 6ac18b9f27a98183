"""Pure pooling functions: tensors in, tensors out.

Dimensions: B batch, T tokens, H hidden size, N items, S segments, d vector size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

POOLING_MODES = ("mean", "cls")


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the token states that the attention mask keeps.

    Args:
        hidden: `(B, T, H)` token states.
        mask: `(B, T)` attention mask, 1 for real tokens and 0 for padding.

    Returns:
        `(B, H)` float32 mean over the unmasked tokens of each row.
    """
    weights = mask.to(torch.float32).unsqueeze(-1)  # (B, T, 1)
    summed = (hidden.to(torch.float32) * weights).sum(dim=1)  # (B, H)
    counts = weights.sum(dim=1).clamp(min=1.0)  # (B, 1)
    return summed / counts


def pool_states(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """`mean` pooling (see `mean_pool`) or `cls` (the first token's state).

    Args:
        hidden: `(B, T, H)` token states.
        mask: `(B, T)` attention mask.
        mode: `mean` or `cls`.

    Returns:
        `(B, H)` float32.
    """
    if mode == "mean":
        return mean_pool(hidden, mask)
    if mode == "cls":
        return hidden[:, 0].to(torch.float32)
    raise ValueError(f"Invalid pooling mode {mode!r}. Valid pooling modes are: {POOLING_MODES}.")


def segment_mean(
    vectors: torch.Tensor,
    segment: torch.Tensor,
    n_segments: int,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Weighted mean of the rows that share a segment id, L2-normalised.

    Args:
        vectors: `(N, d)` rows to pool.
        segment: `(N,)` int64 segment id of each row, in `[0, n_segments)`.
        n_segments: number of output rows `S`.
        weights: optional `(N,)` non-negative weight of each row (default 1).

    Returns:
        `(S, d)` float32; a segment with no rows gives a zero vector.
    """
    if weights is None:
        weights = torch.ones(vectors.shape[0], dtype=torch.float32)
    weighted = vectors.to(torch.float32) * weights.to(torch.float32).unsqueeze(-1)  # (N, d)
    pooled = torch.zeros(n_segments, vectors.shape[1], dtype=torch.float32)  # (S, d)
    pooled.index_add_(0, segment, weighted)
    return F.normalize(pooled, dim=-1)
