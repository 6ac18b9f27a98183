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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine, insert, select, update

from indexer.search.types import DocumentNotFoundError
from indexer.store.data_lock import hold_data_dir
from indexer.store.generations import retire_documents
from indexer.store.tables import LEVEL_TABLES, document_vectors, documents, index_versions
from indexer.store.units import (
    UnitCounter,
    insert_documents,
    next_ordinals,
    pack_vectors,
)
from indexer.store.versions import active_version
from indexer.text.chunking import add_chunks
from indexer.text.documents import LEVELS, Document, SourceDocument
from indexer.text.sentences import SentenceSplitter
from indexer.text.split import split_document
from models.encoder import Encoder

logger = logging.getLogger(__name__)


class IndexChangedError(RuntimeError):
    """The active version or its revision moved since the caller loaded it (maps to 409)."""


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
    """
    split = [  # EmptyDocumentError; documents split already (the API's limits) are kept
        d if isinstance(d, Document) else split_document(d, splitter) for d in upserts
    ]
    active = active_version(engine)
    if (active.version_id, active.revision) != (version_id, revision):
        raise IndexChangedError(
            f"the index moved to version {active.version_id} revision {active.revision} "
            f"since this service loaded version {version_id} revision {revision}; retry"
        )
    docs = add_chunks(split, encoder, chunk_tokens)
    vectors = encoder.encode_documents([doc.encoder_input() for doc in docs])
    wanted = [d.doc_id for d in docs] + list(deletes)
    with engine.begin() as conn:
        existing = dict(
            conn.execute(
                select(documents.c.external_id, documents.c.doc_id).where(
                    documents.c.version_id == version_id,
                    documents.c.external_id.in_(wanted),
                    documents.c.retired_revision.is_(None),
                )
            ).all()
        )
        missing = [d for d in deletes if d not in existing]
        if missing:
            raise DocumentNotFoundError(
                f"document {missing[0]!r} is not in the active index"
                if len(missing) == 1
                else f"{len(missing)} documents are not in the active index, e.g. {missing[:3]}"
            )
        gone = [existing[d.doc_id] for d in docs if d.doc_id in existing]
        gone += [existing[d] for d in deletes]
        removed: dict[str, np.ndarray] = {}
        for level, (table, id_column) in LEVEL_TABLES.items():
            column = table.c.doc_id
            removed[level] = np.asarray(
                conn.execute(select(id_column).where(column.in_(gone))).scalars().all(),
                np.int64,
            )
        new_revision = revision + 1
        retire_documents(conn, gone, new_revision)  # readers of earlier revisions keep them
        counter = UnitCounter(version_id)
        counter.next.update(next_ordinals(conn, version_id, active.manifest["counts"]))
        ids = insert_documents(conn, version_id, docs, counter)
        added: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {
            lv: ([], []) for lv in LEVELS
        }
        at = dict.fromkeys(LEVELS, 0)
        for vec in vectors:
            per_level = {  # stored as float16, like a build's files: served the same
                level: m.numpy().astype(np.float16).astype(np.float32)
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
        moved = conn.execute(
            update(index_versions)
            .where(
                index_versions.c.version_id == version_id,
                index_versions.c.revision == revision,
            )
            .values(revision=new_revision, unit_ordinals=dict(counter.next))
        )
        if moved.rowcount != 1:  # another writer (elsewhere) committed first: roll back
            raise IndexChangedError(
                f"version {version_id} moved past revision {revision} while this change "
                "was applied; retry"
            )
    change = DocumentChange(
        version_id=version_id,
        revision=new_revision,
        added=[d.doc_id for d in docs if d.doc_id not in existing],
        replaced=[d.doc_id for d in docs if d.doc_id in existing],
        deleted=list(deletes),
        removed_ids=removed,
        added_units={
            lv: (
                np.concatenate(added[lv][0]) if added[lv][0] else np.empty(0, np.int64),
                np.concatenate(added[lv][1]) if added[lv][1] else np.empty((0, encoder.dim)),
            )
            for lv in LEVELS
        },
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
