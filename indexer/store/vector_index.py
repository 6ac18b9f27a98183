"""Vector search behind one adapter, `FaissIndex`. FAISS is imported here and, for the files
a build streams to disk in FAISS's format, in `indexer.store.faiss_files`, nowhere else.

Every index maps int64 ids (the SQL primary keys) to float32 unit vectors and searches by
inner product, which is cosine similarity on unit vectors. `NumpyIndex`
(`indexer.store.numpy_index`) is the brute-force reference the FAISS path is tested against.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import faiss
import numpy as np

logger = logging.getLogger(__name__)

METRIC = "inner_product"
ADD_ROWS = 65_536  # vectors cast to float32 and added at a time


@dataclass(frozen=True)
class Hits:
    """One query's results, best first; FAISS's -1 padding labels are dropped."""

    scores: np.ndarray  # (k,) float32
    ids: np.ndarray  # (k,) int64


class VectorIndex(Protocol):
    def search(
        self, queries: np.ndarray, k: int, within: np.ndarray | None = None
    ) -> list[Hits]: ...

    @property
    def count(self) -> int: ...


def gpu_count() -> int:
    """Number of GPUs FAISS can use (0 with the CPU build)."""
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get is not None else 0


FLAT = "Flat"  # the exact index's factory


def choose_factory(n_vectors: int, flat_max_vectors: int, large_factory: str) -> str:
    """`Flat` (exact) for small levels, the configured factory for large ones."""
    if n_vectors <= flat_max_vectors:
        return FLAT
    nlist = max(1, min(int(4 * math.sqrt(n_vectors)), n_vectors // 39))
    return large_factory.format(nlist=nlist)


def kmeans(sample: np.ndarray, k: int, *, seed: int, iterations: int = 10) -> np.ndarray:
    """`(k, d)` float32 centroids of the rows of `sample` `(m, d)`, by FAISS's k-means with
    unit-norm centroids (spherical: the products with them are cosines)."""
    sample = as_float32(sample)
    if not 1 <= k <= len(sample):
        raise ValueError(f"cannot fit {k} centroids on {len(sample)} rows")
    found = faiss.Kmeans(
        sample.shape[1],
        k,
        niter=iterations,
        seed=seed,
        spherical=True,
        max_points_per_centroid=max(256, -(-len(sample) // k)),
        min_points_per_centroid=1,
    )
    found.train(sample)
    return np.asarray(found.centroids, dtype=np.float32)


class NearestCentroid:
    """The nearest of `centroids` `(C, d)` by inner product, for rows at a time (FAISS's
    blocked exhaustive search: 2.6 times torch's product-then-argmax at d = 64 here)."""

    def __init__(self, centroids: np.ndarray) -> None:
        centroids = as_float32(centroids)
        self._index = faiss.IndexFlatIP(centroids.shape[1])
        self._index.add(centroids)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """`(m,)` int64 the nearest centroid of each of `rows` `(m, d)`."""
        if not len(rows):
            return np.empty(0, dtype=np.int64)
        _, found = self._index.search(as_float32(rows), 1)
        return np.asarray(found[:, 0], dtype=np.int64)


def as_float32(vectors: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(vectors, dtype=np.float32)


class FaissIndex:
    """A FAISS index wrapped in an IDMap, searched by inner product.

    Args:
        index: a trained `faiss.Index` whose labels are the caller's int64 ids: the one that
            answers searches.
        factory: the factory string it was built from (recorded in manifests).
        host: for an index on the GPU(s), the CPU index it was copied from. Ids, vectors,
            copies and saves come from the host; a change goes to the host and the GPU copy
            is made again from it.
    """

    def __init__(
        self, index: faiss.Index, factory: str, host: faiss.IndexIDMap | None = None
    ) -> None:
        self.index = index
        self.factory = factory
        self.host = host if host is not None else _id_mapped(index)

    @property
    def on_gpu(self) -> bool:
        return self.host is not self.index

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
        """Build an index over `vectors` `(n, d)` (float32, or float16 cast a block at a
        time) labelled by `ids` `(n,)` int64."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if vectors.ndim != 2 or vectors.shape[0] != ids.shape[0]:
            raise ValueError(f"vectors {vectors.shape} and ids {ids.shape} do not match")
        index = cls.trained(
            vectors.shape[1],
            factory,
            lambda rows: vectors[rows],
            len(ids),
            nprobe=nprobe,
            use_gpu=use_gpu,
            seed=seed,
        )
        for r0 in range(0, len(ids), ADD_ROWS):
            index.add(vectors[r0 : r0 + ADD_ROWS], ids[r0 : r0 + ADD_ROWS])
        return index

    @classmethod
    def trained(
        cls,
        dim: int,
        factory: str,
        rows: Callable[[np.ndarray], np.ndarray],
        n: int,
        *,
        nprobe: int = 32,
        use_gpu: bool = False,
        seed: int = 0,
    ) -> FaissIndex:
        """An empty index of `factory`, trained (when it needs it) on a fixed random sample
        of at most 100,000 of the `n` vectors to come, so that a rebuild gives the same
        index; `rows(positions)` gives the vectors at those positions, in their order. The
        caller then `add`s the vectors, as few at a time as it likes."""
        inner = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        if not inner.is_trained:
            rng = np.random.default_rng(seed)
            sample = as_float32(rows(rng.choice(n, size=min(n, 100_000), replace=False)))
            trainer = faiss.index_cpu_to_gpu(_gpu_resources(0), 0, inner) if use_gpu else inner
            trainer.train(sample)
            inner = faiss.index_gpu_to_cpu(trainer) if use_gpu else trainer
        if hasattr(inner, "nprobe"):
            inner.nprobe = nprobe
        return cls(faiss.IndexIDMap2(inner), factory)

    @property
    def count(self) -> int:
        return int(self.index.ntotal)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    def search(self, queries: np.ndarray, k: int, within: np.ndarray | None = None) -> list[Hits]:
        """The `k` best ids for each row of `queries` `(q, d)`; with `within`, only among
        those ids (a FAISS id selector on the CPU index: exact for Flat)."""
        queries = as_float32(np.atleast_2d(queries))
        if within is not None:
            within = np.ascontiguousarray(within, dtype=np.int64)
        if self.count == 0 or k <= 0 or (within is not None and not len(within)):
            return [Hits(np.empty(0, np.float32), np.empty(0, np.int64)) for _ in queries]
        if within is None:
            scores, ids = self.index.search(queries, min(k, self.count))  # (q, k), (q, k)
        else:
            selector = faiss.IDSelectorBatch(within)  # external ids: the IDMap translates
            ivf = faiss.try_extract_index_ivf(faiss.downcast_index(self.host.index))
            # faiss's Python wrapper takes the fields as keywords (and keeps `sel` alive);
            # its stubs only know the bare constructors
            params = (
                faiss.SearchParametersIVF(sel=selector, nprobe=ivf.nprobe)  # type: ignore[call-arg]
                if ivf is not None
                else faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
            )
            scores, ids = self.host.search(queries, min(k, len(within)), params=params)
        keep = ids >= 0
        return [Hits(scores[i][keep[i]], ids[i][keep[i]]) for i in range(len(queries))]

    def flat_storage(self) -> int | None:
        """The address of the vectors a CPU Flat index stores, or None for other indexes."""
        inner = self._flat()
        return int(inner.get_xb()) if inner is not None else None

    def _flat(self) -> faiss.IndexFlat | None:
        """The CPU Flat index inside the IDMap when it is one and holds vectors, else None."""
        inner = faiss.downcast_index(self.host.index)
        if not isinstance(inner, faiss.IndexFlat) or self.count == 0:
            return None
        return inner

    def stored_vectors(self) -> np.ndarray | None:
        """The float32 vectors a Flat index stores `(n, d)`, in insertion order, as a view of
        the index's own memory (no copy), or None for other indexes. The view keeps this
        index's storage alive; it is valid until the index is changed (`add`, `remove`)."""
        inner = self._flat()
        if inner is None:
            return None
        raw = faiss.rev_swig_ptr(inner.get_xb(), self.count * self.dim)  # (n * d,) a view
        return np.asarray(_Owned(raw.reshape(self.count, self.dim), self.host))

    def ids(self) -> np.ndarray:
        """All stored ids, in insertion order `(n,)` int64."""
        return faiss.vector_to_array(self.host.id_map).astype(np.int64)

    def reconstruct(self, ids: np.ndarray) -> np.ndarray:
        """The stored vectors of `ids` `(n,)` -> `(n, d)` (exact for Flat)."""
        return (
            np.stack([self.host.reconstruct(int(i)) for i in ids])
            if len(ids)
            else np.empty((0, self.dim))
        )

    def copy(self) -> FaissIndex:
        """An independent copy (searches on the original may continue meanwhile)."""
        host = _id_mapped(faiss.clone_index(self.host))
        return (
            FaissIndex(_to_gpu(host), self.factory, host)
            if self.on_gpu
            else FaissIndex(host, self.factory)
        )

    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        """Add `vectors` `(n, d)` under `ids` `(n,)` (in place)."""
        if len(ids):
            self.host.add_with_ids(as_float32(vectors), np.ascontiguousarray(ids, np.int64))
            self._refresh_gpu()

    def remove(self, ids: np.ndarray) -> int:
        """Remove `ids` (in place); returns how many were stored."""
        if not len(ids):
            return 0
        on_gpu = self.on_gpu
        self.host, removed = _without(self.host, np.asarray(ids, dtype=np.int64))
        self.index = _to_gpu(self.host) if on_gpu else self.host
        return removed

    def _refresh_gpu(self) -> None:
        if self.on_gpu:
            self.index = _to_gpu(self.host)

    def to_gpu(self) -> FaissIndex:
        """A copy on the GPU, or sharded over all visible GPUs when there are several."""
        host = _id_mapped(faiss.clone_index(self.host))
        return FaissIndex(_to_gpu(host), self.factory, host)

    def save(self, path: Path) -> None:
        faiss.write_index(self.host, str(path))

    @classmethod
    def load(cls, path: Path, factory: str, *, mmap: bool = False) -> FaissIndex:
        flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if mmap else 0
        return cls(faiss.read_index(str(path), flags), factory)


def _id_mapped(index: faiss.Index) -> faiss.IndexIDMap:
    """`index` as the IDMap a `FaissIndex` holds on the CPU: its labels are the caller's ids.

    Raises:
        TypeError: `index` is not id-mapped.
    """
    if not isinstance(index, faiss.IndexIDMap):
        raise TypeError(f"a FaissIndex holds an IDMap index, not {type(index).__name__}")
    return index


class _Owned:
    """An array interface over memory `owner` holds: arrays made from it keep `owner` (and so
    its memory) alive."""

    def __init__(self, view: np.ndarray, owner: faiss.Index) -> None:
        self.__array_interface__ = view.__array_interface__
        self._view = view
        self._owner = owner


_GPU_RESOURCES: dict[int, faiss.StandardGpuResources] = {}  # one per device, kept alive


def _gpu_resources(device: int) -> faiss.StandardGpuResources:
    if device not in _GPU_RESOURCES:
        _GPU_RESOURCES[device] = faiss.StandardGpuResources()
    return _GPU_RESOURCES[device]


def shard(
    index: faiss.IndexIDMap,
    n_shards: int,
    place: Callable[[int, faiss.Index], faiss.Index] | None = None,
) -> faiss.Index:
    """Split an id-mapped CPU `index` into `n_shards` disjoint parts (ids dealt round-robin)
    searched together as one `faiss.IndexShards`; `place(i, part)` puts part i on its device
    (the identity by default, which keeps them on the CPU).

    IndexShards queries every part and merges their top k, so a sharded Flat index answers
    exactly as the whole one does."""
    ids = faiss.vector_to_array(index.id_map).astype(np.int64)
    shards = faiss.IndexShards(index.d, True)  # threaded
    shards.successive_ids = False  # keep each part's own ids
    for i in range(n_shards):
        others = np.delete(ids, np.s_[i::n_shards])
        part, _ = _without(_id_mapped(faiss.clone_index(index)), others)
        placed = place(i, part) if place is not None else part
        shards.add_shard(placed)  # faiss's wrapper keeps a reference to it
    return shards


def _without(index: faiss.IndexIDMap, ids: np.ndarray) -> tuple[faiss.IndexIDMap, int]:
    """The id-mapped CPU `index` without `ids` (in place when it can be), and how many of
    them it held.

    `IndexIDMap.remove_ids` assumes that the inner index renumbers what follows a removed
    vector, as `IndexFlat` does; an IVF index keeps its numbers, so removing through the map
    would leave ids pointing at the wrong vectors. Such an index is rebuilt from the vectors
    it keeps (exact for IVF-Flat)."""
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    inner = faiss.downcast_index(index.index)
    if isinstance(inner, faiss.IndexFlat):
        # faiss's wrapper takes the ids as an array; its stub only knows an IDSelector
        return index, int(index.remove_ids(ids))  # type: ignore[arg-type]
    stored = faiss.vector_to_array(index.id_map).astype(np.int64)
    gone = np.isin(stored, ids)
    if not gone.any():
        return index, 0
    ivf = faiss.try_extract_index_ivf(inner)
    if ivf is not None:
        ivf.make_direct_map()  # reconstruct by position
    vectors = inner.reconstruct_n(0, inner.ntotal)[~gone]  # (kept, d): position i is id_map[i]
    fresh = faiss.clone_index(inner)
    fresh.reset()
    rebuilt = faiss.IndexIDMap2(fresh)
    if len(vectors):
        rebuilt.add_with_ids(as_float32(vectors), np.ascontiguousarray(stored[~gone]))
    return rebuilt, int(gone.sum())


def _to_gpu(index: faiss.IndexIDMap) -> faiss.Index:
    """`index` on the GPU (StandardGpuResources), or sharded over every GPU when there are
    several (IndexShards: each GPU holds a disjoint part and searches it)."""
    n = gpu_count()
    if n == 0:
        raise RuntimeError("no GPU is available to FAISS (is faiss-gpu installed?)")
    if n == 1:
        return faiss.index_cpu_to_gpu(_gpu_resources(0), 0, index)
    return shard(index, n, lambda i, part: faiss.index_cpu_to_gpu(_gpu_resources(i), i, part))
