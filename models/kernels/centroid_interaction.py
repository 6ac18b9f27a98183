"""PLAID-style candidate generation: every sentence stands for its centroid, and a document
is scored by the centroids of its sentences (centroid interaction).

A collection's R sentences are assigned to C centroids (cells) fitted on a sample of them.
For each cell the documents with a sentence in it are listed once (its postings). A query
of n sentences then ranks every document in three steps, none of which reads a sentence
vector:

1. the n x C products of the query's sentences with the centroids;
2. each query sentence probes its `n_probe` best cells (`probe`); the rest of its products
   are replaced by its `n_probe`-th best product (its floor);
3. a document's score is the mean over the query's sentences of the best product among the
   cells that sentence probes and the document has a sentence in (the floor where it has
   none): an approximate `maxsim` read from each sentence's own cells' postings only.

The caller scores the best documents exactly. Everything runs in the space the centroids
were fitted in (`models.kernels.scan`'s projection, when the caller projects). Dimensions: R
sentences, D documents, C cells, P postings, n query sentences, k dimensions.
Tensors in, tensors out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from docsim.models.kernels.ranges import concatenated_ranges


@dataclass(frozen=True)
class CellPostings:
    """The documents of each cell, and the cells themselves.

    Attributes:
        centroids: `(C, k)` float32 cell centres.
        cell_start: `(C + 1,)` int64: cell c's documents are `documents[cell_start[c]:
            cell_start[c + 1]]`.
        documents: `(P,)` int32 document positions, ascending within each cell, each once.
        codes: `(R,)` int32 the cell of each sentence row (kept to apply document changes).
        n_documents: D.
    """

    centroids: torch.Tensor
    cell_start: torch.Tensor
    documents: torch.Tensor
    codes: torch.Tensor
    n_documents: int

    @property
    def n_cells(self) -> int:
        return int(self.centroids.shape[0])

    def memory_bytes(self) -> int:
        held = (self.centroids, self.cell_start, self.documents, self.codes)
        return sum(int(t.element_size() * t.numel()) for t in held)


def cell_count(n_sentences: int, per_cell: int = 16) -> int:
    """The cells for `n_sentences`: the power of two at or below eight times their square root
    (4,096 for AILA's 340,178 sentences, 8,192 for ten times as many), with at least
    `per_cell` sentences a cell (at least one cell)."""
    if n_sentences < 2 * per_cell:
        return 1
    wanted: int = 2 ** int(math.log2(8 * math.sqrt(n_sentences)))
    return max(1, min(wanted, n_sentences // per_cell))


def postings(
    codes: torch.Tensor, document_start: torch.Tensor, centroids: torch.Tensor
) -> CellPostings:
    """The postings of sentences in cells `codes` `(R,)`, document d's sentences being rows
    `document_start[d]:document_start[d + 1]` (`(D + 1,)`)."""
    n_documents = len(document_start) - 1
    n_cells = len(centroids)
    lengths = document_start.diff()  # (D,)
    documents = torch.repeat_interleave(torch.arange(n_documents), lengths)  # (R,)
    pairs = torch.unique(codes.long() * n_documents + documents)  # (P,) ascending: by cell
    cells = pairs // max(n_documents, 1)
    counts = torch.bincount(cells, minlength=n_cells)  # (C,)
    cell_start = torch.zeros(n_cells + 1, dtype=torch.long)
    cell_start[1:] = counts.cumsum(0)
    documents_of = (pairs % max(n_documents, 1)).to(torch.int32)
    return CellPostings(centroids, cell_start, documents_of, codes.to(torch.int32), n_documents)


@dataclass(frozen=True)
class Probe:
    """A query's products with the centroids and the cells its sentences probe.

    Attributes:
        products: `(n, C)` each query sentence's product with each centroid.
        top_cells: `(n, p)` the cells each query sentence probes, best first.
        cells: `(u,)` the cells some query sentence probes, ascending.
        floor: `(n, 1)` each query sentence's `p`-th best product, which stands for its
            product with any sentence outside the cells it probes.
    """

    products: torch.Tensor
    top_cells: torch.Tensor
    cells: torch.Tensor
    floor: torch.Tensor


def probe(products: torch.Tensor, n_probe: int) -> Probe:
    """The cells each query sentence probes, its `n_probe` best by its `products` `(n, C)`
    with the centroids (`query @ centroids.T`)."""
    top = torch.topk(products, min(n_probe, products.shape[1]), dim=1)  # (n, p)
    return Probe(products, top.indices, torch.unique(top.indices), top.values[:, -1:])


def interaction(probed: Probe, found: CellPostings) -> torch.Tensor:
    """`(D,)` each document's approximate `maxsim` for the `probed` query: the mean over the
    query's sentences of the best product among the cells that sentence probes and the
    document has a sentence in, floored at the sentence's floor. The work is the postings of
    each query sentence's own cells, not of every probed cell."""
    n, n_documents = len(probed.products), found.n_documents
    if not n:
        return torch.zeros(n_documents)
    cells = probed.top_cells.reshape(-1)  # (n p,)
    values = probed.products.gather(1, probed.top_cells).reshape(-1)  # (n p,)
    sentence = torch.arange(n).repeat_interleave(probed.top_cells.shape[1])  # (n p,)
    starts, ends = found.cell_start[cells], found.cell_start[cells + 1]
    sizes = ends - starts
    documents = found.documents[concatenated_ranges(starts, ends)].long()  # (P',)
    slots = torch.repeat_interleave(sentence, sizes) * n_documents + documents  # (P',)
    best = probed.floor.expand(-1, n_documents).contiguous().reshape(-1)  # (n D,)
    best.scatter_reduce_(0, slots, torch.repeat_interleave(values, sizes), reduce="amax")
    return best.reshape(n, n_documents).mean(dim=0)
