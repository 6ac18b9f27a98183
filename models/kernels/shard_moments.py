"""Exact SDR over a collection split into shards (`models.kernels.scoring` holds the maths).

SDR's z-score needs, per source paragraph i, the mean and standard deviation of P_ij over
every candidate paragraph j; the document score needs max_{j in c} z_ij. Both decompose:

- a shard's paragraphs give its count, mean and sum of squared deviations of each row of P
  (`RowMoments`), and moments of disjoint sets combine exactly (Chan, Golub and LeVeque's
  pairwise update), so the coordinator gets the collection's mean and std from a few numbers
  per source paragraph and shard;
- z is an increasing affine map of P within a row, so max_j z_ij = (max_j P_ij - mu_i) /
  sigma_i: a shard keeps each of its documents' best P per source paragraph `(D_s, I)` and
  scores them once it has mu and sigma.

Two rounds, no approximation beyond floating point, and no vector leaves its shard.
Dimensions: I source paragraphs, J_s a shard's candidate paragraphs, D_s its documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from docsim.models.kernels.scoring import RowStats, weighted_mean


@dataclass(frozen=True)
class RowMoments:
    """Per source paragraph: how many candidate paragraphs, their mean P and the sum of
    squared deviations from it (M2). Float64: they are combined across shards."""

    count: int
    mean: torch.Tensor  # (I,)
    m2: torch.Tensor  # (I,)


def row_moments(paragraph_scores: torch.Tensor) -> RowMoments:
    """The moments of each row of `P` `(I, J_s)`; J_s may be 0 (a shard with nothing left)."""
    p = paragraph_scores.double()
    n = p.shape[1]
    if n == 0:
        zeros = torch.zeros(p.shape[0], dtype=torch.float64)
        return RowMoments(0, zeros, zeros.clone())
    mean = p.mean(dim=1)  # (I,)
    return RowMoments(n, mean, ((p - mean[:, None]) ** 2).sum(dim=1))


def combine_moments(parts: Sequence[RowMoments]) -> RowMoments:
    """The moments of the union of disjoint sets of candidate paragraphs."""
    total = parts[0]
    for part in parts[1:]:
        n = total.count + part.count
        if part.count == 0:
            continue
        if total.count == 0:
            total = part
            continue
        delta = part.mean - total.mean  # (I,)
        total = RowMoments(
            n,
            total.mean + delta * (part.count / n),
            total.m2 + part.m2 + delta**2 * (total.count * part.count / n),
        )
    return total


def moments_stats(moments: RowMoments, dtype: torch.dtype = torch.float32) -> RowStats:
    """The mean and population standard deviation `row_stats` gives for the same P."""
    std = torch.sqrt(moments.m2 / max(moments.count, 1))
    return RowStats(mean=moments.mean.to(dtype), std=std.to(dtype))


def document_best(paragraph_scores: torch.Tensor, document_lengths: torch.Tensor) -> torch.Tensor:
    """`(D_s, I)`: each document's best P per source paragraph; `P` is `(I, J_s)`."""
    if paragraph_scores.shape[1] == 0:
        return paragraph_scores.new_empty(0, paragraph_scores.shape[0])
    return torch.segment_reduce(
        paragraph_scores.T.contiguous(), "max", lengths=document_lengths, axis=0
    )


def scores_from_best(
    best: torch.Tensor,
    stats: RowStats | None,
    eps: float = 1e-6,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """`(D_s,)` SDR document scores from `document_best` `(D_s, I)`: the mean over source
    paragraphs (weighted by `weights` `(I,)` where given, as `scoring.document_scores`) of
    the best z (with `stats`, as `normalize_rows` maps P) or of the best P."""
    if stats is None:
        return weighted_mean(best, weights)
    std = torch.where(stats.std > eps, stats.std, torch.ones_like(stats.std))  # (I,)
    return weighted_mean((best - stats.mean[None, :]) / std[None, :], weights)
