"""FAISS's index files written by a build a slice of vectors at a time, without the index in
memory (`IvfFlatWriter`): byte for byte the files `FaissIndex.save` writes for the same index
filled with the same vectors (tested). It slices the vectors as `FaissIndex` adds them
(`vector_index.ADD_ROWS`, read at each write), so that an IVF list holds the same vectors in the
same order. A Flat level has no file of its own: its float16 vectors are its one copy on disk
(`level_files.open_level_index`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import faiss
import numpy as np

from docsim.indexer.store import vector_index
from docsim.indexer.store.vector_index import FaissIndex, as_float32


class IvfFlatWriter:
    """The file `FaissIndex.save` writes for an `IVF{nlist},Flat` index, written one inverted
    list at a time, without the index in memory.

    Filling an IVF index holds every vector as float32 (1.6 GB for a million 384-d vectors)
    until it is saved. Instead: `assign` each block of vectors to its list, as adding it would
    (in the same slices of `ADD_ROWS`, so that the same vectors go to the same lists), keeping
    only the list numbers (4 bytes a vector); then `write` the file, reading each list's
    vectors back from the caller (`rows`). The file is byte for byte the one FAISS writes for
    the index filled with the same blocks (tested): an `IndexIDMap2` over an `IndexIVFFlat`
    with array inverted lists, whose entries within a list are in insertion order and are
    labelled by their position (the id map gives the caller's ids).
    """

    def __init__(self, index: FaissIndex) -> None:
        inner = faiss.downcast_index(index.host.index)
        if not self.accepts(index) or not isinstance(inner, faiss.IndexIVFFlat):
            raise TypeError(f"not an empty IVF-Flat index on the CPU: {type(inner).__name__}")
        self.index = index  # owns `ivf` (a view into its IDMap): kept alive with it
        self.ivf = inner
        self._lists: list[np.ndarray] = []  # (n_slice,) int64 list numbers, in order

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
            self._lists.append(self.ivf.quantizer.assign(part, 1).ravel().astype(np.int64))

    def write(self, path: Path, ids: np.ndarray, rows: Callable[[np.ndarray], np.ndarray]) -> None:
        """Write the index file of every vector assigned, labelled by `ids` `(n,)` int64 in
        order; `rows(positions)` gives the vectors at ascending `positions` `(m, d)`."""
        ivf, d = self.ivf, self.ivf.d
        list_of = np.concatenate(self._lists) if self._lists else np.empty(0, np.int64)
        if len(list_of) != len(ids):
            raise ValueError(f"{len(list_of)} vectors assigned but {len(ids)} ids")
        sizes = np.bincount(list_of, minlength=ivf.nlist).astype(np.uint64)  # (nlist,)
        order = np.argsort(list_of, kind="stable")  # positions grouped by list, in order
        ends = np.cumsum(sizes).astype(np.int64)
        with path.open("wb") as out:
            out.write(b"IxM2" + _index_header(d, len(ids)))
            out.write(b"IwFl" + _index_header(d, len(ids)) + _i64(ivf.nlist, ivf.nprobe))
            out.write(faiss.serialize_index(faiss.downcast_index(ivf.quantizer)).tobytes())
            out.write(np.int8(0).tobytes() + _i64(0))  # no direct map: its type, no entries
            out.write(b"ilar" + _i64(ivf.nlist, ivf.code_size))
            filled = np.flatnonzero(sizes)
            if len(filled) > ivf.nlist / 2:
                out.write(b"full" + _i64(ivf.nlist) + sizes.tobytes())
            else:
                pairs = np.stack([filled.astype(np.uint64), sizes[filled]], axis=1)  # (m, 2)
                out.write(b"sprs" + _i64(pairs.size) + pairs.tobytes())
            for number in filled:
                members = order[ends[number] - int(sizes[number]) : ends[number]]  # ascending
                out.write(as_float32(rows(members)).tobytes())
                out.write(members.astype(np.int64).tobytes())
            out.write(_i64(len(ids)) + np.ascontiguousarray(ids, np.int64).tobytes())


def _i64(*values: int) -> bytes:
    return np.asarray(values, dtype="<i8").tobytes()


def _index_header(d: int, ntotal: int) -> bytes:
    """FAISS's index header: d, ntotal, two unused fields, is_trained, the metric."""
    return (
        np.int32(d).tobytes()
        + _i64(ntotal, 1 << 20, 1 << 20)
        + np.bool_(True).tobytes()
        + np.int32(faiss.METRIC_INNER_PRODUCT).tobytes()
    )
