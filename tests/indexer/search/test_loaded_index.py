"""One copy of each level in memory: a Flat level's vectors are a view of the FAISS index's
own storage, with the values of the version's float16 file; a document change makes a new
index and view and leaves the serving one untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from indexer.search.loaded_index import LoadedIndex
from indexer.search.searcher import Searcher


def test_flat_levels_hold_one_copy_with_the_files_values(searcher: Searcher) -> None:
    index = searcher.index
    for level, vectors in index.vectors.items():
        stored = index.indices[level]
        assert stored.factory == "Flat", level  # the sample corpus: every level exact
        assert vectors.data_ptr() == stored.flat_storage(), level
        from_file = np.load(Path(index.path) / index.manifest["levels"][level]["vectors_file"])
        assert torch.equal(vectors, torch.from_numpy(from_file.astype(np.float32))), level


def test_a_change_gets_its_own_copy_and_the_old_index_keeps_serving(searcher: Searcher) -> None:
    old = searcher.index
    before = {level: v.clone() for level, v in old.vectors.items()}
    removed = {level: old.ids[level][:3] for level in old.ids}
    dim = old.dim
    added = {
        level: (
            np.arange(1, 3, dtype=np.int64) + int(old.ids[level].max()),
            np.eye(2, dim, dtype=np.float32),
        )
        for level in old.ids
    }
    changed = _with_changes_in_memory(old, removed, added)
    for level in old.vectors:
        assert torch.equal(old.vectors[level], before[level]), level  # untouched
        assert old.vectors[level].data_ptr() == old.indices[level].flat_storage()
        vectors = changed.vectors[level]
        assert vectors.data_ptr() == changed.indices[level].flat_storage(), level
        assert np.array_equal(changed.indices[level].ids(), changed.ids[level])
        assert torch.equal(vectors[:-2], before[level][3:]) and torch.equal(
            vectors[-2:], torch.eye(2, dim)
        )


def _with_changes_in_memory(
    index: LoadedIndex,
    removed: dict[str, np.ndarray],
    added: dict[str, tuple[np.ndarray, np.ndarray]],
) -> LoadedIndex:
    """`LoadedIndex.with_changes`' level updates without its SQL read (the structure is not
    what this test is about)."""
    from indexer.search.loaded_index import _apply_level

    indices, vectors, ids = dict(index.indices), dict(index.vectors), dict(index.ids)
    for level in index.ids:
        _apply_level(indices, vectors, ids, level, removed[level], *added[level], copy=True)
    return LoadedIndex(**{**vars(index), "indices": indices, "vectors": vectors, "ids": ids})
