"""A version's files of one level, as its manifest names them (`manifest.LevelEntry`): the
float16 vectors (the level's one copy on disk), the ids, and an IVF level's FAISS index. A Flat
level's exact index is built from its float16 file when it is read; versions built before Flat
levels stopped writing theirs (`<level>.faiss` beside the float16 file) still read theirs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from docsim.indexer.store.vector_index import FaissIndex


def level_files(level: dict[str, Any]) -> list[str]:
    """The names of the files the level has."""
    names = (level.get("index_file"), level["vectors_file"], level["ids_file"])
    return [name for name in names if name]


def open_level_index(folder: Path, level: dict[str, Any]) -> FaissIndex:
    """The level's FAISS index: read from its file where it has one, else the exact Flat index
    over its float16 vectors, filled a block at a time from the mapped file (the values FAISS
    held in the file a Flat level used to have: the same float16-rounded vectors)."""
    if level.get("index_file"):
        return FaissIndex.load(folder / level["index_file"], level["factory"])
    vectors = np.load(folder / level["vectors_file"], mmap_mode="r")  # (n, d) float16
    ids = np.load(folder / level["ids_file"])
    return FaissIndex.build(vectors, ids, level["factory"])
