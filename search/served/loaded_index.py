"""One version held in memory to answer queries.

`LoadedIndex.load` reads the manifest, the FAISS index and float16 vectors of every level, and
the structure (which sentences make which paragraph, which paragraphs which document) from
SQL (`search.served.structure`), and lays the vectors out by it. Texts stay in SQL and are
fetched per result (`indexer.store.reader`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from sqlalchemy import Connection, Engine, select

from docsim.indexer.errors import CorruptFileError
from docsim.indexer.store.db import snapshot
from docsim.indexer.store.level_files import SCANNED_LEVELS, level_files, open_level_index
from docsim.indexer.store.manifest import check_files
from docsim.indexer.store.stored_rows import float16_rows, open_stored
from docsim.indexer.store.tables import index_versions
from docsim.indexer.store.units import level_ids, stored_additions
from docsim.indexer.store.vector_index import FaissIndex, VectorIndex
from docsim.indexer.store.versions import VersionRow
from docsim.indexer.text.documents import LEVELS
from docsim.models.kernels.scoring import RaggedCollection
from docsim.search.arrays import concatenated_ranges
from docsim.search.errors import IndexMismatchError
from docsim.search.filters import FilterColumns
from docsim.search.served.mapped_rows import MappedRows
from docsim.search.served.structure import StoredStructure, read_structure

logger = logging.getLogger(__name__)
# a sharded coordinator maps these levels and holds no FAISS index of them; the shards hold
# the searched ones (`/explain` only reads chunk rows); documents stay here, one row each
MAPPED_WHEN_SHARDED = ("section", "paragraph", "sentence", "chunk")
# a compressed service: the sentence and paragraph levels searched through their scans
# (`search.served.sentence_scan`), the chunk level read only
MAPPED_WHEN_COMPRESSED = SCANNED_LEVELS
COMPRESSED_SEARCHED = ("paragraph", "sentence")


@dataclass
class LoadedIndex:
    """One published version, ready to answer queries.

    Attributes:
        version_id: the version.
        manifest: its manifest.
        indices: the search of each level: its FAISS index, or (`Searcher.use_shards`) the
            shards' search of a level they hold (`ShardedLevel`).
        vectors: float32 unit vectors of each level `(n, d)`, row-aligned with `ids` (float16
            `MappedRows` for the `mapped_levels`).
        ids: int64 ids of each level `(n,)`, ascending.
        collection: sentences grouped into paragraphs and documents, for SDR scoring.
        doc_ids: `(D,)` document ids in collection order; `doc_paragraph_start` `(D + 1,)`
            and `paragraph_sentence_start` `(J + 1,)` are offsets into the next level.
        metadata: each document's metadata, in collection order (`filter_columns` holds it
            column-wise for filters, typed as its collection fixed them: `field_types`).
        paragraph_ids: `(J,)` paragraph ids in collection order.
        doc_unit_start: `(D + 1,)` each document's first row at each unit level (a
            document's units are consecutive rows, as their ids are handed out in document
            order).
        mapped_levels: the levels whose vectors are the version's float16 file, memory-mapped
            (not read into memory), with no FAISS index here: a sharded service's coordinator,
            whose shards search (`SEARCHED_ON_SHARDS`) and score them. Rows read from a map (a
            query by id, `/explain`, paragraph pairs) are cast per use.
    """

    version_id: int
    path: Path
    manifest: dict[str, Any]
    indices: dict[str, VectorIndex]
    vectors: dict[str, torch.Tensor | MappedRows]
    ids: dict[str, np.ndarray]
    collection: RaggedCollection
    doc_ids: np.ndarray
    external_ids: list[str]
    titles: list[str]
    metadata: list[dict[str, Any]]
    paragraph_ids: np.ndarray
    doc_paragraph_start: np.ndarray
    paragraph_sentence_start: np.ndarray
    doc_unit_start: dict[str, np.ndarray]
    revision: int = 0
    mapped_levels: tuple[str, ...] = ()
    field_types: dict[str, str] = field(default_factory=dict)

    @property
    def sentences_mapped(self) -> bool:
        return "sentence" in self.mapped_levels

    @property
    def n_documents(self) -> int:
        return len(self.doc_ids)

    @cached_property
    def filter_columns(self) -> FilterColumns:
        """The documents' metadata fields column-wise, built on the first filtered query."""
        return FilterColumns.of(self.metadata, self.field_types)

    def unit_ids_of(self, level: str, positions: np.ndarray) -> np.ndarray:
        """`(u,)` the ids of every unit of `level` in the documents at `positions`
        (ascending)."""
        if level == "document":
            return np.sort(self.doc_ids[positions])
        start, chosen = self.doc_unit_start[level], np.sort(positions)
        found: np.ndarray = self.ids[level][concatenated_ranges(start[chosen], start[chosen + 1])]
        return found

    @classmethod
    def load(
        cls,
        engine: Engine,
        version: VersionRow,
        *,
        sharded: bool = False,
        map_sentences: bool = False,
    ) -> LoadedIndex:
        """The version's files, plus the document changes committed to SQL since its build
        (added documents' vectors from `document_vectors`, deleted ones left out). `sharded`:
        as a sharded service's coordinator, every unit level mapped (`mapped_levels`);
        `map_sentences`: the sentence level mapped, searched and scored through a
        `SentenceScan` (`search.served.sentence_scan`), the paragraph level mapped and
        searched through one, the chunk level mapped (`MAPPED_WHEN_COMPRESSED`)."""
        if version.manifest is None:
            raise IndexMismatchError(f"version {version.version_id} has no manifest")
        manifest, path = version.manifest, Path(version.path)
        mapped = MAPPED_WHEN_SHARDED if sharded else MAPPED_WHEN_COMPRESSED if map_sentences else ()
        indices: dict[str, VectorIndex] = {}
        vectors: dict[str, torch.Tensor | MappedRows] = {}
        ids: dict[str, np.ndarray] = {}
        for level in LEVELS:
            info = manifest["levels"][level]
            try:  # a flipped bit is refused here, naming the file, not served
                check_files(path, info, level_files(info))
            except CorruptFileError as error:
                raise IndexMismatchError(f"version {version.version_id}: {error}") from error
            ids[level] = np.load(path / info["ids_file"])
            if level in mapped:
                vectors[level] = MappedRows.of_file(path / info["vectors_file"])
            else:
                index = indices[level] = open_level_index(path, info, ids[level])
                held = one_copy(index, ids[level])
                if held is None:  # not Flat: the index keeps its vectors its own way
                    stored = open_stored(path / info["vectors_file"])
                    held = torch.from_numpy(float16_rows(stored).astype(np.float32))
                vectors[level] = held
            counts = {len(ids[level]), len(vectors[level])}
            counts |= {indices[level].count} if level in indices else set()
            if counts != {info["count"]}:
                raise IndexMismatchError(
                    f"{level} files of version {version.version_id} do not match its manifest"
                )
        vid = version.version_id
        # every SQL read in one snapshot: a document change committed meanwhile is either
        # wholly in (with its revision) or wholly out, never half of it
        with snapshot(engine) as conn:
            revision = conn.execute(
                select(index_versions.c.revision).where(index_versions.c.version_id == vid)
            ).scalar()
            if revision is None:
                raise IndexMismatchError(f"version {vid} is no longer in the database")
            if revision:
                added = stored_additions(conn, vid)
                for level in LEVELS:
                    current = np.asarray(level_ids(conn, vid, level), np.int64)
                    gone = ids[level][~np.isin(ids[level], current)]
                    _apply_level(indices, vectors, ids, level, gone, *added[level], copy=False)
            loaded = _assemble(conn, vid, manifest, path, indices, vectors, ids, revision)
        return replace(loaded, mapped_levels=mapped)

    def with_changes(
        self,
        engine: Engine,
        removed: dict[str, np.ndarray],
        added: dict[str, tuple[np.ndarray, np.ndarray]],
        revision: int,
    ) -> LoadedIndex:
        """A new index with units removed and added (copy on write: this one keeps serving
        the requests that hold it). The structure is read again from SQL, which must already
        hold the change."""
        indices, vectors, ids = dict(self.indices), dict(self.vectors), dict(self.ids)
        for level in LEVELS:
            _apply_level(
                indices,
                vectors,
                ids,
                level,
                removed.get(level, np.empty(0, np.int64)),
                *added.get(level, (np.empty(0, np.int64), np.empty((0, self.dim), np.float32))),
                copy=True,
            )
        changed = _assemble(
            engine, self.version_id, self.manifest, self.path, indices, vectors, ids, revision
        )
        return replace(changed, mapped_levels=self.mapped_levels)

    def vector_sizes(self) -> dict[str, tuple[int, int]]:
        """Per level, how many vectors it holds and the bytes they take in this process's
        memory (a mapped level: its row map; the file's pages are the page cache's)."""
        return {
            level: (
                int(held.shape[0]),
                held.memory_bytes()
                if isinstance(held, MappedRows)
                else held.element_size() * held.numel(),
            )
            for level, held in self.vectors.items()
        }

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])


@dataclass(frozen=True)
class _Layout:
    """Where each document's units are among the rows of each level."""

    document_lengths: np.ndarray  # (D,) paragraphs per document
    doc_paragraph_start: np.ndarray  # (D + 1,)
    paragraph_sentence_start: np.ndarray  # (J + 1,)
    doc_unit_start: dict[str, np.ndarray]  # each level's (D + 1,)


def _lay_out(
    stored: StoredStructure,
    indices: dict[str, VectorIndex],
    ids: dict[str, np.ndarray],
    vid: int,
) -> _Layout:
    """Reads the stored structure and the ids (and searches) of each level. Builds each
    document's first row at each level (`_Layout`), a document's units being one run of rows.

    Raises:
        IndexMismatchError: SQL's rows or units and the vectors' ids disagree.
    """
    doc_ids, paragraph_lengths = stored.doc_ids, stored.paragraph_lengths
    paragraph_docs = stored.paragraph_docs
    document_lengths = np.searchsorted(paragraph_docs, doc_ids, side="right") - np.searchsorted(
        paragraph_docs, doc_ids, side="left"
    )
    if (
        not np.array_equal(stored.paragraph_ids, ids["paragraph"])
        or not np.array_equal(doc_ids, ids["document"])
        or int(paragraph_lengths.sum()) != len(ids["sentence"])
        or any(indices[lv].count != len(ids[lv]) for lv in LEVELS if lv in indices)
    ):
        raise IndexMismatchError(f"SQL rows and vectors of version {vid} disagree")
    doc_paragraph_start = np.concatenate([[0], np.cumsum(document_lengths)])  # (D + 1,)
    paragraph_sentence_start = np.concatenate([[0], np.cumsum(paragraph_lengths)])  # (J + 1,)
    doc_unit_start = {
        "paragraph": doc_paragraph_start,
        "sentence": paragraph_sentence_start[doc_paragraph_start],
        **{
            level: np.concatenate([[0], np.cumsum([counts.get(d, 0) for d in doc_ids])])
            for level, counts in stored.per_document.items()
        },
    }
    if any(int(start[-1]) != len(ids[level]) for level, start in doc_unit_start.items()):
        raise IndexMismatchError(f"SQL units and vectors of version {vid} disagree")
    return _Layout(document_lengths, doc_paragraph_start, paragraph_sentence_start, doc_unit_start)


def _assemble(
    bind: Engine | Connection,
    vid: int,
    manifest: dict[str, Any],
    path: Path,
    indices: dict[str, VectorIndex],
    vectors: dict[str, torch.Tensor | MappedRows],
    ids: dict[str, np.ndarray],
    revision: int,
) -> LoadedIndex:
    """Reads the structure of the version's live documents from SQL (with `bind`). Builds the
    index of its levels' searches, vectors and ids with that structure, checked to agree
    (`IndexMismatchError` otherwise)."""
    stored = read_structure(bind, vid)
    layout = _lay_out(stored, indices, ids, vid)
    collection = RaggedCollection(
        # a mapped level's rows stand in for the tensor: the coordinator only takes rows
        # of it and reads its shape and dtype (`MappedRows`), and the shards score it
        sentences=cast(torch.Tensor, vectors["sentence"]),
        paragraph_lengths=torch.from_numpy(stored.paragraph_lengths),
        document_lengths=torch.from_numpy(layout.document_lengths),
    )
    logger.info(
        "Loaded version %d (revision %d): %d documents, %d sentences",
        vid,
        revision,
        len(stored.doc_ids),
        len(ids["sentence"]),
    )
    return LoadedIndex(
        version_id=vid,
        path=path,
        manifest=manifest,
        indices=indices,
        vectors=vectors,
        ids=ids,
        collection=collection,
        doc_ids=stored.doc_ids,
        external_ids=stored.external_ids,
        titles=stored.titles,
        metadata=stored.metadata,
        paragraph_ids=stored.paragraph_ids,
        doc_paragraph_start=layout.doc_paragraph_start,
        paragraph_sentence_start=layout.paragraph_sentence_start,
        doc_unit_start=layout.doc_unit_start,
        revision=revision,
        field_types=stored.field_types,
    )


def _apply_level(
    indices: dict[str, VectorIndex],
    vectors: dict[str, torch.Tensor | MappedRows],
    ids: dict[str, np.ndarray],
    level: str,
    removed: np.ndarray,
    added_ids: np.ndarray,
    added_vectors: np.ndarray,
    *,
    copy: bool,
) -> None:
    """Remove `removed` ids and append `added` (larger) ids at one level, keeping the rows
    sorted by id; with `copy`, the FAISS index is copied first instead of changed in place.

    Either side may be empty (a deletion adds nothing, an addition removes nothing); an empty
    side arrives as a `(0,)` or `(0, 0)` array. A level without a FAISS index of its own here
    (a mapped level, searched on shards) keeps its map, gains the added rows, and leaves its
    search to the shards started for the change."""
    removed = np.asarray(removed, np.int64).reshape(-1)  # (r,)
    added_ids = np.asarray(added_ids, np.int64).reshape(-1)  # (a,)
    if not len(removed) and not len(added_ids):
        return
    held = vectors[level]
    dim = held.shape[1]
    keep = ~np.isin(ids[level], removed)  # (n,)
    if int((~keep).sum()) != len(np.unique(removed)):
        raise IndexMismatchError(f"{level} ids to remove are not all in the index")
    new_ids = np.concatenate([ids[level][keep], added_ids])
    if len(new_ids) > 1 and not np.all(np.diff(new_ids) > 0):
        raise IndexMismatchError(f"added {level} ids are not above the existing ones")
    dtype = held.dtype
    if len(added_ids):
        added = torch.from_numpy(np.asarray(added_vectors, np.float32)).to(dtype)  # (a, d)
        if tuple(added.shape) != (len(added_ids), dim):
            raise IndexMismatchError(
                f"{level}: {len(added_ids)} added ids but vectors of shape {tuple(added.shape)}"
            )
    else:
        added = torch.empty(0, dim, dtype=dtype)
    if isinstance(held, MappedRows):
        vectors[level] = held.changed(keep, added.numpy())
    else:
        vectors[level] = torch.cat([held[torch.from_numpy(keep)], added])
    ids[level] = new_ids
    searched = indices.get(level)
    if not isinstance(searched, FaissIndex):  # searched elsewhere (shards)
        indices.pop(level, None)
        return
    index = searched.copy() if copy else searched
    if index.remove(removed) != len(np.unique(removed)):
        raise IndexMismatchError(f"{level} ids to remove are not all in the FAISS index")
    index.add(added.numpy(), added_ids)
    indices[level] = index
    shared = one_copy(index, new_ids)  # the changed index's memory, once again
    if shared is not None:
        vectors[level] = shared


def one_copy(index: FaissIndex, ids: np.ndarray) -> torch.Tensor | None:
    """The level's vectors as a view of the Flat index's own float32 storage (one copy of
    each level in memory, not a tensor beside the index), or None when the index is not Flat
    or not in `ids`' order. FAISS stores the float16-rounded vectors the version's file
    holds, so the values are the same either way."""
    stored = index.stored_vectors()
    if stored is None or not np.array_equal(index.ids(), ids):
        return None
    return torch.from_numpy(stored)
