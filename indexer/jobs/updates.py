"""Adding, replacing and deleting documents of the published version in place.

A change is one SQL transaction: the old documents are retired (they stay for the readers of
earlier revisions until purged, `indexer.store.generations`), the new documents' rows and their
vectors (a `document_vectors` blob per document) come in, and the version's `revision` goes up
by one, on the condition that it still is the revision the change was made against. The
version's files are never rewritten: on load, `LoadedIndex.load` merges them with what SQL
holds. So SQL is the single truth, and a crash at any point leaves either the old or the new
state, never a mix; a change is acknowledged once its transaction has committed (durably: see
`indexer.store.db`). Changes are the data directory's one writer in turn
(`indexer.store.data_lock`): none runs during a build, and they queue behind each other.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, insert, select, update

from docsim.indexer.errors import DocumentNotFoundError, IndexChangedError
from docsim.indexer.store.collections import has_field_types, store_field_types, write_field_types
from docsim.indexer.store.data_lock import hold_data_dir
from docsim.indexer.store.generations import retire_documents
from docsim.indexer.store.stored_rows import RowFormat, float16_rows, quantized
from docsim.indexer.store.tables import LEVEL_TABLES, document_vectors, documents, index_versions
from docsim.indexer.store.units import (
    UnitCounter,
    insert_documents,
    next_ordinals,
    pack_vectors,
)
from docsim.indexer.store.versions import VersionRow, active_version, version_row
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.documents import LEVELS, Document, SourceDocument
from docsim.indexer.text.field_types import FieldType, check_metadata
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.encoder import DocumentVectors, Encoder

logger = logging.getLogger(__name__)


@dataclass
class DocumentChange:
    """What one change did, and what the in-memory index needs to follow it."""

    version_id: int
    revision: int
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    removed_ids: dict[str, np.ndarray] = field(default_factory=dict)  # level -> unit ids
    added_units: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def change_documents(
    engine: Engine, indexes_dir: Path, *, wait_seconds: float = 0.0, **change: Any
) -> DocumentChange:
    """`apply_change(engine, **change)` as the data directory's writer, waiting up to
    `wait_seconds` for the writers before it (another process's change, in tests and tools).

    Raises:
        BuildRunningError: a build holds the data directory (409).
        ChangesQueuedError: other changes held it for longer than `wait_seconds` (429).
        and what `apply_change` raises.
    """
    with hold_data_dir(indexes_dir, "change", wait_seconds):
        return apply_change(engine, **change)


def apply_change(
    engine: Engine,
    *,
    version_id: int,
    revision: int,
    upserts: Sequence[SourceDocument | Document],
    deletes: Sequence[str],
    encoder: Encoder,
    splitter: SentenceSplitter,
    chunk_tokens: int,
) -> DocumentChange:
    """Add or replace `upserts` and delete `deletes` (external ids) in the active version.
    The caller is the data directory's writer (`hold_data_dir`).

    Args:
        version_id, revision: what the caller serves; the change is refused if SQL moved on.

    Raises:
        IndexChangedError: the active version or revision is not the caller's (409).
        DocumentNotFoundError: a document to delete is not indexed (404).
        EmptyDocumentError: a document has no sentences (422).
        MetadataTypeError: a metadata value not of its field's type (422).
    """
    active = current_version(engine, version_id, revision)
    with engine.connect() as conn:
        fixed = write_field_types(conn, active.collection, version_id)
    types = typed_upserts(fixed, upserts)  # before any splitting or encoding
    split = split_upserts(upserts, splitter)
    docs = add_chunks(split, encoder, chunk_tokens)
    vectors = encoder.encode_documents([doc.encoder_input() for doc in docs])
    new_revision = revision + 1
    with engine.begin() as conn:
        existing = live_documents_named(conn, version_id, [d.doc_id for d in docs] + list(deletes))
        gone = documents_to_retire(docs, deletes, existing)
        removed = unit_ids_of(conn, gone)
        retire_documents(conn, gone, new_revision)  # readers of earlier revisions keep them
        counter = UnitCounter(version_id)
        counter.next.update(next_ordinals(conn, version_id, active.published_manifest()["counts"]))
        ids = insert_documents(conn, version_id, docs, counter)
        levels = active.published_manifest()["levels"]
        rows = {level: levels[level].get("row_format", "float16") for level in LEVELS}
        added = store_vectors(conn, version_id, vectors, ids, rows)
        advance_revision(conn, version_id, revision, counter)
        if types != fixed or not has_field_types(conn, active.collection):
            store_field_types(conn, active.collection, types)
    change = DocumentChange(
        version_id=version_id,
        revision=new_revision,
        added=[d.doc_id for d in docs if d.doc_id not in existing],
        replaced=[d.doc_id for d in docs if d.doc_id in existing],
        deleted=list(deletes),
        removed_ids=removed,
        added_units=stacked_units(added, encoder.dim),
    )
    logger.info(
        "Version %d revision %d: %d added, %d replaced, %d deleted",
        version_id,
        new_revision,
        len(change.added),
        len(change.replaced),
        len(change.deleted),
    )
    return change


def typed_upserts(
    fixed: Mapping[str, FieldType], upserts: Sequence[SourceDocument | Document]
) -> dict[str, FieldType]:
    """The collection's field types once `upserts` are written: `fixed`, and the fields they
    bring, typed by their first values.

    Raises:
        MetadataTypeError: a value that is not of its field's type, naming the document.
    """
    types = dict(fixed)
    for doc in upserts:
        types.update(check_metadata(types, doc.metadata, f"document {doc.doc_id!r}"))
    return types


def split_upserts(
    upserts: Sequence[SourceDocument | Document], splitter: SentenceSplitter
) -> list[Document]:
    """Split every upsert; a document the caller split already (the API checks its limits on
    the split) is kept as it is. Reads and writes nothing.

    Raises:
        EmptyDocumentError: a document has no sentences.
    """
    return [d if isinstance(d, Document) else split_document(d, splitter) for d in upserts]


def current_version(engine: Engine, version_id: int, revision: int) -> VersionRow:
    """The active version's row, checked against what the caller serves. Reads SQL.

    Raises:
        IndexChangedError: the active version or its revision is not the caller's.
    """
    row = version_row(engine, version_id)
    if row is None:
        raise IndexChangedError(f"version {version_id} no longer exists; retry")
    active = active_version(engine, row.collection)
    if (active.version_id, active.revision) != (version_id, revision):
        raise IndexChangedError(
            f"the index moved to version {active.version_id} revision {active.revision} "
            f"since this service loaded version {version_id} revision {revision}; retry"
        )
    return active


def live_documents_named(
    conn: Connection, version_id: int, external_ids: Sequence[str]
) -> dict[str, int]:
    """The live (not retired) documents of the version among `external_ids`: external id ->
    `doc_id`. Reads `documents`."""
    return dict(
        conn.execute(
            select(documents.c.external_id, documents.c.doc_id).where(
                documents.c.version_id == version_id,
                documents.c.external_id.in_(external_ids),
                documents.c.retired_revision.is_(None),
            )
        ).all()
    )


def documents_to_retire(
    docs: Sequence[Document], deletes: Sequence[str], existing: dict[str, int]
) -> list[int]:
    """The `doc_id`s the change retires: the replaced documents, then the deleted ones.

    Raises:
        DocumentNotFoundError: a document to delete is not in `existing`.
    """
    missing = [d for d in deletes if d not in existing]
    if missing:
        raise DocumentNotFoundError(
            f"document {missing[0]!r} is not in the active index"
            if len(missing) == 1
            else f"{len(missing)} documents are not in the active index, e.g. {missing[:3]}"
        )
    gone = [existing[d.doc_id] for d in docs if d.doc_id in existing]
    return gone + [existing[d] for d in deletes]


def unit_ids_of(conn: Connection, doc_ids: Sequence[int]) -> dict[str, np.ndarray]:
    """Every level's unit ids of the documents `doc_ids` (what the in-memory index drops).
    Reads the level tables."""
    removed: dict[str, np.ndarray] = {}
    for level, (table, id_column) in LEVEL_TABLES.items():
        column = table.c.doc_id
        removed[level] = np.asarray(
            conn.execute(select(id_column).where(column.in_(doc_ids))).scalars().all(),
            np.int64,
        )
    return removed


# per level: the new units' id arrays and float32 vector matrices, one of each per document
AddedUnits = dict[str, tuple[list[np.ndarray], list[np.ndarray]]]


def store_vectors(
    conn: Connection,
    version_id: int,
    vectors: Sequence[DocumentVectors],
    ids: dict[str, list[int]],
    rows: Mapping[str, RowFormat],
) -> AddedUnits:
    """Write each new document's vectors, rounded as the version's files store each level
    (`rows`, read back as float16: so they are served as a build of them would serve them),
    as one `document_vectors` row whose blob pairs them with the unit ids `insert_documents`
    gave (`ids`, in document order). Returns them per level."""
    added: AddedUnits = {lv: ([], []) for lv in LEVELS}
    at = dict.fromkeys(LEVELS, 0)
    for vec in vectors:
        per_level = {
            level: float16_rows(quantized(m.numpy(), rows[level])).astype(np.float32)
            for level, m in (
                ("document", vec.document[None]),
                ("section", vec.sections),
                ("paragraph", vec.paragraphs),
                ("sentence", vec.sentences),
                ("chunk", vec.chunks),
            )
        }
        blob = {}
        for level, matrix in per_level.items():
            level_ids = ids[level][at[level] : at[level] + len(matrix)]
            at[level] += len(matrix)
            blob[level] = (level_ids, matrix)
            added[level][0].append(np.asarray(level_ids, np.int64))
            added[level][1].append(matrix)
        conn.execute(
            insert(document_vectors).values(
                doc_id=blob["document"][0][0],
                version_id=version_id,
                payload=pack_vectors(blob),
            )
        )
    return added


def advance_revision(
    conn: Connection, version_id: int, revision: int, counter: UnitCounter
) -> None:
    """Move the version from `revision` to the next one, recording the ordinals handed out
    (`index_versions.revision`, `unit_ordinals`): a compare-and-set.

    Raises:
        IndexChangedError: another writer (elsewhere) committed first; the caller's
            transaction rolls back.
    """
    moved = conn.execute(
        update(index_versions)
        .where(
            index_versions.c.version_id == version_id,
            index_versions.c.revision == revision,
        )
        .values(revision=revision + 1, unit_ordinals=dict(counter.next))
    )
    if moved.rowcount != 1:
        raise IndexChangedError(
            f"version {version_id} moved past revision {revision} while this change "
            "was applied; retry"
        )


def stacked_units(added: AddedUnits, dim: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per level, the new unit ids `(n,)` and their vectors `(n, dim)`, all documents
    stacked (empty arrays for a level with none)."""
    return {
        lv: (
            np.concatenate(added[lv][0]) if added[lv][0] else np.empty(0, np.int64),
            np.concatenate(added[lv][1]) if added[lv][1] else np.empty((0, dim)),
        )
        for lv in LEVELS
    }
