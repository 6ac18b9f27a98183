"""A compressed copy of a collection's sentences for a fast first pass, and that pass.

Each unit sentence vector x `(d,)` is projected onto the k leading eigenvectors of the
collection's uncentred second moment E[x x^T] (the directions that carry the most of the dot
products between such vectors) and stored as bfloat16: 2k bytes a sentence instead of the 4d
of float32. A query sentence q is projected the same way, so that

    q . x  ~  (q B) . (x B)            B: (d, k), orthonormal columns

with an error that is the dot product of the two vectors' parts outside B's span. The
products run on the CPU's bfloat16 units (AMX tiles where the CPU has them, AVX-512 BF16
otherwise), so the first pass reads 2k bytes a sentence and multiplies at bfloat16's rate.

Each document's rows are padded to a multiple of `group` rows by repeating its last row
(which leaves every maximum unchanged), so the per-document maximum is a fixed-stride maximum
over groups of `group` rows, then a segment maximum over a `group`-th as many rows.

The pass is approximate by design: `approximate_best` finds what deserves exact scoring, and
the caller scores those few documents exactly from the stored vectors
(`models.alignment.sentence_best`). Dimensions: R sentences, D documents, n query sentences,
d vector size, k kept dimensions, P padded rows. Tensors in, tensors out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ScanRows:
    """The compressed sentences of a collection, document by document.

    Attributes:
        rows: `(P, k)` bfloat16 projected sentences, each document's padded to a multiple of
            `group` rows by repeating its last one.
        group_counts: `(D,)` int64 groups of `group` rows per document (all >= 1).
        basis: `(d, k)` float32 orthonormal projection.
        group: rows per group.
    """

    rows: torch.Tensor
    group_counts: torch.Tensor
    basis: torch.Tensor
    group: int

    @property
    def n_documents(self) -> int:
        return int(self.group_counts.shape[0])

    def memory_bytes(self) -> int:
        """What the compressed rows and their bookkeeping take in memory."""
        return sum(t.element_size() * t.numel() for t in (self.rows, self.group_counts, self.basis))

    def document_rows(self, documents: torch.Tensor) -> torch.Tensor:
        """`(p,)` the padded rows of `documents` `(m,)` (positions), in that order."""
        ends = torch.cumsum(self.group_counts, 0) * self.group  # (D,)
        starts = ends - self.group_counts * self.group
        return _ranges(starts[documents], ends[documents])


def fit_basis(sample: torch.Tensor, k: int) -> torch.Tensor:
    """`(d, k)` the k leading eigenvectors of the uncentred second moment of `sample` `(m, d)`,
    strongest first."""
    if not 1 <= k <= sample.shape[1]:
        raise ValueError(f"cannot keep {k} of {sample.shape[1]} dimensions")
    x = sample.double()
    moment = x.T @ x / max(1, x.shape[0])  # (d, d)
    vectors: torch.Tensor = torch.linalg.eigh(moment).eigenvectors  # ascending eigenvalues
    return vectors[:, -k:].flip(-1).float().contiguous()


def project(sentences: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """`(m, k)` bfloat16: rows `(m, d)` (any float dtype) in the basis `(d, k)`."""
    return (sentences.float() @ basis).to(torch.bfloat16)


def padded_positions(lengths: torch.Tensor, group: int) -> torch.Tensor:
    """`(P,)` for each padded row, the unpadded row it repeats: each run of `lengths` `(D,)`
    rows (all >= 1) padded to a multiple of `group` with copies of its last row."""
    if bool((lengths < 1).any()):
        raise ValueError("every document needs at least one sentence")
    padded = (lengths + group - 1) // group * group  # (D,)
    starts = torch.cumsum(lengths, 0) - lengths  # (D,)
    within = torch.arange(int(padded.sum())) - torch.repeat_interleave(
        torch.cumsum(padded, 0) - padded, padded
    )  # (P,) row within its padded document
    last = torch.repeat_interleave(lengths - 1, padded)  # (P,)
    return torch.repeat_interleave(starts, padded) + torch.minimum(within, last)


def compress(
    projected: torch.Tensor, document_lengths: torch.Tensor, basis: torch.Tensor, group: int = 8
) -> ScanRows:
    """`ScanRows` from the projected sentences `(R, k)` (`project`) and the sentences per
    document `(D,)`, summing to R."""
    if int(document_lengths.sum()) != projected.shape[0]:
        raise ValueError("document lengths do not add up to the sentences")
    rows = projected[padded_positions(document_lengths, group)]  # (P, k)
    counts = (document_lengths + group - 1) // group  # (D,)
    return ScanRows(rows=rows.contiguous(), group_counts=counts, basis=basis, group=group)


def changed(
    scan: ScanRows, keep: torch.Tensor, added: torch.Tensor, added_lengths: torch.Tensor
) -> ScanRows:
    """The documents where `keep` `(D,)` is true, in order, then documents of the projected
    rows `added` `(a, k)`, `added_lengths` `(D_a,)` rows each; the same basis."""
    kept = scan.rows[scan.document_rows(torch.nonzero(keep).flatten())]  # (p, k)
    new = compress(added, added_lengths, scan.basis, scan.group) if len(added_lengths) else None
    return ScanRows(
        rows=torch.cat([kept, new.rows]) if new is not None else kept,
        group_counts=torch.cat([scan.group_counts[keep], new.group_counts])
        if new is not None
        else scan.group_counts[keep],
        basis=scan.basis,
        group=scan.group,
    )


def approximate_best(
    query: torch.Tensor, scan: ScanRows, *, block_rows: int = 16384
) -> torch.Tensor:
    """`(D, n)` each query sentence's best approximate cosine in each document: the query
    `(n, d)` projected, multiplied with blocks of whole documents (about `block_rows` padded
    rows, so that the `(r, n)` products stay in cache), reduced per group of rows, then per
    document."""
    q = project(query, scan.basis)  # (n, k)
    n, g = q.shape[0], scan.group
    counts = scan.group_counts
    ends = torch.cumsum(counts, 0)  # (D,) in groups
    out = torch.empty(len(counts), n)  # (D, n)
    d0, block_groups = 0, max(1, block_rows // g)
    while d0 < len(counts):
        g0 = int(ends[d0 - 1]) if d0 else 0
        d1 = max(int(torch.searchsorted(ends, g0 + block_groups, right=True)), d0 + 1)
        g1 = int(ends[d1 - 1])
        products = scan.rows[g0 * g : g1 * g] @ q.T  # (r, n) bfloat16
        groups = products.view(-1, g, n).amax(dim=1).float()  # (r / g, n)
        out[d0:d1] = torch.segment_reduce(groups, "max", lengths=counts[d0:d1], axis=0)
        d0 = d1
    return out


def _ranges(starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """`(sum(ends - starts),)` the integers of each half-open range, concatenated."""
    lengths = ends - starts
    offsets = torch.cumsum(lengths, 0) - lengths
    return torch.repeat_interleave(starts - offsets, lengths) + torch.arange(int(lengths.sum()))
