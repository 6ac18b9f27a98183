"""A version's files of one level, as its manifest names them (`manifest.LevelEntry`): the
vectors (the level's one copy on disk, float16 or int8 rows: `stored_rows`), the ids, and an
IVF-Flat level's lists. The level's index is built from them when it is read: a Flat level's
exact index from its vectors, an IVF-Flat level's from its vectors placed in their recorded
lists (`faiss_files`). Versions built before (a `<level>.faiss` beside the float16 file) are
read from that file, as is an index of another factory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from docsim.indexer.store.faiss_files import flat_index, ivf_flat_index
from docsim.indexer.store.stored_rows import float16_blocks, open_stored, row_dim
from docsim.indexer.store.vector_index import FaissIndex


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
    dim = row_dim(open_stored(path))
    return flat_index(dim, ids, float16_blocks(path, len(ids)))
