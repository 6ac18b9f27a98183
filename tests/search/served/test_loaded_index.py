"""One copy of each level in memory: a Flat level's vectors are a view of the FAISS index's
own storage, with the values of the version's float16 file; a document change makes a new
index and view and leaves the serving one untouched. A sharded coordinator maps the unit
levels instead, and a change keeps the map."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from docsim.indexer.store.reader import document_units
from docsim.indexer.store.stored_rows import read_float16
from docsim.indexer.store.versions import active_version
from docsim.indexer.text.documents import LEVELS
from docsim.search.searcher import Searcher
from docsim.search.served.loaded_index import MAPPED_WHEN_SHARDED, LoadedIndex
from docsim.search.served.mapped_rows import MappedRows


def test_flat_levels_hold_one_copy_with_the_files_values(searcher: Searcher) -> None:
    index = searcher.index
    for level, vectors in index.vectors.items():
        stored = index.indices[level]
        assert stored.factory == "Flat", level  # the sample corpus: every level exact
        assert vectors.data_ptr() == stored.flat_storage(), level
        from_file = read_float16(Path(index.path) / index.manifest["levels"][level]["vectors_file"])
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


def test_a_sharded_load_maps_the_unit_levels(searcher: Searcher) -> None:
    """The unit levels are the version's float16 files, mapped, with no FAISS index; the
    document level is as in-process. Each document's units are one run of rows
    (`doc_unit_start`), which the shards' ranges rely on."""
    index = searcher.index
    mapped = LoadedIndex.load(searcher.engine, active_version(searcher.engine), sharded=True)
    assert mapped.mapped_levels == MAPPED_WHEN_SHARDED
    for level in LEVELS:
        vectors = mapped.vectors[level]
        assert np.array_equal(mapped.ids[level], index.ids[level])
        if level in MAPPED_WHEN_SHARDED:
            assert isinstance(vectors, MappedRows) and level not in mapped.indices, level
            assert isinstance(vectors.file, np.memmap)
            assert torch.equal(vectors[0 : len(vectors)].float(), index.vectors[level]), level
            start = mapped.doc_unit_start[level]  # (D + 1,)
            assert np.array_equal(start, index.doc_unit_start[level])
            for d, doc_id in enumerate(mapped.doc_ids.tolist()):
                units = [u[0] for u in document_units(searcher.engine, level, doc_id)]
                assert mapped.ids[level][start[d] : start[d + 1]].tolist() == units, (level, d)
        else:
            assert torch.equal(vectors, index.vectors[level])
            assert mapped.indices[level].factory == index.indices[level].factory


def test_a_change_to_a_mapped_level_keeps_the_map(searcher: Searcher) -> None:
    """The changed rows read as the in-process change's, from the same map plus the added rows
    (not a copy of the level)."""
    mapped = LoadedIndex.load(searcher.engine, active_version(searcher.engine), sharded=True)
    removed = {level: mapped.ids[level][2:5] for level in mapped.ids}
    added = {
        level: (
            np.arange(1, 3, dtype=np.int64) + int(mapped.ids[level].max()),
            np.eye(2, mapped.dim, dtype=np.float32),  # exact in float16 too
        )
        for level in mapped.ids
    }
    changed = _with_changes_in_memory(mapped, removed, added)
    reference = _with_changes_in_memory(searcher.index, removed, added)
    for level in MAPPED_WHEN_SHARDED:
        vectors = changed.vectors[level]
        assert isinstance(vectors, MappedRows) and vectors.file is mapped.vectors[level].file
        assert vectors.added.shape == (2, mapped.dim)  # only the added rows are held
        assert np.array_equal(changed.ids[level], reference.ids[level])
        assert torch.equal(vectors[0 : len(vectors)].float(), reference.vectors[level]), level


def _with_changes_in_memory(
    index: LoadedIndex,
    removed: dict[str, np.ndarray],
    added: dict[str, tuple[np.ndarray, np.ndarray]],
) -> LoadedIndex:
    """`LoadedIndex.with_changes`' level updates without its SQL read (the structure is not
    what this test is about)."""
    from docsim.search.served.loaded_index import _apply_level

    indices, vectors, ids = dict(index.indices), dict(index.vectors), dict(index.ids)
    for level in index.ids:
        _apply_level(indices, vectors, ids, level, removed[level], *added[level], copy=True)
    return LoadedIndex(**{**vars(index), "indices": indices, "vectors": vectors, "ids": ids})
