"""What SQL holds of a version's live documents: each level's rows in id order and how many
units of the next level each holds, for `LoadedIndex` to lay its vectors out by."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, Select, func, select

from docsim.indexer.store.db import connected
from docsim.indexer.store.generations import live_documents
from docsim.indexer.store.tables import (
    chunks,
    collections,
    documents,
    index_versions,
    paragraphs,
    sections,
    sentences,
)

READ_ROWS = 100_000  # rows of one level read from SQL at a time


@dataclass(frozen=True)
class StoredStructure:
    """What SQL holds of a version's live documents, each level in id order."""

    doc_ids: np.ndarray  # (D,)
    external_ids: list[str]
    titles: list[str]
    metadata: list[dict[str, Any]]  # each document's metadata, for filters
    paragraph_ids: np.ndarray  # (J,)
    paragraph_docs: np.ndarray  # (J,) each paragraph's document id
    paragraph_lengths: np.ndarray  # (J,) sentences per paragraph
    per_document: dict[str, dict[int, int]]  # section and chunk counts per document id
    # the collection's fixed metadata field types (field -> FieldType value), for filters
    field_types: dict[str, str] = field(default_factory=dict)


def read_structure(bind: Engine | Connection, vid: int) -> StoredStructure:
    """Reads, for the version's live documents: each document's id, external id, title and
    metadata; each paragraph's id and document; the sentences of each paragraph; and the
    sections and chunks of each document; and its collection's fixed field types. Builds
    them into id-ordered arrays (`StoredStructure`)."""
    live = live_documents(vid)  # retired documents stay for earlier readers only
    with connected(bind) as conn:
        docs = conn.execute(
            select(
                documents.c.doc_id,
                documents.c.external_id,
                documents.c.title,
                documents.c.metadata,
            )
            .where(documents.c.doc_id.in_(live))
            .order_by(documents.c.doc_id)
        ).all()
        paragraph_ids, paragraph_docs = _int_columns(
            conn,
            select(paragraphs.c.paragraph_id, paragraphs.c.doc_id)
            .where(paragraphs.c.doc_id.in_(live))
            .order_by(paragraphs.c.paragraph_id),
        )
        counted, counts = _int_columns(
            conn,
            select(sentences.c.paragraph_id, func.count())
            .where(sentences.c.doc_id.in_(live))
            .group_by(sentences.c.paragraph_id)
            .order_by(sentences.c.paragraph_id),
        )
        per_document: dict[str, dict[int, int]] = {
            level: dict(
                conn.execute(
                    select(table.c.doc_id, func.count())
                    .where(table.c.doc_id.in_(live))
                    .group_by(table.c.doc_id)
                ).all()
            )
            for level, table in (("section", sections), ("chunk", chunks))
        }
        field_types = conn.execute(
            select(collections.c.field_types)
            .join(index_versions, index_versions.c.collection == collections.c.name)
            .where(index_versions.c.version_id == vid)
        ).scalar_one_or_none()
    return StoredStructure(
        doc_ids=np.array([d.doc_id for d in docs], dtype=np.int64),
        external_ids=[d.external_id for d in docs],
        titles=[d.title for d in docs],
        metadata=[d.metadata or {} for d in docs],
        paragraph_ids=paragraph_ids,
        paragraph_docs=paragraph_docs,
        paragraph_lengths=_counts_of(paragraph_ids, counted, counts),
        per_document=per_document,
        field_types=dict(field_types or {}),
    )


def _int_columns(conn: Connection, query: Select[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The two integer columns of `query`'s rows, `(n,)` int64 each, read `READ_ROWS` rows
    at a time: at a hundred times AILA a level's rows as Python tuples took gigabytes, which
    the allocator kept after they were dropped."""
    firsts: list[np.ndarray] = []
    seconds: list[np.ndarray] = []
    result = conn.execute(query.execution_options(yield_per=READ_ROWS))
    for rows in result.partitions():
        flat = itertools.chain.from_iterable(rows)  # not np.array(rows): it probes each Row
        pairs = np.fromiter(flat, np.int64, 2 * len(rows)).reshape(-1, 2)  # (r, 2)
        firsts.append(pairs[:, 0].copy())
        seconds.append(pairs[:, 1].copy())
    if not firsts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(firsts), np.concatenate(seconds)


def _counts_of(ids: np.ndarray, counted: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """`(n,)` for each of `ids` its count in `counts` (`counted` its ids, ascending), else 0."""
    out = np.zeros(len(ids), np.int64)
    if len(counted):
        at = np.minimum(np.searchsorted(counted, ids), len(counted) - 1)  # (n,)
        found = counted[at] == ids
        out[found] = counts[at[found]]
    return out
