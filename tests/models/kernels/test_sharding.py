"""Sharded SDR maths against the one-process reference (`models.kernels.scoring`)."""

from __future__ import annotations

import pytest
import torch

from docsim.models.kernels.scoring import document_scores, normalize_rows, row_stats
from docsim.models.kernels.shard_moments import (
    combine_moments,
    document_best,
    moments_stats,
    row_moments,
    scores_from_best,
)


def split_documents(document_lengths: torch.Tensor, cuts: list[int]) -> list[tuple[int, int]]:
    """Document ranges `[d0, d1)` cut at `cuts`."""
    bounds = [0, *cuts, len(document_lengths)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("cuts", [[], [3], [1, 2, 7], [0, 5, 5]])  # empty shards too
@pytest.mark.parametrize("normalize", [True, False])
def test_sharded_scores_equal_the_whole_collections(
    cuts: list[int], normalize: bool, weighted: bool
) -> None:
    generator = torch.Generator().manual_seed(7)
    document_lengths = torch.randint(1, 5, (9,), generator=generator)  # (D,)
    p = torch.rand(4, int(document_lengths.sum()), generator=generator) * 0.8 + 0.1  # (I, J)
    weights = torch.tensor([0.5, 2.0, 1.0, 0.25]) if weighted else None  # (I,)
    reference_stats = row_stats(p)
    scored = normalize_rows(p, reference_stats) if normalize else p
    reference = document_scores(scored, document_lengths, weights)  # (D,)

    paragraph_start = torch.cat([torch.zeros(1, dtype=torch.long), document_lengths.cumsum(0)])
    parts, bests = [], []
    for d0, d1 in split_documents(document_lengths, cuts):
        block = p[:, paragraph_start[d0] : paragraph_start[d1]]  # (I, J_s)
        parts.append(row_moments(block))
        bests.append(document_best(block, document_lengths[d0:d1]))
    stats = moments_stats(combine_moments(parts))
    torch.testing.assert_close(stats.mean, reference_stats.mean, rtol=0, atol=1e-6)
    torch.testing.assert_close(stats.std, reference_stats.std, rtol=0, atol=1e-6)
    sharded = torch.cat(
        [scores_from_best(b, stats if normalize else None, weights=weights) for b in bests]
    )
    torch.testing.assert_close(sharded, reference, rtol=0, atol=1e-5)
    if weighted:  # the weights change the scores
        assert not torch.allclose(reference, document_scores(scored, document_lengths))
    assert torch.equal(torch.argsort(sharded, stable=True), torch.argsort(reference, stable=True))


def test_moments_of_far_from_zero_values_keep_their_precision() -> None:
    """The pairwise update, not sums of squares: a tiny spread around a large mean."""
    values = 1e4 + torch.arange(12, dtype=torch.float64).reshape(1, 12) * 1e-3
    parts = [row_moments(values[:, :5]), row_moments(values[:, 5:])]
    combined = combine_moments(parts)
    assert combined.count == 12
    torch.testing.assert_close(combined.mean, values.mean(dim=1))
    torch.testing.assert_close(combined.m2 / 12, values.var(dim=1, correction=0))
