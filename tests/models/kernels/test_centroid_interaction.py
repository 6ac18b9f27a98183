"""Centroid interaction (`models.kernels.centroid_interaction`) against plain loops over every
document."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from docsim.models.kernels.centroid_interaction import cell_count, interaction, postings, probe
from tests.utils.cells import assign


def collection(seed: int, n_documents: int = 30, n_cells: int = 12, k: int = 8):  # noqa: ANN201
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 9, (n_documents,), generator=g)
    lengths[3] = 0  # a document without sentences has no postings
    start = torch.zeros(n_documents + 1, dtype=torch.long)
    start[1:] = lengths.cumsum(0)
    rows = F.normalize(torch.randn(int(start[-1]), k, generator=g), dim=-1)
    centroids = F.normalize(torch.randn(n_cells, k, generator=g), dim=-1)
    return rows, start, centroids


def reference_interaction(
    query: torch.Tensor,
    codes: torch.Tensor,
    start: torch.Tensor,
    centroids: torch.Tensor,
    probe: int,
) -> torch.Tensor:
    """Per document and query sentence: the best product with the cell of any of the
    document's sentences among the sentence's `probe` best cells, floored at the sentence's
    `probe`-th best cell."""
    products = query @ centroids.T  # (n, C)
    out = []
    for d in range(len(start) - 1):
        mine = {int(c) for c in codes[start[d] : start[d + 1]]}
        total = 0.0
        for q in range(len(query)):
            top = torch.topk(products[q], probe)
            own = [float(v) for v, c in zip(top.values, top.indices, strict=True) if int(c) in mine]
            total += max([float(top.values[-1])] + own)
        out.append(total / len(query))
    return torch.tensor(out)


def test_postings_list_each_document_of_a_cell_once_in_order() -> None:
    rows, start, centroids = collection(1)
    codes = assign(rows, centroids)
    found = postings(codes, start, centroids)
    assert found.cell_start[0] == 0 and found.cell_start[-1] == len(found.documents)
    for c in range(len(centroids)):
        docs = found.documents[found.cell_start[c] : found.cell_start[c + 1]].tolist()
        expected = sorted(
            {d for d in range(len(start) - 1) if (codes[start[d] : start[d + 1]] == c).any()}
        )
        assert docs == expected


@pytest.mark.parametrize("n_probe", [1, 3, 12])
@pytest.mark.parametrize("seed", [2, 3])
def test_interaction_equals_the_plain_loops(n_probe: int, seed: int) -> None:
    rows, start, centroids = collection(seed)
    codes = assign(rows, centroids)
    query = F.normalize(
        torch.randn(5, 8, generator=torch.Generator().manual_seed(seed + 10)), dim=-1
    )
    found = interaction(probe(query @ centroids.T, n_probe), postings(codes, start, centroids))
    expected = reference_interaction(query, codes, start, centroids, n_probe)
    assert torch.allclose(found, expected, atol=1e-6)


def test_probing_every_cell_is_maxsim_over_the_sentences_cells() -> None:
    rows, start, centroids = collection(4)
    codes = assign(rows, centroids)
    query = F.normalize(torch.randn(3, 8, generator=torch.Generator().manual_seed(5)), dim=-1)
    found = interaction(
        probe(query @ centroids.T, len(centroids)), postings(codes, start, centroids)
    )
    stand_ins = centroids[codes.long()]  # each sentence replaced by its centroid
    for d in range(len(start) - 1):
        if start[d] == start[d + 1]:
            continue  # no sentences: the floor, the worst cell of each query sentence
        best = (query @ stand_ins[start[d] : start[d + 1]].T).max(dim=1).values.mean()
        assert float(found[d]) == pytest.approx(float(best), abs=1e-6)


def test_cell_count() -> None:
    assert cell_count(0) == cell_count(31) == 1
    assert cell_count(340_178) == 4096  # AILA
    assert cell_count(3_401_780) == 8192  # ten times AILA
    assert cell_count(1000) == 62  # at least 16 sentences a cell
