"""The vectorised SDR scorer against a plain-Python transcription of the paper's equations."""

from __future__ import annotations

import math
import random

import pytest
import torch
import torch.nn.functional as F

from docsim.models.kernels.scoring import (
    RaggedCollection,
    block_cosines,
    normalize_rows,
    row_stats,
    sdr_scores,
)


def unit(n: int, d: int, gen: torch.Generator) -> torch.Tensor:
    return F.normalize(torch.randn(n, d, generator=gen, dtype=torch.float64), dim=-1)


def reference_scores(
    source: list[list[list[float]]],
    candidates: list[list[list[list[float]]]],
    normalize: bool,
    weights: list[list[float]] | None = None,
) -> list[float]:
    """source[i][k] = vector; candidates[c][j][r] = vector; weights[i][k] = how much source
    sentence k of paragraph i counts (None: 1 each). Plain loops, the paper's steps, with
    each paragraph's P a weighted mean and each document's score weighted by the paragraphs'
    mean weights."""
    w = weights or [[1.0] * len(si) for si in source]

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True))

    P = [
        [
            [
                sum(wk * max(cos(sk, cr) for cr in cj) for sk, wk in zip(si, wi, strict=True))
                / sum(wi)
                for cj in c
            ]
            for c in candidates
        ]
        for si, wi in zip(source, w, strict=True)
    ]  # P[i][c][j]
    if normalize:
        for i, row in enumerate(P):
            values = [v for c in row for v in c]
            mu = sum(values) / len(values)
            sigma = math.sqrt(sum((v - mu) ** 2 for v in values) / len(values))
            P[i] = [[(v - mu) / sigma for v in c] for c in row]
    omega = [sum(wi) / len(wi) for wi in w]  # each paragraph's mean weight
    return [
        sum(omega[i] * max(P[i][c]) for i in range(len(source))) / sum(omega)
        for c in range(len(candidates))
    ]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_scorer_equals_the_equations(normalize: bool, seed: int, weighted: bool) -> None:
    rng, gen, d = random.Random(seed), torch.Generator().manual_seed(seed), 16
    source_lengths = [rng.randint(1, 5) for _ in range(rng.randint(1, 4))]
    doc_shapes = [
        [rng.randint(1, 6) for _ in range(rng.randint(1, 5))] for _ in range(rng.randint(2, 9))
    ]
    source = unit(sum(source_lengths), d, gen)
    sentences = unit(sum(sum(s) for s in doc_shapes), d, gen)
    collection = RaggedCollection(
        sentences=sentences,
        paragraph_lengths=torch.tensor([n for s in doc_shapes for n in s]),
        document_lengths=torch.tensor([len(s) for s in doc_shapes]),
    )
    n = sum(source_lengths)
    weights = torch.rand(n, generator=gen, dtype=torch.float64) * 2 + 0.1 if weighted else None
    # tiny blocks force the chunked path across paragraph boundaries
    got, _ = sdr_scores(
        source,
        torch.tensor(source_lengths),
        collection,
        normalize=normalize,
        block_sentences=3,
        weights=weights,
    )

    def split(rows, lengths):
        out, at = [], 0
        for n in lengths:
            out.append(rows[at : at + n].tolist())
            at += n
        return out

    src = split(source, source_lengths)
    candidates, at = [], 0
    for shape in doc_shapes:
        n = sum(shape)
        candidates.append(split(sentences[at : at + n], shape))
        at += n
    per_paragraph = split(weights[:, None], source_lengths) if weights is not None else None
    want = reference_scores(
        src, candidates, normalize, [[w[0] for w in p] for p in per_paragraph or []] or None
    )
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), atol=1e-5, rtol=1e-5)


def test_fixed_stats_are_used_when_given() -> None:
    gen = torch.Generator().manual_seed(3)
    collection = RaggedCollection(unit(10, 8, gen), torch.tensor([3, 3, 4]), torch.tensor([1, 2]))
    source, lengths = unit(4, 8, gen), torch.tensor([2, 2])
    own, paragraphs = sdr_scores(source, lengths, collection)
    same, _ = sdr_scores(source, lengths, collection, stats=row_stats(paragraphs))
    torch.testing.assert_close(own, same)
    raw, _ = sdr_scores(source, lengths, collection, normalize=False)
    assert not torch.allclose(own, raw)


def test_the_stats_of_no_paragraph_leave_the_scores_as_they_are() -> None:
    """A population of no paragraph (a one-document collection explaining its document) has
    mean 0 and spread 0, not NaN: /explain answered 500 on its NaN score."""
    stats = row_stats(torch.empty(3, 0, dtype=torch.float64))
    assert stats.mean.tolist() == [0.0] * 3 and stats.std.tolist() == [0.0] * 3
    scores = torch.rand(3, 2, dtype=torch.float64)
    assert torch.equal(normalize_rows(scores, stats), scores)


def test_equal_weights_are_the_papers_scoring() -> None:
    gen = torch.Generator().manual_seed(4)
    collection = RaggedCollection(unit(10, 8, gen), torch.tensor([3, 3, 4]), torch.tensor([1, 2]))
    source, lengths = unit(5, 8, gen), torch.tensor([2, 3])
    plain, _ = sdr_scores(source, lengths, collection)
    for scale in (1.0, 2.5):  # weights count relative to each other
        same, _ = sdr_scores(source, lengths, collection, weights=torch.full((5,), scale))
        torch.testing.assert_close(same, plain)
    skewed, _ = sdr_scores(source, lengths, collection, weights=torch.tensor([1, 3, 1, 1, 1]))
    assert not torch.allclose(skewed, plain)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("normalize", [True, False])
def test_scoring_on_the_gpu_equals_the_cpu(normalize: bool) -> None:
    """The service keeps the collection's sentences on the GPU; the query stays on the CPU."""
    gen = torch.Generator().manual_seed(5)
    source, lengths = unit(12, 32, gen), torch.tensor([3, 4, 5])
    paragraphs = torch.randint(1, 6, (300,), generator=gen)
    documents = torch.tensor([30] * 10)
    collection = RaggedCollection(unit(int(paragraphs.sum()), 32, gen), paragraphs, documents)
    on_gpu = RaggedCollection(collection.sentences.cuda(), paragraphs, documents)
    cpu_scores, cpu_p = sdr_scores(source, lengths, collection, normalize=normalize)
    gpu_scores, gpu_p = sdr_scores(
        source, lengths, on_gpu, normalize=normalize, block_sentences=100
    )
    assert gpu_p.device.type == "cpu"  # P comes back where the source is
    torch.testing.assert_close(gpu_p, cpu_p, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gpu_scores, cpu_scores, atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_float16_blocks_on_the_gpu_keep_float32_accuracy() -> None:
    """A float16 block times a float32 source on the tensor cores (the source split in two
    float16 parts) agrees with the float64 product of the same numbers to 1e-6, where the
    source rounded to float16 alone would be off by about 1e-4."""
    gen = torch.Generator().manual_seed(11)
    candidates, source = unit(5000, 384, gen).half(), unit(50, 384, gen).float()
    exact = candidates.double() @ source.double().T  # (r, n)
    split = block_cosines(candidates.cuda(), source.cuda()).cpu()
    assert split.dtype == torch.float32
    assert (split.double() - exact).abs().max() < 1e-6
    rounded = (candidates.cuda() @ source.half().cuda().T).cpu()  # what the split avoids
    assert (rounded.double() - exact).abs().max() > 1e-5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("normalize", [True, False])
def test_a_float16_collection_on_the_gpu_scores_as_on_the_cpu(normalize: bool) -> None:
    """Shards hold float16 sentences; on the CPU each block is cast to float32, on the GPU it
    is multiplied as float16 parts: the same P and scores."""
    gen = torch.Generator().manual_seed(6)
    source, lengths = unit(12, 32, gen).float(), torch.tensor([3, 4, 5])
    paragraphs = torch.randint(1, 6, (300,), generator=gen)
    documents = torch.tensor([30] * 10)
    half = unit(int(paragraphs.sum()), 32, gen).half()
    on_cpu = RaggedCollection(half, paragraphs, documents)
    on_gpu = RaggedCollection(half.cuda(), paragraphs, documents)
    cpu_scores, cpu_p = sdr_scores(source, lengths, on_cpu, normalize=normalize)
    gpu_scores, gpu_p = sdr_scores(
        source, lengths, on_gpu, normalize=normalize, block_sentences=100
    )
    torch.testing.assert_close(gpu_p, cpu_p, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gpu_scores, cpu_scores, atol=1e-5, rtol=1e-5)


def test_paragraph_blocks_shrink_for_a_long_source_and_pace_each(monkeypatch) -> None:
    """A long source compares at most `BLOCK_PAIRS` sentence pairs a block, calling the
    request's pacing hook before each; the scores equal those of one block."""
    from docsim.models.inference.pacing import paced
    from docsim.models.kernels import scoring

    gen = torch.Generator().manual_seed(11)
    collection = RaggedCollection(
        sentences=unit(40, 8, gen),
        paragraph_lengths=torch.tensor([3, 1, 4, 2, 5, 2, 6, 1, 7, 9]),
        document_lengths=torch.tensor([2, 3, 1, 4]),
    )
    source, source_lengths = unit(7, 8, gen), torch.tensor([3, 4])
    whole = sdr_scores(source, source_lengths, collection)
    monkeypatch.setattr(scoring, "BLOCK_PAIRS", 7 * 6)  # 6 rows a block for 7 sources
    seen: list[int] = []
    with paced(seen.append):
        blocked = sdr_scores(source, source_lengths, collection)
    torch.testing.assert_close(blocked[0], whole[0])
    torch.testing.assert_close(blocked[1], whole[1])
    assert sum(seen) == 40 and len(seen) >= 7
    assert all(rows <= 6 or rows in (7, 9) for rows in seen)  # longer: one paragraph
