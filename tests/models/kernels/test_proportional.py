"""`models.kernels.proportional`: RPRS against its definition, by hand and by a plain reference."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from docsim.models.kernels.alignment import maxsim_scores
from docsim.models.kernels.proportional import (
    nearest_sentences,
    proportional_scores,
    rarity_weights,
)


def rprs_reference(
    nearest: list[list[int]],
    lengths: list[int],
    k1: float,
    b: float,
    weights: list[float] | None = None,
) -> list[float]:
    """rprs written from the definition, one document at a time, in plain Python."""
    weights = weights or [1.0] * len(nearest)
    starts = [sum(lengths[:d]) for d in range(len(lengths))]
    mean = sum(lengths) / len(lengths)
    out = []
    for start, length in zip(starts, lengths, strict=True):
        mine = set(range(start, start + length))
        finding = sum(w for w, row in zip(weights, nearest, strict=True) if mine & set(row))
        found = len(mine & {s for row in nearest for s in row})
        if not found:
            out.append(0.0)
            continue
        dp = found * (k1 + 1) / (found + k1 * (1 - b + b * length / mean))
        out.append(finding / sum(weights) * dp)
    return out


def test_rprs_by_hand() -> None:
    # documents of 2, 3 and 1 sentences: 0-1, 2-4 and 5; two source sentences, n = 2
    nearest = torch.tensor([[0, 2], [0, 3]])
    scores = proportional_scores(nearest, torch.tensor([2, 3, 1]), k1=1.2, b=0.75)
    # document 0: both source sentences find it (QP 1), one sentence found, length = mean:
    # DP = 1 * 2.2 / (1 + 1.2) = 1. Document 1: QP 1, two found, 1.5 times the mean length:
    # DP = 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 1.5)). Document 2: found by none.
    assert scores.tolist() == pytest.approx([1.0, 4.4 / (2 + 1.2 * 1.375), 0.0])
    assert scores.dtype == torch.float64


def test_rprs_equals_the_reference_on_random_evidence() -> None:
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 9, (30,), generator=generator)  # empty documents too
    total = int(lengths.sum())
    nearest = torch.randint(0, total, (12, 5), generator=generator)
    for k1, b in ((1.2, 0.75), (0.5, 1.0), (2.0, 0.0)):
        got = proportional_scores(nearest, lengths, k1=k1, b=b)
        want = rprs_reference(nearest.tolist(), lengths.tolist(), k1, b)
        assert got.tolist() == pytest.approx(want, rel=1e-12)
        assert not any(math.isnan(x) for x in got.tolist())


@pytest.mark.parametrize("block", [1, 7, 64, 4096])
def test_nearest_sentences_are_the_full_products_best(block: int) -> None:
    generator = torch.Generator().manual_seed(1)
    sentences = F.normalize(torch.randn(200, 16, generator=generator), dim=1)
    sentences[50] = sentences[10]  # a tie: the lower position comes first
    source = F.normalize(torch.randn(9, 16, generator=generator), dim=1)
    source[0] = sentences[10]
    got = nearest_sentences(source, sentences, 6, block_sentences=block)
    full = source @ sentences.T  # (9, 200)
    want = torch.sort(full, dim=1, descending=True, stable=True)
    assert torch.equal(got.positions, want.indices[:, :6])
    assert torch.allclose(got.cosines, want.values[:, :6], atol=1e-6)
    assert got.positions[0, :2].tolist() == [10, 50]
    assert nearest_sentences(source, sentences[:4], 6).positions.shape == (9, 4)  # n > rows


def test_nearest_sentences_keep_to_the_allowed_rows() -> None:
    generator = torch.Generator().manual_seed(2)
    sentences = F.normalize(torch.randn(100, 8, generator=generator), dim=1)
    source = F.normalize(torch.randn(5, 8, generator=generator), dim=1)
    allowed = torch.rand(100, generator=generator) < 0.3
    got = nearest_sentences(source, sentences, 4, allowed=allowed, block_sentences=16)
    kept = allowed.nonzero().squeeze(1)  # (a,)
    within = torch.sort(source @ sentences[kept].T, dim=1, descending=True, stable=True)
    assert torch.equal(got.positions, kept[within.indices[:, :4]])


def test_weighted_rprs_equals_the_reference() -> None:
    generator = torch.Generator().manual_seed(3)
    lengths = torch.randint(1, 6, (20,), generator=generator)
    nearest = torch.randint(0, int(lengths.sum()), (7, 4), generator=generator)
    weights = torch.rand(7, generator=generator, dtype=torch.float64) + 0.1
    got = proportional_scores(nearest, lengths, k1=1.2, b=0.75, weights=weights)
    want = rprs_reference(nearest.tolist(), lengths.tolist(), 1.2, 0.75, weights.tolist())
    assert got.tolist() == pytest.approx(want, rel=1e-12)
    uniform = proportional_scores(nearest, lengths, k1=1.2, b=0.75, weights=torch.full((7,), 3.0))
    assert torch.allclose(uniform, proportional_scores(nearest, lengths, k1=1.2, b=0.75))


def test_rarity_weights_by_hand() -> None:
    # mean nearest cosines 0.9, 0.5 and 0.2: rarities 0.1, 0.5, 0.8 (mean 1.4 / 3), scaled
    cosines = torch.tensor([[1.0, 0.8], [0.6, 0.4], [0.3, 0.1]])
    assert rarity_weights(cosines).tolist() == pytest.approx([0.3 / 1.4, 1.5 / 1.4, 2.4 / 1.4])
    masked = torch.tensor([[0.5, -torch.inf]])  # a masked row counts as cosine 0
    assert rarity_weights(masked).tolist() == pytest.approx([1.0])


def test_rarity_weights_and_weighted_maxsim_by_hand() -> None:
    # 2 source sentences: sentence 0's two nearest at 0.9 and 0.7 (mean 0.8, rarity 0.2),
    # sentence 1's at 0.5 and 0.3 (mean 0.4, rarity 0.6): weights 0.5, 1.5; then maxsim over
    # 3 documents' best matches
    weights = rarity_weights(torch.tensor([[0.9, 0.7], [0.5, 0.3]]))
    assert weights.tolist() == pytest.approx([0.5, 1.5])
    best = torch.tensor([[0.9, 0.1], [0.7, 0.5], [0.2, 0.3]])
    scored = maxsim_scores(best, weights)
    want = [(0.45 + 0.15) / 2, (0.35 + 0.75) / 2, (0.1 + 0.45) / 2]
    assert scored.tolist() == pytest.approx(want)
    assert torch.equal(maxsim_scores(best, torch.ones(2)), maxsim_scores(best))
