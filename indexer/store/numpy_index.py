"""Exact brute-force inner-product search in numpy: the reference `FaissIndex` is tested
against, with the same interface (`indexer.store.vector_index.VectorIndex`)."""

from __future__ import annotations

import numpy as np

from docsim.indexer.store.vector_index import Hits, as_float32


class NumpyIndex:
    """Exact brute-force inner-product search in numpy: the reference implementation."""

    def __init__(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        self.vectors = as_float32(vectors)
        self.ids = np.asarray(ids, dtype=np.int64)

    @property
    def count(self) -> int:
        return len(self.ids)

    def search(self, queries: np.ndarray, k: int, within: np.ndarray | None = None) -> list[Hits]:
        scores = as_float32(np.atleast_2d(queries)) @ self.vectors.T  # (q, n)
        allowed = np.ones(self.count, bool) if within is None else np.isin(self.ids, within)
        results = []
        for row in scores:
            candidates = np.flatnonzero(allowed)
            top = candidates[np.argsort(-row[candidates], kind="stable")[:k]]
            results.append(Hits(row[top], self.ids[top]))
        return results
