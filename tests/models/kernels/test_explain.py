"""The pair maps of `models.kernels.explain` against plain-Python transcriptions."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from docsim.models.kernels.explain import align_pair, cosine_matrix, display_grid
from docsim.models.kernels.scoring import RowStats


def unit(n: int, d: int, gen: torch.Generator) -> torch.Tensor:
    return F.normalize(torch.randn(n, d, generator=gen, dtype=torch.float64), dim=-1)


def groups(vectors: torch.Tensor, lengths: list[int]) -> list[list[list[float]]]:
    out, at = [], 0
    for n in lengths:
        out.append(vectors[at : at + n].tolist())
        at += n
    return out


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_align_pair_equals_the_equations(normalize: bool, seed: int) -> None:
    rng, gen, d = random.Random(seed), torch.Generator().manual_seed(seed), 12
    s_lengths = [rng.randint(1, 5) for _ in range(rng.randint(1, 6))]
    t_lengths = [rng.randint(1, 7) for _ in range(rng.randint(1, 6))]
    source, target = unit(sum(s_lengths), d, gen), unit(sum(t_lengths), d, gen)
    stats = (
        RowStats(
            mean=torch.rand(len(s_lengths), generator=gen, dtype=torch.float64),
            std=torch.rand(len(s_lengths), generator=gen, dtype=torch.float64) + 0.1,
        )
        if normalize
        else None
    )
    got = align_pair(source, torch.tensor(s_lengths), target, torch.tensor(t_lengths), stats)

    S, T = groups(source, s_lengths), groups(target, t_lengths)
    P = [[sum(max(cos(a, b) for b in tj) for a in si) / len(si) for tj in T] for si in S]
    Z = [
        [(v - float(stats.mean[i])) / float(stats.std[i]) for v in row] if stats else row
        for i, row in enumerate(P)
    ]
    assert torch.allclose(got.paragraphs, torch.tensor(P, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(got.normalized, torch.tensor(Z, dtype=torch.float64), atol=1e-12)
    best = [max(range(len(row)), key=lambda j, row=row: row[j]) for row in Z]
    assert got.best_paragraph.tolist() == best
    assert got.score == pytest.approx(sum(max(row) for row in Z) / len(Z), abs=1e-12)
    t_start = [sum(t_lengths[:j]) for j in range(len(t_lengths))]
    k = 0
    for i, si in enumerate(S):
        j = best[i]
        for a in si:
            scores = [cos(a, b) for b in T[j]]
            r = max(range(len(scores)), key=scores.__getitem__)
            assert int(got.sentence_target[k]) == t_start[j] + r
            assert float(got.sentence_score[k]) == pytest.approx(scores[r], abs=1e-12)
            k += 1


def test_a_document_against_itself_has_a_maximal_diagonal() -> None:
    gen = torch.Generator().manual_seed(7)
    lengths = torch.tensor([3, 1, 4, 2, 5])
    vectors = unit(int(lengths.sum()), 16, gen)
    got = align_pair(vectors, lengths, vectors, lengths, None)
    diagonal = torch.diagonal(got.paragraphs)
    assert torch.allclose(diagonal, torch.ones_like(diagonal))
    assert got.best_paragraph.tolist() == list(range(len(lengths)))
    assert got.sentence_target.tolist() == list(range(int(lengths.sum())))
    sections = cosine_matrix(vectors, vectors)
    assert torch.equal(sections.argmax(dim=1), torch.arange(len(vectors)))


@pytest.mark.parametrize(
    ("shape", "limit"),
    [((7, 5), (3, 2)), ((10, 10), (10, 10)), ((1, 9), (4, 4)), ((13, 3), (5, 9))],
)
def test_display_grid_keeps_each_block_maximum_and_where_it_is(shape, limit) -> None:
    matrix = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))
    grid = display_grid(matrix, *limit)
    m, n = shape
    bh, bw = grid.block_rows, grid.block_columns
    assert grid.values.shape[0] <= limit[0] and grid.values.shape[1] <= limit[1]
    assert grid.values.shape == (-(-m // bh), -(-n // bw))
    for r in range(grid.values.shape[0]):
        for c in range(grid.values.shape[1]):
            block = [
                (i, j)
                for i in range(r * bh, min(m, (r + 1) * bh))
                for j in range(c * bw, min(n, (c + 1) * bw))
            ]
            best = max(block, key=lambda ij: float(matrix[ij]))
            assert float(grid.values[r, c]) == float(matrix[best])
            assert (int(grid.rows[r, c]), int(grid.columns[r, c])) == best
    assert grid.pooled == (bh > 1 or bw > 1)
