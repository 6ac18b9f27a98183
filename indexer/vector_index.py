"""Vector search behind one adapter. This is the only module that imports `faiss`.

Every index maps int64 ids (the SQL primary keys) to float32 unit vectors and searches by
inner product, which is cosine similarity on unit vectors. `NumpyIndex` is the brute-force
reference the FAISS path is tested against.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import faiss
import numpy as np

logger = logging.getLogger(__name__)

METRIC = "inner_product"


@dataclass(frozen=True)
class Hits:
    """One query's results, best first; FAISS's -1 padding labels are dropped."""

    scores: np.ndarray  # (k,) float32
    ids: np.ndarray  # (k,) int64


class VectorIndex(Protocol):
    def search(self, queries: np.ndarray, k: int) -> list[Hits]: ...

    @property
    def count(self) -> int: ...


def gpu_count() -> int:
    """Number of GPUs FAISS can use (0 with the CPU build)."""
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get is not None else 0


def choose_factory(n_vectors: int, flat_max_vectors: int, large_factory: str) -> str:
    """`Flat` (exact) for small levels, the configured factory for large ones."""
    if n_vectors <= flat_max_vectors:
        return "Flat"
    nlist = max(1, min(int(4 * math.sqrt(n_vectors)), n_vectors // 39))
    return large_factory.format(nlist=nlist)


def _as_float32(vectors: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(vectors, dtype=np.float32)


class FaissIndex:
    """A FAISS index wrapped in an IDMap, searched by inner product.

    Args:
        index: a trained `faiss.Index` whose labels are the caller's int64 ids.
        factory: the factory string it was built from (recorded in manifests).
    """

    def __init__(self, index: faiss.Index, factory: str) -> None:
        self.index = index
        self.factory = factory

    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        ids: np.ndarray,
        factory: str = "Flat",
        *,
        nprobe: int = 32,
        use_gpu: bool = False,
        seed: int = 0,
    ) -> FaissIndex:
        """Build an index over `vectors` `(n, d)` labelled by `ids` `(n,)` int64."""
        vectors = _as_float32(vectors)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if vectors.ndim != 2 or vectors.shape[0] != ids.shape[0]:
            raise ValueError(f"vectors {vectors.shape} and ids {ids.shape} do not match")
        dim = vectors.shape[1]
        inner = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        if not inner.is_trained:
            # Train on a fixed random sample, so that a rebuild gives the same index.
            rng = np.random.default_rng(seed)
            sample = vectors[
                rng.choice(len(vectors), size=min(len(vectors), 100_000), replace=False)
            ]
            trainer = _to_gpu(inner) if use_gpu else inner
            trainer.train(sample)
            inner = faiss.index_gpu_to_cpu(trainer) if use_gpu else trainer
        if hasattr(inner, "nprobe"):
            inner.nprobe = nprobe
        index = faiss.IndexIDMap2(inner)
        index.add_with_ids(vectors, ids)
        return cls(index, factory)

    @property
    def count(self) -> int:
        return int(self.index.ntotal)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    def search(self, queries: np.ndarray, k: int) -> list[Hits]:
        """The `k` best ids for each row of `queries` `(q, d)`."""
        queries = _as_float32(np.atleast_2d(queries))
        if self.count == 0 or k <= 0:
            return [Hits(np.empty(0, np.float32), np.empty(0, np.int64)) for _ in queries]
        scores, ids = self.index.search(queries, min(k, self.count))  # (q, k), (q, k)
        keep = ids >= 0
        return [Hits(scores[i][keep[i]], ids[i][keep[i]]) for i in range(len(queries))]

    def ids(self) -> np.ndarray:
        """All stored ids, in insertion order `(n,)` int64."""
        return faiss.vector_to_array(self.index.id_map).astype(np.int64)

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        """The stored vectors of `ids` `(n,)` -> `(n, d)` (exact for Flat)."""
        return (
            np.stack([self.index.reconstruct(int(i)) for i in ids])
            if len(ids)
            else np.empty((0, self.dim))
        )

    def copy(self) -> FaissIndex:
        """An independent copy (searches on the original may continue meanwhile)."""
        index = self.index
        if _is_gpu(index):
            return FaissIndex(_to_gpu(faiss.index_gpu_to_cpu(index)), self.factory)
        return FaissIndex(faiss.clone_index(index), self.factory)

    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        """Add `vectors` `(n, d)` under `ids` `(n,)` (in place)."""
        if len(ids):
            self.index.add_with_ids(_as_float32(vectors), np.ascontiguousarray(ids, np.int64))

    def remove(self, ids: np.ndarray) -> int:
        """Remove `ids` (in place); returns how many were stored."""
        if not len(ids):
            return 0
        return int(self.index.remove_ids(np.ascontiguousarray(ids, dtype=np.int64)))

    def to_gpu(self) -> FaissIndex:
        """A copy on all visible GPUs (sharded when there are several)."""
        return FaissIndex(_to_gpu(self.index), self.factory)

    def save(self, path: Path) -> None:
        index = self.index
        if _is_gpu(index):
            index = faiss.index_gpu_to_cpu(index)
        faiss.write_index(index, str(path))

    @classmethod
    def load(cls, path: Path, factory: str, *, mmap: bool = False) -> FaissIndex:
        flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if mmap else 0
        return cls(faiss.read_index(str(path), flags), factory)


def _is_gpu(index: faiss.Index) -> bool:
    return "Gpu" in type(index).__name__ or "Shards" in type(index).__name__


def _to_gpu(index: faiss.Index) -> faiss.Index:
    n = gpu_count()
    if n == 0:
        raise RuntimeError("no GPU is available to FAISS (is faiss-gpu installed?)")
    if n == 1:
        return faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    options = faiss.GpuMultipleClonerOptions()
    options.shard = True
    return faiss.index_cpu_to_all_gpus(index, options)


class NumpyIndex:
    """Exact brute-force inner-product search in numpy: the reference implementation."""

    def __init__(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        self.vectors = _as_float32(vectors)
        self.ids = np.asarray(ids, dtype=np.int64)

    @property
    def count(self) -> int:
        return len(self.ids)

    def search(self, queries: np.ndarray, k: int) -> list[Hits]:
        scores = _as_float32(np.atleast_2d(queries)) @ self.vectors.T  # (q, n)
        k = min(k, self.count)
        results = []
        for row in scores:
            top = np.argsort(-row, kind="stable")[:k]
            results.append(Hits(row[top], self.ids[top]))
        return results
