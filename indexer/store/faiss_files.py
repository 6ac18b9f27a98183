"""An IVF-Flat level's one copy on disk is its float16 file; beside it, `<level>.ivf.npz` holds
what places each vector in the index: the coarse quantizer's centroids and each vector's list
(4 bytes a vector, where FAISS's own file held every vector again as float32).

`IvfLists` records the lists while a build streams a level's vectors, assigning them as adding
them would (in the same slices of `vector_index.ADD_ROWS`), so that the index is never filled in
memory. `ivf_flat_index` fills the index from the float16 file with the recorded lists, without
assigning anything again: it is the index FAISS fills with the same vectors, byte for byte
(tested). A Flat level needs nothing beside its vectors: `flat_index` fills its exact index in
place (`level_files.open_level_index` chooses)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import faiss
import numpy as np

from docsim.indexer.store import vector_index
from docsim.indexer.store.stored_rows import float16_rows, row_dim
from docsim.indexer.store.vector_index import FLAT, FaissIndex, as_float32


class IvfLists:
    """The list of every vector of an IVF-Flat level, recorded as its blocks pass.

    Filling an IVF index holds every vector as float32 (1.6 GB for a million 384-d vectors);
    `assign` keeps only each vector's list number, and `save` writes them with the trained
    quantizer's centroids."""

    def __init__(self, index: FaissIndex) -> None:
        inner = faiss.downcast_index(index.host.index)
        if not self.accepts(index) or not isinstance(inner, faiss.IndexIVFFlat):
            raise TypeError(f"not an empty IVF-Flat index on the CPU: {type(inner).__name__}")
        self.index = index  # owns `ivf` (a view into its IDMap): kept alive with it
        self.ivf = inner
        self._lists: list[np.ndarray] = []  # (n_slice,) list numbers, in order

    @staticmethod
    def accepts(index: FaissIndex) -> bool:
        inner = faiss.downcast_index(index.host.index)
        return (
            not index.on_gpu
            and type(inner) is faiss.IndexIVFFlat
            and inner.ntotal == 0
            and inner.metric_type == faiss.METRIC_INNER_PRODUCT
        )

    def assign(self, vectors: np.ndarray) -> None:
        """Assign the next block of vectors `(n, d)` (any float dtype) to their lists."""
        for r0 in range(0, len(vectors), vector_index.ADD_ROWS):
            part = as_float32(vectors[r0 : r0 + vector_index.ADD_ROWS])
            self._lists.append(self.ivf.quantizer.assign(part, 1).ravel().astype(np.int32))

    def save(self, path: Path, count: int) -> None:
        """Write the centroids `(nlist, d)`, the lists of the `count` vectors assigned `(n,)`
        and the index's `nprobe` to `path` (a `.npz`)."""
        lists = np.concatenate(self._lists) if self._lists else np.empty(0, np.int32)
        if len(lists) != count:
            raise ValueError(f"{len(lists)} vectors assigned but {count} in the level")
        quantizer = faiss.downcast_index(self.ivf.quantizer)
        centroids = quantizer.reconstruct_n(0, self.ivf.nlist)  # (nlist, d) float32
        with path.open("wb") as out:
            np.savez(out, centroids=centroids, lists=lists, nprobe=np.int64(self.ivf.nprobe))


def ivf_flat_index(
    factory: str, lists_file: Path, vectors: np.ndarray, ids: np.ndarray
) -> FaissIndex:
    """The IVF-Flat index of `factory` over the stored `vectors` (`stored_rows`: a mapped file
    is read a slice at a time) labelled by `ids` `(n,)`, each vector in the list `lists_file`
    records for it (`IvfLists.save`).

    Raises:
        ValueError: the lists file does not hold one list per vector.
    """
    with np.load(lists_file) as saved:
        centroids, lists, nprobe = saved["centroids"], saved["lists"], int(saved["nprobe"])
    n, dim = len(vectors), row_dim(vectors)
    if len(lists) != n or len(ids) != n:
        raise ValueError(f"{lists_file.name}: {len(lists)} lists for {n} vectors, {len(ids)} ids")
    inner = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.extract_index_ivf(inner)
    ivf.quantizer.add(as_float32(centroids))
    ivf.is_trained = inner.is_trained = True
    ivf.nprobe = nprobe
    host = faiss.IndexIDMap2(inner)  # empty here: the IVF's entries are added below
    for r0 in range(0, n, vector_index.ADD_ROWS):
        part = np.ascontiguousarray(
            as_float32(float16_rows(vectors[r0 : r0 + vector_index.ADD_ROWS]))
        )
        positions = np.arange(r0, r0 + len(part), dtype=np.int64)  # the IVF labels entries so
        numbers = np.ascontiguousarray(lists[r0 : r0 + len(part)], dtype=np.int64)
        ivf.add_core(
            len(part), faiss.swig_ptr(part), faiss.swig_ptr(positions), faiss.swig_ptr(numbers)
        )
    faiss.copy_array_to_vector(np.ascontiguousarray(ids, np.int64), host.id_map)
    host.ntotal = n
    host.construct_rev_map()
    return FaissIndex(host, factory)


def flat_index(dim: int, ids: np.ndarray, blocks: Iterable[np.ndarray]) -> FaissIndex:
    """The exact (Flat) index of the vectors `blocks` yields in order `(n_b, dim)` (any float
    dtype), labelled by `ids` `(n,)`: its storage allocated once and filled in place, where
    adding a block at a time would grow it by reallocation (up to twice its size at once).
    Byte for byte the index `FaissIndex.build` makes of the same vectors (tested).

    Raises:
        ValueError: the blocks do not hold one vector per id.
    """
    n = len(ids)
    inner = faiss.IndexFlat(dim, faiss.METRIC_INNER_PRODUCT)  # what the factory makes
    host = faiss.IndexIDMap2(inner)  # empty here: the Flat storage is filled below
    inner.codes.resize(n * dim * 4)
    storage = faiss.rev_swig_ptr(inner.codes.data(), n * dim * 4)  # (n * d * 4,) uint8
    rows = storage.view(np.float32).reshape(n, dim) if n else np.empty((0, dim), np.float32)
    at = 0
    for block in blocks:
        rows[at : at + len(block)] = as_float32(block)
        at += len(block)
    if at != n:
        raise ValueError(f"{at} vectors for {n} ids")
    inner.ntotal = n
    faiss.copy_array_to_vector(np.ascontiguousarray(ids, np.int64), host.id_map)
    host.ntotal = n
    host.construct_rev_map()
    return FaissIndex(host, FLAT)
