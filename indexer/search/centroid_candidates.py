"""Candidate mode's documents, PLAID-style: centroid interaction over the sentence level's cells
(`models.centroids`), fitted once per loaded version in the projection `models.scan` uses.

The cells are fitted on the same fixed sample of runs of sentences as the compressed level's
basis (`sentence_scan.fit_sample`), in its space (`scan_dimensions` leading directions), with
FAISS's k-means; every sentence is then assigned to its cell. A document change assigns only
the added documents' sentences and keeps the cells. Nothing here reads a sentence vector per
query: a query costs the products of its sentences with the centroids and a pass over the
probed cells' postings.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import torch

from docsim.indexer.search.arrays import Positions
from docsim.indexer.search.loaded_index import LoadedIndex
from docsim.indexer.search.mapped_rows import MappedRows
from docsim.indexer.search.sentence_scan import BLOCK_ROWS, fit_sample
from docsim.indexer.store.vector_index import kmeans
from docsim.models.centroids import CellPostings, assign, cell_count, changed, interaction, postings
from docsim.models.scan import fit_basis, project

logger = logging.getLogger(__name__)


class CentroidCandidates:
    """The cells of one loaded version's sentences, and the candidates they give a query.

    Args:
        basis: `(d, k)` the projection the cells live in.
        cells: the cells' centroids and postings.
        document_start: `(D + 1,)` each document's first sentence row.
    """

    def __init__(self, basis: torch.Tensor, cells: CellPostings, document_start: np.ndarray):
        self.basis = basis
        self.cells = cells
        self.document_start = document_start

    @classmethod
    def of_index(
        cls, index: LoadedIndex, *, dimensions: int, seed: int, basis: torch.Tensor | None = None
    ) -> CentroidCandidates:
        """Fit the cells of `index`'s sentences (in `basis`, or one fitted on the sample with
        `dimensions` kept) and assign every sentence to one."""
        started = time.perf_counter()
        rows = index.vectors["sentence"]
        start = index.doc_unit_start["sentence"]
        basis, cells = fit_cells(rows, start, dimensions=dimensions, seed=seed, basis=basis)
        logger.info(
            "Fitted %d cells over %d sentences in %.1f s (%.1f MiB)",
            cells.n_cells,
            len(rows),
            time.perf_counter() - started,
            cells.memory_bytes() / 2**20,
        )
        return cls(basis, cells, start)

    def changed(self, old: LoadedIndex, new: LoadedIndex) -> CentroidCandidates:
        """These cells for `new`, `old` with a document change applied: the kept documents'
        sentences keep their cells, the added ones are assigned."""
        keep = np.isin(old.doc_ids, new.doc_ids)  # (D_old,)
        n_kept = int(keep.sum())
        start = new.doc_unit_start["sentence"]
        if not np.array_equal(new.doc_ids[:n_kept], old.doc_ids[keep]):
            codes = codes_of(new.vectors["sentence"], self.basis, self.cells.centroids)
            return CentroidCandidates(
                self.basis, postings(codes, torch.from_numpy(start), self.cells.centroids), start
            )
        added = new.vectors["sentence"][int(start[n_kept]) : int(start[-1])]  # (a, d)
        cells = changed(
            self.cells,
            torch.from_numpy(self.document_start),
            torch.from_numpy(keep),
            codes_of(added, self.basis, self.cells.centroids),
            torch.from_numpy(start),
        )
        return CentroidCandidates(self.basis, cells, start)

    def memory_bytes(self) -> int:
        return self.cells.memory_bytes() + self.basis.element_size() * self.basis.numel()

    def scores(self, query: torch.Tensor, n_probe: int) -> np.ndarray:
        """`(D,)` every document's approximate `maxsim` for the query's sentences `(n, d)`."""
        return interaction(project(query, self.basis), self.cells, n_probe).numpy()

    def candidates(
        self, query: torch.Tensor, allowed: Positions, n_probe: int, most: int
    ) -> Positions:
        """Positions (ascending) of the `most` documents of `allowed` with the best
        approximate `maxsim` for the query's sentences `(n, d)` (ties: the lower position)."""
        if len(allowed) <= most:
            return np.sort(allowed)
        scores = self.scores(query, n_probe)[allowed]
        best = np.argsort(-scores, kind="stable")[:most]
        return np.sort(allowed[best])


def fit_cells(
    rows: torch.Tensor | MappedRows,
    document_start: np.ndarray,
    *,
    dimensions: int,
    seed: int,
    basis: torch.Tensor | None = None,
) -> tuple[torch.Tensor, CellPostings]:
    """The basis (given, or fitted with `dimensions` kept) and the cells of sentences `rows`
    `(R, d)`, document d's being rows `document_start[d]:document_start[d + 1]`: k-means on
    the fixed sample `fit_sample` draws with `seed`, projected, then every row assigned."""
    sample = fit_sample(rows, seed)  # (m, d)
    if basis is None:
        basis = fit_basis(sample, min(dimensions, sample.shape[1]))  # (d, k)
    n_cells = min(cell_count(len(rows)), len(sample))
    centroids = (  # (C, k)
        torch.from_numpy(kmeans(project(sample, basis).float().numpy(), n_cells, seed=seed))
        if n_cells
        else torch.zeros(1, basis.shape[1])
    )
    codes = codes_of(rows, basis, centroids)
    return basis, postings(codes, torch.from_numpy(document_start), centroids)


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
        with self._lock:
            if self._found is None:
                self._found = CentroidCandidates.of_index(
                    self.index, dimensions=self.dimensions, seed=self.seed, basis=self.basis
                )
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


def codes_of(
    rows: torch.Tensor | MappedRows, basis: torch.Tensor, centroids: torch.Tensor
) -> torch.Tensor:
    """`(R,)` the cell of each of `rows` `(R, d)` (a tensor or mapped rows), in blocks."""
    return torch.cat(
        [torch.empty(0, dtype=torch.int32)]
        + [
            assign(project(rows[i : i + BLOCK_ROWS], basis), centroids)
            for i in range(0, len(rows), BLOCK_ROWS)
        ]
    )
