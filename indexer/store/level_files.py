"""A version's files of one level, as its manifest names them (`manifest.LevelEntry`): the
vectors (the level's one copy on disk, float16 or int8 rows: `stored_rows`), the ids, and an
IVF-Flat level's lists. The level's index is built from them when it is read: a Flat level's
exact index from its vectors, an IVF-Flat level's from its vectors placed in their recorded
lists (`faiss_files`), or, where the build deferred its lists (`IndexSettings.
scanned_level_lists`), trained and filled here as the build would have. Versions built before
(a `<level>.faiss` beside the float16 file) are read from that file, as is an index of another
factory."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from docsim.indexer.store.faiss_files import flat_index, ivf_flat_index
from docsim.indexer.store.stored_rows import float16_blocks, float16_rows, open_stored, row_dim
from docsim.indexer.store.vector_index import FLAT, FaissIndex

logger = logging.getLogger(__name__)
# the levels a CPU service scans from their mapped rows instead of searching their FAISS index
# (`search.served.loaded_index.MAPPED_WHEN_COMPRESSED`): a build may leave their lists to a
# reader that needs them
SCANNED_LEVELS = ("paragraph", "sentence", "chunk")


def level_files(level: dict[str, Any]) -> list[str]:
    """The names of the files the level has."""
    names = (
        level.get("index_file"),
        level.get("lists_file"),
        level["vectors_file"],
        level["ids_file"],
    )
    return [name for name in names if name]


def open_level_index(
    folder: Path, level: dict[str, Any], ids: np.ndarray | None = None
) -> FaissIndex:
    """The level's FAISS index: read from its file where it has one; else filled a block at a
    time from its mapped vectors file, read as float16 (for a float16 file, the values FAISS's
    file held), into the recorded lists of an IVF-Flat level or an exact Flat index. `ids`: the
    level's ids file, when the caller has read it already."""
    if level.get("index_file"):
        return FaissIndex.load(folder / level["index_file"], level["factory"])
    path = folder / level["vectors_file"]
    ids = np.load(folder / level["ids_file"]) if ids is None else ids
    if level.get("lists_file"):
        vectors = open_stored(path)  # (n, d) float16 or (n,) int8 rows
        return ivf_flat_index(level["factory"], folder / level["lists_file"], vectors, ids)
    stored = open_stored(path)  # (n, d) float16 or (n,) int8 rows
    if level["factory"] != FLAT:  # lists deferred by the build
        return trained_index(level["factory"], stored, ids, level["nprobe"])
    return flat_index(row_dim(stored), ids, float16_blocks(path, len(ids)))


def trained_index(factory: str, stored: np.ndarray, ids: np.ndarray, nprobe: int) -> FaissIndex:
    """The index of `factory` over the `stored` rows labelled by `ids` `(n,)`: trained on the
    build's fixed sample and filled a slice at a time, the index a build writing its lists
    would have given (tested)."""
    started = time.perf_counter()
    n, dim = len(ids), row_dim(stored)
    index = FaissIndex.trained(
        dim, factory, lambda positions: float16_rows(stored[positions]), n, nprobe=nprobe
    )
    step = 65_536
    for r0 in range(0, n, step):
        index.add(float16_rows(stored[r0 : r0 + step]), ids[r0 : r0 + step])
    logger.info(
        "Trained and filled %s over %d rows in %.1f s (its lists were not written at build)",
        factory,
        n,
        time.perf_counter() - started,
    )
    return index
