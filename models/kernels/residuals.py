"""PLAID's second stage: each sentence's offset from its centroid in 2 bits a dimension, and the
approximate `maxsim` of a few documents from those codes.

Centroid interaction (`models.kernels.centroid_interaction`) replaces a sentence by its cell's
centre, which is coarse. The offset x - c(x) of each sentence from its centre is kept too, each
dimension as one of four buckets whose boundaries are that dimension's quartiles of the offsets of a
sample, and whose value is the mean offset of the sample's members of that bucket. Measured
on AILA's sentences in 64 dimensions with 1,024 cells, the mean relative error of a sentence
is 0.67 from its centre alone and 0.24 with its offset. Four dimensions share a byte: 16
bytes a sentence at 64 dimensions.

`refine` decodes only the sentences of the documents it is given (the best of centroid
interaction) that lie in a cell the query probes (PLAID's pruning: any other sentence counts
as the query sentence's floor), so its cost follows those, not the collection. Dimensions:
R sentences, D documents, M documents refined, m their sentences, n query sentences, k
dimensions. Tensors in, tensors out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from docsim.models.kernels.centroid_interaction import Probe
from docsim.models.kernels.ranges import concatenated_ranges

BUCKETS = 4  # 2 bits a dimension
PER_BYTE = 4  # dimensions packed in a byte


@dataclass(frozen=True)
class Residuals:
    """Every sentence's offset from its centroid, quantised.

    Attributes:
        packed: `(R, ceil(k / 4))` uint8: dimension j's bucket in bits 2 (j % 4) and up of
            byte j // 4.
        cutoffs: `(k, 3)` float32 each dimension's bucket boundaries, ascending.
        values: `(k, 4)` float32 each dimension's bucket values.
    """

    packed: torch.Tensor
    cutoffs: torch.Tensor
    values: torch.Tensor

    def memory_bytes(self) -> int:
        held = (self.packed, self.cutoffs, self.values)
        return sum(int(t.element_size() * t.numel()) for t in held)

    def kept(self, rows: torch.Tensor, added: torch.Tensor) -> Residuals:
        """These residuals for the sentence rows where `rows` `(R,)` holds, then `added`
        `(a, ceil(k / 4))` packed rows (a document change)."""
        return Residuals(torch.cat([self.packed[rows], added]), self.cutoffs, self.values)


def fit_buckets(offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`(k, 3)` cutoffs (each dimension's quartiles) and `(k, 4)` values (each bucket's mean,
    or its cutoff where no offset falls in it) of a sample's offsets `(m, k)`."""
    offsets = offsets.float()
    quantiles = torch.tensor([0.25, 0.5, 0.75])
    cutoffs = torch.quantile(offsets, quantiles, dim=0).T.contiguous()  # (k, 3)
    buckets = bucket_of(offsets, cutoffs)  # (m, k)
    k = offsets.shape[1]
    sums = torch.zeros(k, BUCKETS).scatter_add_(1, buckets.T, offsets.T)  # (k, 4)
    counts = torch.zeros(k, BUCKETS).scatter_add_(1, buckets.T, torch.ones_like(offsets.T))
    edges = torch.cat([cutoffs[:, :1], cutoffs], dim=1)  # (k, 4) a bucket's lower edge
    values = torch.where(counts > 0, sums / counts.clamp(min=1), edges)
    return cutoffs, values


def bucket_of(offsets: torch.Tensor, cutoffs: torch.Tensor) -> torch.Tensor:
    """`(m, k)` int64 the bucket of each offset `(m, k)` under `cutoffs` `(k, 3)`."""
    return (offsets.float().unsqueeze(-1) > cutoffs).sum(-1)  # (m, k, 3) -> (m, k)


def pack(buckets: torch.Tensor) -> torch.Tensor:
    """`(m, ceil(k / 4))` uint8: buckets `(m, k)` (0 to 3), four to a byte."""
    m, k = buckets.shape
    padded = torch.zeros(m, -(-k // PER_BYTE) * PER_BYTE, dtype=torch.uint8)
    padded[:, :k] = buckets.to(torch.uint8)
    grouped = padded.view(m, -1, PER_BYTE)  # (m, B, 4)
    shifts = torch.arange(PER_BYTE, dtype=torch.uint8) * 2
    return (grouped << shifts).sum(-1, dtype=torch.uint8)


def unpack(packed: torch.Tensor, k: int) -> torch.Tensor:
    """`(m, k)` int64 the buckets of `packed` `(m, B)` (`pack`'s inverse)."""
    shifts = torch.arange(PER_BYTE, dtype=torch.uint8) * 2
    buckets = (packed.unsqueeze(-1) >> shifts) & 3  # (m, B, 4)
    return buckets.reshape(len(packed), -1)[:, :k].long()


def encode(
    rows: torch.Tensor, codes: torch.Tensor, centroids: torch.Tensor, cutoffs: torch.Tensor
) -> torch.Tensor:
    """`(m, B)` packed buckets of the offsets of `rows` `(m, k)` from their centroids
    (`codes` `(m,)` into `centroids` `(C, k)`)."""
    offsets = rows.float() - centroids[codes.long()]
    return pack(bucket_of(offsets, cutoffs))


def decode(
    codes: torch.Tensor, packed: torch.Tensor, centroids: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    """`(m, k)` the approximate sentences: centroid plus bucket value in every dimension
    (looked up a byte, four dimensions, at a time)."""
    m, k = len(codes), centroids.shape[1]
    width = packed.shape[1]
    table = byte_table(values, width)  # (B * 256, 4)
    slots = packed.long() + torch.arange(width) * 256  # (m, B)
    offsets = F.embedding(slots, table).reshape(m, -1)[:, :k]  # (m, k)
    return F.embedding(codes.long(), centroids) + offsets


def byte_table(values: torch.Tensor, width: int) -> torch.Tensor:
    """`(width * 256, 4)`: row 256 b + v holds the bucket values of the four dimensions that
    byte b of a packed row codes, for the byte's value v."""
    k = values.shape[0]
    padded = torch.zeros(width * PER_BYTE, BUCKETS)
    padded[:k] = values
    shifts = torch.arange(PER_BYTE) * 2
    buckets = (torch.arange(256).unsqueeze(-1) >> shifts) & 3  # (256, 4) a byte's buckets
    grouped = padded.view(width, PER_BYTE, BUCKETS)  # (B, 4 dimensions, 4 buckets)
    dims = torch.arange(PER_BYTE)
    return grouped[:, dims, buckets].reshape(width * 256, PER_BYTE)  # (B, 256, 4)


def refine(
    query: torch.Tensor,
    probed: Probe,
    documents: torch.Tensor,
    document_start: torch.Tensor,
    codes: torch.Tensor,
    residuals: Residuals,
    centroids: torch.Tensor,
) -> torch.Tensor:
    """`(M,)` the approximate `maxsim` of `documents` `(M,)` for query sentences `(n, k)`: the
    mean over the query's sentences of the best product with a decoded sentence of each that
    lies in a cell the query probed (`probed`), floored at the sentence's floor (PLAID's
    pruning: a sentence of any other cell stands for the floor). `document_start` `(D + 1,)`,
    `codes` `(R,)`."""
    starts, ends = document_start[documents], document_start[documents + 1]  # (M,)
    lengths = ends - starts
    rows = concatenated_ranges(starts, ends)  # (m,) the documents' sentence rows
    owner = torch.repeat_interleave(torch.arange(len(documents)), lengths)  # (m,)
    probed_cell = torch.zeros(len(centroids), dtype=torch.bool)
    probed_cell[probed.cells] = True
    kept = probed_cell[codes[rows].long()]  # (m,)
    rows, owner = rows[kept], owner[kept]  # (m',)
    decoded = decode(codes[rows], residuals.packed[rows], centroids, residuals.values)
    products = query.float() @ decoded.T  # (n, m')
    best = probed.floor.expand(-1, len(documents)).contiguous()  # (n, M)
    best.scatter_reduce_(1, owner.expand(len(query), -1), products, reduce="amax")
    return best.mean(dim=0)
