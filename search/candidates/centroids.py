"""Candidate mode's documents, PLAID-style: centroid interaction over the sentence level's
cells (`models.kernels.centroid_interaction`), then the best of those by their sentences' residual
codes (`models.kernels.residuals`), fitted once per loaded version in the projection
`models.kernels.scan` uses.

The cells are fitted on the same fixed sample of runs of sentences as the compressed level's
basis (`sentence_scan.fit_sample`), in its space (`scan.dimensions` leading directions), with
FAISS's k-means; every sentence is then assigned to its cell, and its offset from the cell's
centre coded in 2 bits a dimension. A document change codes only the added documents'
sentences and keeps the cells. A query reads no sentence vector: it costs the products of
its sentences with the centroids, a pass over the probed cells' postings, and the decoding
of the sentences of `candidates.refine` documents that lie in the cells probed
`candidates.refine_probe` deep.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
import torch

from docsim.indexer.store.vector_index import NearestCentroid, kmeans
from docsim.models.kernels.centroid_interaction import (
    CellPostings,
    Probe,
    cell_count,
    interaction,
    postings,
    probe,
)
from docsim.models.kernels.residuals import Residuals, encode, fit_buckets, refine
from docsim.models.kernels.scan import fit_basis, project
from docsim.search.arrays import Positions
from docsim.search.candidates.cells_file import cells_file, load_cells, save_cells
from docsim.search.order import top_k
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.served.mapped_rows import MappedRows
from docsim.search.served.sentence_scan import BLOCK_ROWS, ScanShape, fit_sample, scan_basis
from docsim.search.settings import SearchSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cells:
    """A collection's cells: the basis they live in, the centroids' postings (with each
    sentence's cell) and each sentence's residual code, rows in document order."""

    basis: torch.Tensor  # (d, k)
    postings: CellPostings
    residuals: Residuals

    def memory_bytes(self) -> int:
        basis = int(self.basis.element_size() * self.basis.numel())
        return basis + self.postings.memory_bytes() + self.residuals.memory_bytes()


class CentroidCandidates:
    """The cells of one loaded version's sentences, and the candidates they give a query.

    Args:
        cells: the basis, postings and residual codes.
        document_start: `(D + 1,)` each document's first sentence row.
    """

    def __init__(self, cells: Cells, document_start: np.ndarray) -> None:
        self.cells = cells
        self.document_start = document_start

    @classmethod
    def of_index(
        cls, index: LoadedIndex, *, dimensions: int, seed: int, basis: torch.Tensor | None = None
    ) -> CentroidCandidates:
        """Fit the cells of `index`'s sentences (in `basis`, or one fitted on the sample with
        `dimensions` kept) and code every sentence."""
        started = time.perf_counter()
        rows = index.vectors["sentence"]
        start = index.doc_unit_start["sentence"]
        cells = fit_cells(rows, start, dimensions=dimensions, seed=seed, basis=basis)
        logger.info(
            "Fitted %d cells over %d sentences in %.1f s (%.1f bytes a sentence)",
            cells.postings.n_cells,
            len(rows),
            time.perf_counter() - started,
            cells.memory_bytes() / max(1, len(rows)),
        )
        return cls(cells, start)

    def changed(self, old: LoadedIndex, new: LoadedIndex) -> CentroidCandidates:
        """These cells for `new`, `old` with a document change applied: the kept documents'
        sentences keep their codes, the added ones are coded (the cells stay)."""
        keep = np.isin(old.doc_ids, new.doc_ids)  # (D_old,)
        n_kept = int(keep.sum())
        start = new.doc_unit_start["sentence"]
        cells = self.cells
        if not np.array_equal(new.doc_ids[:n_kept], old.doc_ids[keep]):
            return CentroidCandidates(recoded(new.vectors["sentence"], start, cells), start)
        row_kept = np.repeat(keep, np.diff(self.document_start))  # (R_old,)
        added = new.vectors["sentence"][int(start[n_kept]) : int(start[-1])]  # (a, d)
        codes, packed = code_rows(added, cells)
        kept = torch.from_numpy(row_kept)
        found = Cells(
            cells.basis,
            postings(
                torch.cat([cells.postings.codes[kept], codes]),
                torch.from_numpy(start),
                cells.postings.centroids,
            ),
            cells.residuals.kept(kept, packed),
        )
        return CentroidCandidates(found, start)

    def memory_bytes(self) -> int:
        return self.cells.memory_bytes()

    def _products(self, query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The query's sentences `(n, d)` projected `(n, k)`, and their products with the
        centroids `(n, C)`."""
        projected = project(query, self.cells.basis).float()
        return projected, projected @ self.cells.postings.centroids.T

    def scores(self, query: torch.Tensor, n_probe: int) -> np.ndarray:
        """`(D,)` every document's centroid interaction with the query's sentences `(n, d)`."""
        _, products = self._products(query)
        return interaction(probe(products, n_probe), self.cells.postings).numpy()

    def refined(self, query: torch.Tensor, documents: Positions, n_probe: int) -> np.ndarray:
        """`(M,)` the approximate `maxsim` of `documents` `(M,)` from the residual codes of
        their sentences in the cells the query's sentences `(n, d)` probe `n_probe` deep."""
        projected, products = self._products(query)
        return self._refined(projected, probe(products, n_probe), documents)

    def _refined(self, projected: torch.Tensor, found: Probe, documents: Positions) -> np.ndarray:
        cells = self.cells
        return refine(
            projected,
            found,
            torch.from_numpy(np.asarray(documents, dtype=np.int64)),
            torch.from_numpy(self.document_start),
            cells.postings.codes,
            cells.residuals,
            cells.postings.centroids,
        ).numpy()

    def candidates(
        self,
        query: torch.Tensor,
        allowed: Positions,
        *,
        n_probe: int,
        wide: int,
        refine_probe: int,
        most: int,
        refine_products: int | None = None,
    ) -> Positions:
        """Positions (ascending) of at most `most` documents of `allowed` for the query's
        sentences `(n, d)`: the `wide` best by centroid interaction (`n_probe` cells a query
        sentence), then the `most` best of those by the residual codes of their sentences in
        the `refine_probe` best cells of some query sentence (ties: the lower position).
        With `refine_products`, fewer than `wide` are refined where the query's sentences
        times theirs (at the collection's mean length) would exceed it."""
        if len(allowed) <= most:
            return np.sort(allowed)
        if refine_products is not None:
            mean_length = float(self.document_start[-1]) / max(1, len(self.document_start) - 1)
            per_document = len(query) * max(1.0, mean_length)
            wide = min(wide, int(refine_products / per_document))
        projected, products = self._products(query)  # (n, k), (n, C)
        scores = interaction(probe(products, n_probe), self.cells.postings).numpy()  # (D,)
        positions = np.arange(len(scores))  # ties: the lower position
        first = np.sort(top_k(scores, allowed, max(wide, most), positions))
        if len(first) <= most:
            return first
        second = self._refined(projected, probe(products, refine_probe), first)
        return np.sort(first[np.argsort(-second, kind="stable")[:most]])


def probe_depth(n_sentences: int, most: int, budget: int) -> int:
    """The cells each of a query's `n_sentences` probes: `most`, or fewer where the query
    would probe more than `budget` cells in all (one at least)."""
    return max(1, min(most, budget // max(1, n_sentences)))


def searched(
    cells: CentroidCandidates, query: torch.Tensor, allowed: Positions, settings: SearchSettings
) -> Positions:
    """`cells.candidates` with `settings`' probes (within the query's probe budget), widths
    and budget of products."""
    return cells.candidates(
        query,
        allowed,
        n_probe=probe_depth(len(query), settings.candidates.probe, settings.candidates.probe_cells),
        wide=settings.candidates.refine,
        refine_probe=settings.candidates.refine_probe,
        most=settings.candidates.max_documents,
        refine_products=settings.candidates.refine_products,
    )


class LazyCentroids:
    """A version's `CentroidCandidates`, fitted on first use (once, whichever thread asks
    first) or given, carried through document changes when they were fitted."""

    def __init__(
        self,
        index: LoadedIndex,
        *,
        dimensions: int,
        seed: int,
        basis: torch.Tensor | None = None,
        found: CentroidCandidates | None = None,
    ) -> None:
        self.index = index
        self.dimensions = dimensions
        self.seed = seed
        self.basis = basis
        self._found = found
        self._lock = threading.Lock()

    def get(self) -> CentroidCandidates:
        """The cells: kept in memory, else read from the version's folder where a fit with
        the same settings kept them (`cells_file`), else fitted now and kept there."""
        with self._lock:
            if self._found is None:
                index, dimensions, seed = self.index, self.dimensions, self.seed
                rows = index.vectors["sentence"]
                if self.basis is None and len(rows):  # the basis `fit_cells` would fit: a
                    # sharded coordinator (no scan of its own) finds the cells one process kept
                    self.basis = scan_basis(rows, ScanShape(dimensions, 0, seed))
                path = cells_file(index, dimensions=dimensions, seed=seed, basis=self.basis)
                start = index.doc_unit_start["sentence"]
                kept = load_cells(path)
                if kept is not None and kept[1].codes.shape[0] == start[-1]:
                    self._found = CentroidCandidates(Cells(*kept), start)
                    logger.info("Read the cells fitted before from %s", path.name)
                else:
                    self._found = CentroidCandidates.of_index(
                        index, dimensions=dimensions, seed=seed, basis=self.basis
                    )
                    cells = self._found.cells
                    save_cells(path, cells.basis, cells.postings, cells.residuals)
            return self._found

    @property
    def fitted(self) -> bool:
        return self._found is not None

    def changed(self, new: LoadedIndex, basis: torch.Tensor | None = None) -> LazyCentroids:
        """The cells of `new` (this version with a document change applied): carried over
        when fitted here, else fitted on `new`'s first use."""
        found = self._found.changed(self.index, new) if self._found is not None else None
        return LazyCentroids(
            new, dimensions=self.dimensions, seed=self.seed, basis=basis, found=found
        )


def fit_cells(
    rows: torch.Tensor | MappedRows,
    document_start: np.ndarray,
    *,
    dimensions: int,
    seed: int,
    basis: torch.Tensor | None = None,
) -> Cells:
    """The cells of sentences `rows` `(R, d)`, document d's being rows
    `document_start[d]:document_start[d + 1]`, in `basis` (or one fitted with `dimensions`
    kept): k-means and the residuals' buckets on the fixed sample `fit_sample` draws with
    `seed`, then every row coded."""
    sample = fit_sample(rows, seed)  # (m, d)
    if basis is None:
        basis = fit_basis(sample, min(dimensions, sample.shape[1]))  # (d, k)
    projected = project(sample, basis).float()  # (m, k)
    n_cells = min(cell_count(len(rows)), len(sample))
    centroids = (  # (C, k)
        torch.from_numpy(kmeans(projected.numpy(), n_cells, seed=seed))
        if n_cells
        else torch.zeros(1, basis.shape[1])
    )
    nearest = NearestCentroid(centroids.numpy())
    offsets = projected - centroids[torch.from_numpy(nearest(projected.numpy()))]  # (m, k)
    cutoffs, values = fit_buckets(offsets) if len(offsets) else _no_buckets(basis.shape[1])
    empty = Cells(
        basis,
        postings(torch.empty(0, dtype=torch.int32), torch.zeros(1, dtype=torch.long), centroids),
        Residuals(torch.empty(0, -(-basis.shape[1] // 4), dtype=torch.uint8), cutoffs, values),
    )
    return recoded(rows, document_start, empty, nearest)


def recoded(
    rows: torch.Tensor | MappedRows,
    document_start: np.ndarray,
    cells: Cells,
    nearest: NearestCentroid | None = None,
) -> Cells:
    """`cells` (their basis, centroids and buckets) with every one of `rows` `(R, d)` coded."""
    codes, packed = code_rows(rows, cells, nearest)
    residuals = cells.residuals
    return Cells(
        cells.basis,
        postings(codes, torch.from_numpy(document_start), cells.postings.centroids),
        Residuals(packed, residuals.cutoffs, residuals.values),
    )


def code_rows(
    rows: torch.Tensor | MappedRows, cells: Cells, nearest: NearestCentroid | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`(R,)` int32 the cell and `(R, ceil(k / 4))` uint8 the residual code of each of `rows`
    `(R, d)` (a tensor or mapped rows), in blocks (`nearest`: the cells' search, if built)."""
    centroids, cutoffs = cells.postings.centroids, cells.residuals.cutoffs
    nearest = nearest or NearestCentroid(centroids.numpy())
    # written in place: a list of blocks and their concatenation would hold them twice
    codes = torch.empty(len(rows), dtype=torch.int32)
    packed = torch.empty(len(rows), -(-cells.basis.shape[1] // 4), dtype=torch.uint8)
    for i in range(0, len(rows), BLOCK_ROWS):
        block = project(rows[i : i + BLOCK_ROWS], cells.basis).float()  # (b, k)
        found = torch.from_numpy(nearest(block.numpy())).to(torch.int32)
        codes[i : i + len(block)] = found
        packed[i : i + len(block)] = encode(block, found, centroids, cutoffs)
    return codes, packed


def _no_buckets(k: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(k, 3), torch.zeros(k, 4)
