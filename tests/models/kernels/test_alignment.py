"""Sentence-set matching against plain per-document references: best matches by brute force,
Sinkhorn's plan against a textbook loop in float64, the OT score document by document."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from docsim.models.kernels.alignment import (
    best_pair_scores,
    document_sentence_lengths,
    maxsim_scores,
    ot_scores,
    sentence_best,
    sinkhorn_plan,
)
from docsim.models.kernels.scoring import RaggedCollection


def unit(rows: int, dim: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(rows, dim, generator=generator), dim=1)


def collection(seed: int = 0) -> tuple[RaggedCollection, list[torch.Tensor]]:
    """A ragged collection of 9 documents with 1-4 paragraphs of 1-6 sentences, and each
    document's sentences on their own."""
    rng = np.random.default_rng(seed)
    doc_paragraphs = rng.integers(1, 5, size=9)
    paragraph_lengths = rng.integers(1, 7, size=int(doc_paragraphs.sum()))
    sentences = unit(int(paragraph_lengths.sum()), 16, seed)
    per_doc, row, j = [], 0, 0
    for n_par in doc_paragraphs:
        count = int(paragraph_lengths[j : j + n_par].sum())
        per_doc.append(sentences[row : row + count])
        row, j = row + count, j + n_par
    ragged = RaggedCollection(
        sentences=sentences,
        paragraph_lengths=torch.from_numpy(paragraph_lengths),
        document_lengths=torch.from_numpy(doc_paragraphs),
    )
    return ragged, per_doc


def reference_sinkhorn(cost: np.ndarray, reg: float, iterations: int) -> np.ndarray:
    """Sinkhorn's matrix scaling as in the textbook, float64, uniform masses."""
    n, m = cost.shape
    kernel = np.exp(-cost / reg)
    u, v = np.ones(n), np.ones(m)
    for _ in range(iterations):
        u = (1 / n) / (kernel @ v)
        v = (1 / m) / (kernel.T @ u)
    return u[:, None] * kernel * v[None, :]


def test_document_sentence_lengths_sum_each_documents_paragraphs() -> None:
    ragged, per_doc = collection()
    assert document_sentence_lengths(ragged).tolist() == [len(d) for d in per_doc]


@pytest.mark.parametrize("block", [1, 7, 65536])
def test_sentence_best_equals_brute_force(block: int) -> None:
    ragged, per_doc = collection()
    source = unit(5, 16, 99)
    best = sentence_best(source, ragged, block_sentences=block)  # (D, n)
    expected = torch.stack([(source @ doc.T).max(dim=1).values for doc in per_doc])
    torch.testing.assert_close(best, expected)
    torch.testing.assert_close(maxsim_scores(best), expected.mean(dim=1))
    torch.testing.assert_close(
        best_pair_scores(best), torch.stack([(source @ d.T).max() for d in per_doc])
    )


def test_sinkhorn_plan_equals_the_textbook_loop_and_ignores_padding() -> None:
    rng = np.random.default_rng(3)
    costs = [rng.uniform(0.2, 1.4, size=(4, m)) for m in (6, 2, 5)]
    padded = np.zeros((3, 4, 6))
    mask = np.zeros((3, 6), dtype=bool)
    for b, c in enumerate(costs):
        padded[b, :, : c.shape[1]] = c
        padded[b, :, c.shape[1] :] = 7.0  # padding the plan must not see
        mask[b, : c.shape[1]] = True
    plan = sinkhorn_plan(
        torch.from_numpy(padded), torch.from_numpy(mask), reg=0.1, iterations=200
    ).numpy()
    for b, c in enumerate(costs):
        expected = reference_sinkhorn(c, 0.1, 200)
        np.testing.assert_allclose(plan[b, :, : c.shape[1]], expected, rtol=1e-6, atol=1e-12)
        assert np.all(plan[b, :, c.shape[1] :] == 0)
        np.testing.assert_allclose(plan[b].sum(axis=1), 1 / 4, rtol=1e-6)  # source masses


@pytest.mark.parametrize("block_cells", [1, 40, 4_000_000])
def test_ot_scores_equal_each_document_aligned_alone(block_cells: int) -> None:
    ragged, per_doc = collection(1)
    source = unit(4, 16, 7)
    scores = ot_scores(source, ragged, reg=0.1, iterations=100, block_cells=block_cells)
    for d, doc in enumerate(per_doc):
        sims = (source @ doc.T).double().numpy()
        plan = reference_sinkhorn(1 - sims, 0.1, 100)
        assert scores[d].item() == pytest.approx(float((plan * sims).sum()), rel=1e-5)


def test_ot_prefers_a_document_that_covers_every_source_sentence() -> None:
    """Two source sentences; one document repeats the first, the other holds both: the best
    single pair ties, the alignment does not."""
    source = unit(2, 16, 5)
    repeats = torch.stack([source[0], source[0]])
    covers = torch.stack([source[0], source[1]])
    ragged = RaggedCollection(
        sentences=torch.cat([repeats, covers]),
        paragraph_lengths=torch.tensor([2, 2]),
        document_lengths=torch.tensor([1, 1]),
    )
    best = sentence_best(source, ragged)
    assert best_pair_scores(best)[0] == pytest.approx(best_pair_scores(best)[1].item())
    scores = ot_scores(source, ragged, reg=0.05, iterations=200)
    assert scores[1] > scores[0] + 0.1


def test_a_long_source_gets_shorter_blocks_and_paces_each(monkeypatch) -> None:
    """Each block compares at most `BLOCK_PAIRS` sentence pairs and calls the request's
    pacing hook first (where a long query yields, or stops at its deadline); the best
    matches are the brute-force ones whatever the blocks."""
    from docsim.models.inference.pacing import paced
    from docsim.models.kernels import scoring

    ragged, per_doc = collection(seed=4)
    source = unit(6, 16, 5)
    monkeypatch.setattr(scoring, "BLOCK_PAIRS", 6 * 5)  # 5 rows a block for 6 sources
    seen: list[int] = []
    with paced(seen.append):
        best = sentence_best(source, ragged)
    expected = torch.stack([(source @ doc.T).max(dim=1).values for doc in per_doc])
    torch.testing.assert_close(best, expected)
    lengths = [len(d) for d in per_doc]
    assert sum(seen) == sum(lengths) and len(seen) > 1
    assert all(rows <= 5 or rows in lengths for rows in seen)  # a longer block: one document

    def past_deadline(_rows: int) -> None:
        raise TimeoutError("past its deadline")

    with paced(past_deadline), pytest.raises(TimeoutError):
        sentence_best(source, ragged)


def test_ot_paces_each_sinkhorn_iteration_and_stops_at_the_deadline() -> None:
    """Sinkhorn's iterations ran unpaced: a collection set to 100 million of them kept an `ot`
    search working long past its deadline. Each iteration now calls the request's hook."""
    from docsim.models.inference.pacing import paced

    ragged, per_doc = collection(2)
    source = unit(4, 16, 11)
    seen: list[int] = []
    with paced(seen.append):
        ot_scores(source, ragged, reg=0.1, iterations=30, block_cells=4_000_000)
    sentences = sum(len(doc) for doc in per_doc)
    assert len(seen) == 30 and set(seen) == {sentences}  # one batch: every document at once

    calls: list[int] = []

    def past_deadline(rows: int) -> None:
        calls.append(rows)
        if len(calls) > 5:
            raise TimeoutError("past its deadline")

    with paced(past_deadline), pytest.raises(TimeoutError):
        ot_scores(source, ragged, reg=0.1, iterations=100_000_000)
    assert len(calls) == 6
