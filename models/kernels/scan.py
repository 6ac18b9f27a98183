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
over groups of `group` rows, then a segment maximum over a `group`-th as many rows. The rows
are stored in blocks of whole documents (about `block_rows` rows, so that a block's products
stay in cache), and inside a block member-major: member m of every group, then member m + 1.
A block's products `(g * G, n)` are then `g` contiguous slabs `(G, n)` whose elementwise
maximum is each group's (four times faster than reducing the middle axis of `(G, g, n)`).

The pass is approximate by design: `approximate_best` finds what deserves exact scoring, and
the caller scores those few documents exactly from the stored vectors
(`models.kernels.alignment.sentence_best`). Dimensions: R sentences, D documents, n query sentences,
d vector size, k kept dimensions, P padded rows. Tensors in, tensors out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from docsim.models.inference.pacing import before_batch
from docsim.models.kernels.ranges import concatenated_ranges

QUERY_ROWS = 32  # a query's rows are padded to a multiple of this
GATHERED_ROWS = 16384  # rows of chosen documents multiplied at a time
GATHERED_SHARE = 0.25  # above this share of the documents, `approximate_best_of` scans all


@dataclass(frozen=True)
class ScanRows:
    """The compressed sentences of a collection, document by document.

    Attributes:
        rows: `(S, k)` bfloat16 projected sentences, each document's padded to a multiple of
            `group` rows by repeating its last one, stored in blocks of whole documents,
            member-major inside each block, each block `block_groups` groups (or a multiple,
            for a document longer than that), its unused tail zero.
        group_counts: `(D,)` int64 groups of `group` rows per document (all >= 1).
        block_documents: `(B + 1,)` the first document of each block, then D.
        block_starts: `(B + 1,)` the first stored row of each block, then S.
        basis: `(d, k)` float32 orthonormal projection.
        group: rows per group.
    """

    rows: torch.Tensor
    group_counts: torch.Tensor
    block_documents: torch.Tensor
    block_starts: torch.Tensor
    basis: torch.Tensor
    group: int

    @property
    def n_documents(self) -> int:
        return int(self.group_counts.shape[0])

    def memory_bytes(self) -> int:
        """What the compressed rows and their bookkeeping take in memory."""
        held = (self.rows, self.group_counts, self.block_documents, self.block_starts, self.basis)
        return sum(t.element_size() * t.numel() for t in held)

    def blocks(self) -> list[tuple[int, int, int, int, int, int]]:
        """`(d0, d1, g0, g1, r0, r1)` per block: its documents, its groups (of all the
        documents' groups) and its stored rows."""
        group_ends = torch.cumsum(self.group_counts, 0).tolist()  # (D,)
        bounds, starts = self.block_documents.tolist(), self.block_starts.tolist()
        return [
            (d0, d1, group_ends[d0 - 1] if d0 else 0, group_ends[d1 - 1], r0, r1)
            for d0, d1, r0, r1 in zip(bounds[:-1], bounds[1:], starts[:-1], starts[1:], strict=True)
        ]

    def stored_positions(self) -> torch.Tensor:
        """`(P,)` where each padded row (document by document) is stored."""
        g = self.group
        place = torch.empty(int(self.group_counts.sum()) * g, dtype=torch.long)  # (P,)
        for _, _, g0, g1, r0, r1 in self.blocks():
            # padded row g0*g + j*g + m (group j of the block, member m) sits at r0 + m*G + j
            width = (r1 - r0) // g  # G: the block's groups, its unused tail included
            member_major = torch.arange(g)[None, :] * width + torch.arange(g1 - g0)[:, None]
            place[g0 * g : g1 * g] = r0 + member_major.reshape(-1)
        return place

    def padded_rows(self, documents: torch.Tensor) -> torch.Tensor:
        """`(p, k)` the padded rows of `documents` `(m,)` (ascending positions), document by
        document (the layout `compress` starts from)."""
        return self.rows[self.positions_of(documents)]

    def positions_of(self, documents: torch.Tensor) -> torch.Tensor:
        """`(p,)` where the padded rows of `documents` `(m,)` are stored, document by
        document: the same as `stored_positions` over those documents' rows, at a cost that
        follows the documents, not the collection."""
        g = self.group
        group_ends = torch.cumsum(self.group_counts, 0)  # (D,)
        first_group = group_ends - self.group_counts  # (D,)
        block = torch.searchsorted(self.block_documents, documents, right=True) - 1  # (m,)
        block_group = first_group[self.block_documents[:-1]][block]  # (m,) block's first group
        r0 = self.block_starts[block]  # (m,)
        width = (self.block_starts[block + 1] - r0) // g  # (m,) G: the block's groups
        counts = self.group_counts[documents]  # (m,)
        group_of = concatenated_ranges(  # (q,) each group of the documents, within its block
            first_group[documents] - block_group, group_ends[documents] - block_group
        )
        r0, width = torch.repeat_interleave(r0, counts), torch.repeat_interleave(width, counts)
        # group j, member m of a block sits at r0 + m * G + j (member-major)
        member = torch.arange(g)[None, :] * width[:, None]  # (q, g)
        return (r0[:, None] + member + group_of[:, None]).reshape(-1)

    def sentence_rows(self, document_lengths: torch.Tensor) -> torch.Tensor:
        """`(S,)` the sentence each stored row holds, -1 for a padding copy or an unused row;
        the documents hold `document_lengths` `(D,)` sentences."""
        padded = self.group_counts * self.group  # (D,)
        within = torch.arange(int(padded.sum())) - torch.repeat_interleave(
            torch.cumsum(padded, 0) - padded, padded
        )  # (P,) row within its padded document
        real = within < torch.repeat_interleave(document_lengths, padded)  # (P,)
        canonical = torch.full((len(real),), -1, dtype=torch.long)
        canonical[real] = torch.arange(int(real.sum()))
        out = torch.full((len(self.rows),), -1, dtype=torch.long)
        out[self.stored_positions()] = canonical
        return out


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
    projected: torch.Tensor,
    document_lengths: torch.Tensor,
    basis: torch.Tensor,
    group: int = 8,
    *,
    block_rows: int = 32768,
) -> ScanRows:
    """`ScanRows` from the projected sentences `(R, k)` (`project`) and the sentences per
    document `(D,)`, summing to R."""
    if int(document_lengths.sum()) != projected.shape[0]:
        raise ValueError("document lengths do not add up to the sentences")
    return laid_out(
        projected[padded_positions(document_lengths, group)],
        document_lengths,
        basis,
        group,
        block_rows,
    )


def laid_out(
    padded: torch.Tensor,
    document_lengths: torch.Tensor,
    basis: torch.Tensor,
    group: int,
    block_rows: int = 32768,
) -> ScanRows:
    """`ScanRows` of rows already padded, document by document `(P, k)`, in blocks of whole
    documents of `block_rows` stored rows (a multiple of them for a longer document), member-
    major inside each block. Blocks of one size give the products few shapes: oneDNN keeps a
    compiled kernel per shape, and a shape per block and query would grow without bound."""
    scan = empty_layout(document_lengths, basis, group, padded.dtype, block_rows)
    scan.rows[scan.stored_positions()] = padded
    return scan


def empty_layout(
    document_lengths: torch.Tensor,
    basis: torch.Tensor,
    group: int,
    dtype: torch.dtype = torch.bfloat16,
    block_rows: int = 32768,
) -> ScanRows:
    """The `ScanRows` of documents of `document_lengths` `(D,)` rows (or padded rows), laid
    out as `laid_out` does, with every row 0."""
    counts = (document_lengths + group - 1) // group  # (D,) groups per document
    ends = torch.cumsum(counts, 0).tolist()  # (D,)
    total = ends[-1] if ends else 0
    width = max(1, min(block_rows // group, total))  # groups a block holds: a small level, all
    bounds, starts, d0 = [0], [0], 0
    while d0 < len(ends):
        g0 = ends[d0 - 1] if d0 else 0
        d1 = d0 + 1
        while d1 < len(ends) and ends[d1] - g0 <= width:
            d1 += 1
        blocks = -(-(ends[d1 - 1] - g0) // width)  # 1, or more for one long document
        bounds.append(d1)
        starts.append(starts[-1] + blocks * width * group)
        d0 = d1
    rows = torch.zeros(starts[-1], basis.shape[1], dtype=dtype)
    return ScanRows(rows, counts, torch.tensor(bounds), torch.tensor(starts), basis, group)


def compress_in_parts(
    rows_of: Callable[[int, int], torch.Tensor],
    document_lengths: torch.Tensor,
    basis: torch.Tensor,
    group: int = 8,
    *,
    part_rows: int = 65536,
    block_rows: int = 32768,
) -> ScanRows:
    """`compress` of the sentences `rows_of(s0, s1)` gives `(s1 - s0, d)` (unprojected, any
    float dtype), projected a part of whole documents (about `part_rows` sentences) at a
    time and written into their places: what it holds beyond the result is one part, not
    the projected and padded copies of every sentence (three times the result at a hundred
    times AILA, more than the machine's memory)."""
    if bool((document_lengths < 1).any()):
        raise ValueError("every document needs at least one sentence")
    scan = empty_layout(document_lengths, basis, group, torch.bfloat16, block_rows)
    starts = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(document_lengths, 0)])
    d0, n_documents = 0, len(document_lengths)
    while d0 < n_documents:  # documents d0..d1: one part
        wanted = torch.tensor([int(starts[d0]) + part_rows])
        d1 = max(d0 + 1, int(torch.searchsorted(starts, wanted, right=True)) - 1)
        d1 = min(d1, n_documents)
        part = project(rows_of(int(starts[d0]), int(starts[d1])), basis)  # (r, k)
        padded = part[padded_positions(document_lengths[d0:d1], group)]  # (p, k)
        scan.rows[scan.positions_of(torch.arange(d0, d1))] = padded
        d0 = d1
    return scan


def changed(
    scan: ScanRows, keep: torch.Tensor, added: torch.Tensor, added_lengths: torch.Tensor
) -> ScanRows:
    """The documents where `keep` `(D,)` is true, in order, then documents of the projected
    rows `added` `(a, k)`, `added_lengths` `(D_a,)` rows each; the same basis."""
    g = scan.group
    kept = scan.padded_rows(torch.nonzero(keep).flatten())  # (p, k)
    new = added[padded_positions(added_lengths, g)] if len(added_lengths) else added[:0]
    lengths = torch.cat([scan.group_counts[keep] * g, added_lengths])  # padded kept: same groups
    return laid_out(torch.cat([kept, new]), lengths, scan.basis, g)


def approximate_best_of(
    query: torch.Tensor, scan: ScanRows, documents: torch.Tensor
) -> torch.Tensor:
    """`(m, n)` `approximate_best` of `documents` `(m,)` (ascending positions) alone, so that
    the cost follows the documents, not the collection: their groups gathered member-major
    (member m of every group of a batch, then member m + 1, as a block is stored), a batch's
    products `(g * G, n')` reduced per group as `g` contiguous slabs, then per document. The
    batches hold `GATHERED_ROWS // g` groups (the last padded with copies: one product
    shape). Above `GATHERED_SHARE` of the collection's documents the whole scan (sequential
    reads) is the cheaper, and is taken."""
    n, g = query.shape[0], scan.group
    if len(documents) > GATHERED_SHARE * scan.n_documents:
        return approximate_best(query, scan)[documents]
    if not len(documents):
        return torch.empty(0, n)
    q = _padded_query(project(query, scan.basis))  # (n', k)
    grid = scan.positions_of(documents).view(-1, g)  # (G, g) each group's members' rows
    width = GATHERED_ROWS // g
    groups = torch.empty(len(grid), n)  # (G, n)
    for g0 in range(0, len(grid), width):
        before_batch(GATHERED_ROWS)
        part = grid[g0 : g0 + width]  # (b, g)
        full = torch.cat([part, part[:1].expand(width - len(part), g)])  # (width, g)
        products = scan.rows[full.T.reshape(-1)] @ q.T  # (g * width, n') member-major
        groups[g0 : g0 + len(part)] = products.view(g, width, -1).amax(dim=0)[: len(part), :n]
    return torch.segment_reduce(groups, "max", lengths=scan.group_counts[documents], axis=0)


def _padded_query(q: torch.Tensor) -> torch.Tensor:
    """`(n', k)` the projected query `(n, k)` with zero rows to a multiple of `QUERY_ROWS`."""
    padded_n = -(-q.shape[0] // QUERY_ROWS) * QUERY_ROWS  # few shapes (see `laid_out`)
    return torch.cat([q, q.new_zeros(padded_n - q.shape[0], q.shape[1])])


def approximate_best(query: torch.Tensor, scan: ScanRows) -> torch.Tensor:
    """`(D, n)` each query sentence's best approximate cosine in each document: the query
    `(n, d)` projected, multiplied with each block of whole documents, reduced per group of
    rows, then per document."""
    q = _padded_query(project(query, scan.basis))  # (n', k)
    n, g, padded_n = query.shape[0], scan.group, q.shape[0]
    counts = scan.group_counts
    out = torch.empty(len(counts), n)  # (D, n)
    for d0, d1, g0, g1, r0, r1 in scan.blocks():
        before_batch(r1 - r0)  # a long scan yields and meets its deadline between blocks
        products = scan.rows[r0:r1] @ q.T  # (g * G, n') bfloat16, member-major
        groups = products.view(g, -1, padded_n).amax(dim=0)[: g1 - g0, :n].float()  # (G, n)
        out[d0:d1] = torch.segment_reduce(groups, "max", lengths=counts[d0:d1], axis=0)
    return out
