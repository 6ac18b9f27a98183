"""Residual codes (`models.kernels.residuals`) against plain loops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from docsim.models.kernels.centroid_interaction import probe
from docsim.models.kernels.residuals import (
    Residuals,
    bucket_of,
    decode,
    encode,
    fit_buckets,
    pack,
    refine,
    unpack,
)
from tests.utils.cells import assign


def collection(seed: int, n_documents: int = 20, k: int = 10):  # noqa: ANN201
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 7, (n_documents,), generator=g)
    lengths[2] = 0
    start = torch.zeros(n_documents + 1, dtype=torch.long)
    start[1:] = lengths.cumsum(0)
    rows = F.normalize(torch.randn(int(start[-1]), k, generator=g), dim=-1)
    centroids = F.normalize(torch.randn(6, k, generator=g), dim=-1)
    return rows, start, centroids


@pytest.mark.parametrize("k", [1, 4, 7, 64])
def test_pack_and_unpack_round_trip(k: int) -> None:
    buckets = torch.randint(0, 4, (13, k), generator=torch.Generator().manual_seed(k))
    packed = pack(buckets)
    assert packed.dtype == torch.uint8 and packed.shape == (13, -(-k // 4))
    assert torch.equal(unpack(packed, k), buckets)


def test_buckets_are_quartiles_with_their_members_means() -> None:
    offsets = torch.randn(400, 5, generator=torch.Generator().manual_seed(0))
    cutoffs, values = fit_buckets(offsets)
    for j in range(5):
        column = offsets[:, j]
        expected = torch.quantile(column, torch.tensor([0.25, 0.5, 0.75]))
        assert torch.allclose(cutoffs[j], expected)
        for b in range(4):
            low = cutoffs[j, b - 1] if b else -torch.inf
            high = cutoffs[j, b] if b < 3 else torch.inf
            members = column[(column > low) & (column <= high)]
            assert float(values[j, b]) == pytest.approx(float(members.mean()), abs=1e-6)


def test_decode_is_the_centroid_plus_each_dimensions_bucket_value() -> None:
    rows, _, centroids = collection(1)
    codes = assign(rows, centroids)
    cutoffs, values = fit_buckets(rows - centroids[codes.long()])
    decoded = decode(codes, encode(rows, codes, centroids, cutoffs), centroids, values)
    for i, row in enumerate(rows):
        offset = row - centroids[codes[i]]
        for j in range(rows.shape[1]):
            bucket = int((offset[j] > cutoffs[j]).sum())
            expected = centroids[codes[i], j] + values[j, bucket]
            assert float(decoded[i, j]) == pytest.approx(float(expected), abs=1e-6)
    assert bucket_of(rows - centroids[codes.long()], cutoffs).shape == rows.shape


def test_residuals_bring_the_sentences_closer_than_their_centroids() -> None:
    rows, _, centroids = collection(2, n_documents=200)
    codes = assign(rows, centroids)
    cutoffs, values = fit_buckets(rows - centroids[codes.long()])
    decoded = decode(codes, encode(rows, codes, centroids, cutoffs), centroids, values)
    coded_error = (decoded - rows).norm(dim=1).mean()
    centroid_error = (centroids[codes.long()] - rows).norm(dim=1).mean()
    assert coded_error < 0.6 * centroid_error


def test_refine_equals_the_plain_loops() -> None:
    """Per document and query sentence: the best product with a decoded sentence of a probed
    cell, floored at the sentence's floor."""
    rows, start, centroids = collection(3)
    codes = assign(rows, centroids)
    cutoffs, values = fit_buckets(rows - centroids[codes.long()])
    residuals = Residuals(encode(rows, codes, centroids, cutoffs), cutoffs, values)
    query = F.normalize(torch.randn(4, 10, generator=torch.Generator().manual_seed(4)), dim=-1)
    documents = torch.tensor([7, 2, 0, 19, 11])
    decoded = decode(codes, residuals.packed, centroids, values)
    for n_probe in (1, 2, 6):
        probed = probe(query @ centroids.T, n_probe)
        found = refine(query, probed, documents, start, codes, residuals, centroids)
        cells = set(probed.cells.tolist())
        for i, d in enumerate(documents.tolist()):
            expected = 0.0
            for q in range(len(query)):
                floor = float(torch.topk(query[q] @ centroids.T, n_probe).values[-1])
                kept = [
                    r for r in range(int(start[d]), int(start[d + 1])) if int(codes[r]) in cells
                ]
                expected += max([floor] + [float(query[q] @ decoded[r]) for r in kept])
            assert float(found[i]) == pytest.approx(expected / len(query), abs=1e-6)


def test_the_byte_table_decodes_as_unpacking_does() -> None:
    rows, _, centroids = collection(5)
    codes = assign(rows, centroids)
    cutoffs, values = fit_buckets(rows - centroids[codes.long()])
    packed = encode(rows, codes, centroids, cutoffs)
    buckets = unpack(packed, rows.shape[1])
    plain = centroids[codes.long()] + values[torch.arange(rows.shape[1]), buckets]
    assert torch.allclose(decode(codes, packed, centroids, values), plain)
