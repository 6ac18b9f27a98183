"""The served sentence level, compressed: `models.kernels.scan`'s projected bfloat16 rows in memory
for the first pass, the version's float16 file (memory-mapped) for exact scores.

With `SearchSettings.sentence_store` `compressed`, a version's sentence vectors are not read
into memory (`LoadedIndex.mapped_levels`), and neither is their FAISS index. A `SentenceScan`
stands in for both:

- the sentence-set methods (`maxsim`, `best-sentence`) take the approximate best matches of
  the documents they score from `best_of` (only those documents' rows are read), then score
  the best documents exactly from the file (100, or 1% of them where more:
  `SearchSettings.rescore_depth`; `search.ranking.methods.sentence_sets.SentenceSets`);
- it answers the sentence level's searches (`search`: the `VectorIndex` protocol), for
  candidate mode and sentence-granularity results, approximate first and exact at the end.

The paragraph level is mapped and compressed the same way, for its searches only (a
`SentenceScan` of `level` "paragraph"); the chunk level, which nothing searches, is mapped.

Its basis is fitted once per loaded version, on a fixed sample of the version's units, and
kept through document changes (`changed`), which project only the added units.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from docsim.indexer.store.vector_index import Hits
from docsim.models.kernels.alignment import maxsim_scores
from docsim.models.kernels.scan import (
    ScanRows,
    approximate_best,
    approximate_best_of,
    changed,
    compress_in_parts,
    fit_basis,
    project,
)
from docsim.search.served.mapped_rows import MappedRows

if TYPE_CHECKING:  # shard actors import this module: no SQL in their process
    from docsim.search.served.loaded_index import LoadedIndex

logger = logging.getLogger(__name__)

FIT_SAMPLE_ROWS = 65536  # sentences the basis is fitted on
SAMPLE_RUN = 1024  # consecutive sentences a run of the sample
BLOCK_ROWS = 65536  # sentences projected at a time
SEARCH_DEPTH = 256  # a search's approximate nearest sentences, at least, scored exactly


@dataclass(frozen=True)
class ScanShape:
    """How the scan is laid out: kept dimensions, rows per group and the sample's seed."""

    dimensions: int
    group: int
    seed: int


def fit_sample(rows: torch.Tensor | MappedRows, seed: int) -> torch.Tensor:
    """`(m, d)` float32: at most `FIT_SAMPLE_ROWS` rows to fit the basis on, in runs of
    `SAMPLE_RUN` consecutive rows at seeded places (a run of a mapped file is read, not
    mapped: a sample of single rows would touch nearly every page of the file)."""
    n = len(rows)
    if n <= FIT_SAMPLE_ROWS:
        return rows[0:n].float()
    runs = FIT_SAMPLE_ROWS // SAMPLE_RUN
    starts = np.random.default_rng(seed).choice(n // SAMPLE_RUN, size=runs, replace=False)
    return torch.cat([rows[s * SAMPLE_RUN : (s + 1) * SAMPLE_RUN] for s in np.sort(starts)]).float()


def padding_group(lengths: np.ndarray, most: float = 0.1) -> int:
    """The largest group of 16, 8, 4, 2 and 1 rows to whose multiples padding documents of
    `lengths` sentences `(D,)` adds at most `most` of the rows."""
    for group in (16, 8, 4, 2):
        padded = (lengths + group - 1) // group * group
        if padded.sum() <= (1 + most) * lengths.sum():
            return group
    return 1


def scan_rows(
    rows: torch.Tensor | MappedRows,
    lengths: np.ndarray,
    shape: ScanShape,
    basis: torch.Tensor | None = None,
) -> ScanRows:
    """Sentence `rows` `(R, d)` (documents of `lengths` `(D,)` sentences, in order)
    compressed: every row projected on `basis` `(d, k)` (None: `scan_basis` of these rows),
    each document padded to `shape.group` rows (0: `padding_group`'s)."""
    if basis is None:
        basis = scan_basis(rows, shape)
    return compressed_with(rows, lengths, basis, shape.group or padding_group(lengths))


def scan_basis(rows: torch.Tensor | MappedRows, shape: ScanShape) -> torch.Tensor:
    """`(d, k)` the basis of `shape.dimensions` fitted on a fixed sample of `rows` `(R, d)`:
    a version's shards each project theirs on the basis of the whole collection's rows, so
    that they compress as one process does."""
    return fit_basis(fit_sample(rows, shape.seed), min(shape.dimensions, rows.shape[1]))


def compressed_with(
    rows: torch.Tensor | MappedRows, lengths: np.ndarray, basis: torch.Tensor, group: int
) -> ScanRows:
    """Sentence `rows` `(R, d)` projected on `basis` `(d, k)` and laid out, a part of whole
    documents (about `BLOCK_ROWS` sentences) at a time."""
    if int(np.sum(lengths)) != len(rows):
        raise ValueError("document lengths do not add up to the sentences")
    return compress_in_parts(
        lambda s0, s1: rows[s0:s1],
        torch.from_numpy(np.asarray(lengths, dtype=np.int64)),
        basis,
        group,
        part_rows=BLOCK_ROWS,
    )


class SentenceScan:
    """The compressed sentence level of one loaded index (see the module docstring), or
    another unit level's for its searches.

    Args:
        scan: the compressed rows, document by document in the index's document order.
        exact: `(R, d)` the level's stored vectors (float16 `MappedRows`, or a tensor).
        ids: `(R,)` the units' ids, ascending (rows in document order).
        document_start: `(D + 1,)` each document's first row.
        level: the unit level held.
    """

    def __init__(
        self,
        scan: ScanRows,
        exact: torch.Tensor | MappedRows,
        ids: np.ndarray,
        document_start: np.ndarray,
        level: str = "sentence",
    ) -> None:
        self.scan = scan
        self.exact = exact
        self.sentence_ids = ids
        self.document_start = document_start
        self.level = level

    @classmethod
    def of_index(
        cls, index: LoadedIndex, shape: ScanShape, level: str = "sentence"
    ) -> SentenceScan:
        """Fit a basis on a fixed sample of `index`'s units of `level` (its sentences by
        default) and compress them all."""
        started = time.perf_counter()
        rows = index.vectors[level]
        n = len(rows)
        start = index.doc_unit_start[level]
        scan = scan_rows(rows, np.diff(start), shape)
        found = cls(scan, rows, index.ids[level], start, level)
        logger.info(
            "Compressed %d %s vectors to %d dimensions in %.1f s (%.0f bytes a row)",
            n,
            level,
            found.scan.basis.shape[1],
            time.perf_counter() - started,
            found.memory_bytes() / max(1, n),
        )
        return found

    @classmethod
    def compressing(
        cls, index: LoadedIndex, basis: torch.Tensor, group: int, level: str = "sentence"
    ) -> SentenceScan:
        """Every unit of `level` of `index` projected on `basis`."""
        rows = index.vectors[level]
        start = index.doc_unit_start[level]
        scan = compressed_with(rows, np.diff(start), basis, group)
        return cls(scan, rows, index.ids[level], start, level)

    def changed(self, old: LoadedIndex, new: LoadedIndex) -> SentenceScan:
        """This scan for `new`, `old` with a document change applied: kept documents' rows
        are copied, only the added documents' units are projected (same basis)."""
        level = self.level
        keep = np.isin(old.doc_ids, new.doc_ids)  # (D_old,)
        n_kept = int(keep.sum())
        if not np.array_equal(new.doc_ids[:n_kept], old.doc_ids[keep]):
            return SentenceScan.compressing(new, self.scan.basis, self.scan.group, level)
        start = new.doc_unit_start[level]
        rows = new.vectors[level]
        added = rows[start[n_kept] : start[-1]]  # (a, d)
        scan = changed(
            self.scan,
            torch.from_numpy(keep),
            project(added, self.scan.basis),
            torch.from_numpy(np.diff(start[n_kept:])),
        )
        return SentenceScan(scan, rows, new.ids[level], start, level)

    def memory_bytes(self) -> int:
        """The compressed rows, and the exact rows' bookkeeping held in memory."""
        exact = self.exact
        held = (
            exact.memory_bytes()
            if isinstance(exact, MappedRows)
            else exact.element_size() * exact.numel()
        )
        return (
            self.scan.memory_bytes() + held + self.sentence_ids.nbytes + self.document_start.nbytes
        )

    def best(self, query: torch.Tensor) -> torch.Tensor:
        """`(D, n)` the approximate best cosine of each query sentence `(n, d)` in each
        document."""
        return approximate_best(query, self.scan)

    def best_of(self, query: torch.Tensor, documents: np.ndarray) -> torch.Tensor:
        """`(m, n)` `best` of the documents at positions `documents` `(m,)` (ascending),
        reading their rows only."""
        return approximate_best_of(
            query, self.scan, torch.from_numpy(np.asarray(documents, dtype=np.int64))
        )

    def candidates(self, query: torch.Tensor, allowed: np.ndarray, most: int) -> np.ndarray:
        """Positions (ascending) of the `most` documents of `allowed` with the best
        approximate `maxsim` for the query's sentences `(n, d)` (ties: the lower position):
        candidate mode's first pass over every document."""
        if len(allowed) <= most:
            return np.sort(allowed)
        scores = maxsim_scores(self.best(query)).numpy()[allowed]
        return np.sort(allowed[np.argsort(-scores, kind="stable")[:most]])

    def exact_rows(self, rows: np.ndarray) -> torch.Tensor:
        """`(m, d)` float32 stored vectors of sentence rows `(m,)`."""
        return self.exact[torch.from_numpy(rows)].float()

    @property
    def count(self) -> int:
        return len(self.sentence_ids)

    def ids(self) -> np.ndarray:
        """`(R,)` the sentence ids, ascending (as `FaissIndex.ids`)."""
        return self.sentence_ids

    def search(self, queries: np.ndarray, k: int, within: np.ndarray | None = None) -> list[Hits]:
        """The `k` sentences nearest each row of `queries` `(m, d)` (only among the ids
        `within` when given), by exact cosine among the `max(8k, 256)` nearest by the scan."""
        queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        empty = Hits(np.empty(0, np.float32), np.empty(0, np.int64))
        if not self.count or k <= 0 or (within is not None and not len(within)):
            return [empty for _ in queries]
        allowed = None
        if within is not None:
            allowed = torch.from_numpy(np.isin(self.sentence_ids, within))  # (R,)
        wanted = min(max(8 * k, SEARCH_DEPTH), self.count)
        rows = self._nearest_rows(torch.from_numpy(queries), wanted, allowed)  # (m, w)
        out = []
        for query, found in zip(queries, rows, strict=True):
            found = found[found >= 0].numpy()
            exact = self.exact_rows(found) @ torch.from_numpy(query)  # (w,)
            order = torch.argsort(exact, descending=True, stable=True)[:k].numpy()
            out.append(Hits(exact.numpy()[order], self.sentence_ids[found[order]]))
        return out

    def _nearest_rows(
        self, queries: torch.Tensor, wanted: int, allowed: torch.Tensor | None
    ) -> torch.Tensor:
        """`(m, wanted)` the sentence rows with the best approximate cosines to each query
        row (-1 where fewer are allowed), over the padded rows' first copies only."""
        scan = self.scan
        q = project(queries, scan.basis)  # (m, k)
        lengths = torch.from_numpy(np.diff(self.document_start))  # (D,)
        row_of = scan.sentence_rows(lengths)  # (P,) -1: a padding copy
        if allowed is not None:
            refused = (row_of >= 0) & ~allowed[row_of.clamp(min=0)]  # (P,)
            row_of = torch.where(refused, -1, row_of)
        best_scores = torch.full((len(q), 0), -torch.inf)
        best_rows = torch.full((len(q), 0), -1, dtype=torch.long)
        for p0 in range(0, len(row_of), BLOCK_ROWS):
            p1 = min(p0 + BLOCK_ROWS, len(row_of))
            scores = (q @ scan.rows[p0:p1].T).float()  # (m, r)
            scores[:, row_of[p0:p1] < 0] = -torch.inf
            top = torch.topk(scores, min(wanted, p1 - p0), dim=1)
            best_scores = torch.cat([best_scores, top.values], dim=1)
            best_rows = torch.cat([best_rows, row_of[p0:p1][top.indices]], dim=1)
            keep = torch.topk(best_scores, min(wanted, best_scores.shape[1]), dim=1).indices
            best_scores = best_scores.gather(1, keep)
            best_rows = best_rows.gather(1, keep)
        return torch.where(torch.isfinite(best_scores), best_rows, -1)
