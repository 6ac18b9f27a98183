"""A version's files of one level, as its manifest names them (`manifest.LevelEntry`): the
float16 vectors (the level's one copy on disk), the ids, and an IVF-Flat level's lists. The
level's index is built from them when it is read: a Flat level's exact index from its vectors,
an IVF-Flat level's from its vectors placed in their recorded lists (`faiss_files`). Versions
built before (a `<level>.faiss` beside the float16 file) are read from that file, as is an
index of another factory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from docsim.indexer.store.faiss_files import ivf_flat_index
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


def open_level_index(folder: Path, level: dict[str, Any]) -> FaissIndex:
    """The level's FAISS index: read from its file where it has one; else filled a block at a
    time from its mapped float16 file (the values FAISS's file held: the same float16-rounded
    vectors), into the recorded lists of an IVF-Flat level or an exact Flat index."""
    if level.get("index_file"):
        return FaissIndex.load(folder / level["index_file"], level["factory"])
    vectors = np.load(folder / level["vectors_file"], mmap_mode="r")  # (n, d) float16
    ids = np.load(folder / level["ids_file"])
    if level.get("lists_file"):
        return ivf_flat_index(level["factory"], folder / level["lists_file"], vectors, ids)
    return FaissIndex.build(vectors, ids, level["factory"])
