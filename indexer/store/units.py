"""The units of a version in SQL: ids handed out per level, rows written per document, and the
vectors of documents added after a build (one `.npz` blob per document)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, delete, func, insert, select

from docsim.indexer.store.db import connected
from docsim.indexer.store.generations import live_documents
from docsim.indexer.store.tables import (
    LEVEL_TABLES,
    chunks,
    document_vectors,
    documents,
    index_versions,
    paragraphs,
    sections,
    sentences,
    unit_id,
)
from docsim.indexer.text.documents import Document, page_at


class UnitCounter:
    """Hands out the next ordinal of each level within one version."""

    def __init__(self, version_id: int) -> None:
        self.version_id = version_id
        self.next = dict.fromkeys(LEVEL_TABLES, 0)

    def take(self, level: str, n: int) -> list[int]:
        start = self.next[level]
        self.next[level] = start + n
        return [unit_id(self.version_id, i) for i in range(start, start + n)]


Row = dict[str, Any]  # one SQL row's column values

# parents before children (foreign keys)
INSERT_ORDER = (
    (documents, "document"),
    (sections, "section"),
    (paragraphs, "paragraph"),
    (sentences, "sentence"),
    (chunks, "chunk"),
)


def insert_documents(
    conn: Connection, version_id: int, docs: Sequence[Document], counter: UnitCounter
) -> dict[str, list[int]]:
    """Insert the rows of `docs` and return the ids given to each level, in document order."""
    rows: dict[str, list[Row]] = {level: [] for level in LEVEL_TABLES}
    ids: dict[str, list[int]] = {level: [] for level in LEVEL_TABLES}
    for doc in docs:
        doc_ids = take_ids(doc, counter)
        for level, level_rows in document_rows(doc, version_id, doc_ids).items():
            rows[level].extend(level_rows)
            ids[level].extend(doc_ids[level])
    for table, level in INSERT_ORDER:
        if rows[level]:
            conn.execute(insert(table), rows[level])
    return ids


def take_ids(doc: Document, counter: UnitCounter) -> dict[str, list[int]]:
    """The next ids of every level for the units of `doc`, in document order."""
    counts = doc.counts()
    return {level: counter.take(level, counts[level]) for level in LEVEL_TABLES}


def document_rows(
    doc: Document, version_id: int, ids: dict[str, list[int]]
) -> dict[str, list[Row]]:
    """The rows of every level of one document whose units get `ids` (from `take_ids`):
    positions count within the document, each row names its parents."""
    doc_id = ids["document"][0]
    document: Row = {
        "doc_id": doc_id,
        "version_id": version_id,
        "external_id": doc.doc_id,
        "title": doc.title,
        "text": doc.text,
        "metadata": dict(doc.metadata),
        "content_sha256": doc.content_sha256(),
    }
    paragraph_rows, sentence_rows = _paragraph_and_sentence_rows(doc, version_id, ids)
    return {
        "document": [document],
        "section": [
            {
                "section_id": ids["section"][position],
                "version_id": version_id,
                "doc_id": doc_id,
                "position": position,
                "title": section.title,
                "char_start": section.start,
                "char_end": section.end,
            }
            for position, section in enumerate(doc.sections)
        ],
        "paragraph": paragraph_rows,
        "sentence": sentence_rows,
        "chunk": [
            {
                "chunk_id": ids["chunk"][position],
                "version_id": version_id,
                "doc_id": doc_id,
                "section_id": ids["section"][chunk.section],
                "position": position,
                "char_start": chunk.start,
                "char_end": chunk.end,
                "n_tokens": chunk.n_tokens,
            }
            for position, chunk in enumerate(doc.chunks)
        ],
    }


def _paragraph_and_sentence_rows(
    doc: Document, version_id: int, ids: dict[str, list[int]]
) -> tuple[list[Row], list[Row]]:
    """The paragraph and sentence rows of one document: each paragraph in its section, each
    sentence in its paragraph, with the page a paragraph starts on (PDFs)."""
    doc_id = ids["document"][0]
    paragraph_ids, sentence_ids = iter(ids["paragraph"]), iter(ids["sentence"])
    paragraph_rows: list[Row] = []
    sentence_rows: list[Row] = []
    for section_id, section in zip(ids["section"], doc.sections, strict=True):
        for paragraph in section.paragraphs:
            paragraph_id = next(paragraph_ids)
            paragraph_rows.append(
                {
                    "paragraph_id": paragraph_id,
                    "version_id": version_id,
                    "doc_id": doc_id,
                    "section_id": section_id,
                    "position": len(paragraph_rows),
                    "char_start": paragraph.start,
                    "char_end": paragraph.end,
                    "page": page_at(doc.metadata.get("pages"), paragraph.start),
                }
            )
            for sentence in paragraph.sentences:
                sentence_rows.append(
                    {
                        "sentence_id": next(sentence_ids),
                        "version_id": version_id,
                        "doc_id": doc_id,
                        "paragraph_id": paragraph_id,
                        "position": len(sentence_rows),
                        "char_start": sentence.start,
                        "char_end": sentence.end,
                    }
                )
    return paragraph_rows, sentence_rows


def delete_version_rows(conn: Connection, version_id: int) -> None:
    conn.execute(delete(document_vectors).where(document_vectors.c.version_id == version_id))
    for table, _ in LEVEL_TABLES.values():  # children first
        conn.execute(delete(table).where(table.c.version_id == version_id))


def count_units(engine: Engine, version_id: int) -> dict[str, int]:
    """Rows per level of one version's live documents."""
    live = live_documents(version_id)
    with engine.connect() as conn:
        return {
            level: int(
                conn.execute(
                    select(func.count()).select_from(table).where(table.c.doc_id.in_(live))
                ).scalar_one()
            )
            for level, (table, _) in LEVEL_TABLES.items()
        }


def level_ids(bind: Engine | Connection, version_id: int, level: str) -> list[int]:
    """All ids of one level of a version's live documents, ascending."""
    table, id_column = LEVEL_TABLES[level]
    with connected(bind) as conn:
        return list(
            conn.execute(
                select(id_column)
                .where(table.c.doc_id.in_(live_documents(version_id)))
                .order_by(id_column)
            ).scalars()
        )


def pack_vectors(level_vectors: dict[str, tuple[list[int], np.ndarray]]) -> bytes:
    """One document's ids and float16 vectors of every level, as an `.npz` blob."""
    buffer = io.BytesIO()
    arrays = {}
    for level, (ids, vectors) in level_vectors.items():
        arrays[f"{level}_ids"] = np.asarray(ids, np.int64)
        arrays[f"{level}_vectors"] = np.asarray(vectors, np.float16)
    # numbers only; naming `allow_pickle` tells the type checker `**arrays` does not fill it
    np.savez(buffer, allow_pickle=False, **arrays)
    return buffer.getvalue()


def stored_additions(
    bind: Engine | Connection, version_id: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Ids and float32 vectors of every level of the live documents added to a version after
    its build, in id order."""
    with connected(bind) as conn:
        payloads = conn.execute(
            select(document_vectors.c.payload)
            .where(document_vectors.c.doc_id.in_(live_documents(version_id)))
            .order_by(document_vectors.c.doc_id)
        ).scalars()
        parts: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {
            level: ([], []) for level in LEVEL_TABLES
        }
        for payload in payloads:
            with np.load(io.BytesIO(payload)) as blob:
                for level, (ids, vectors) in parts.items():
                    ids.append(blob[f"{level}_ids"])
                    vectors.append(blob[f"{level}_vectors"].astype(np.float32))
    out = {}
    for level, (ids, vectors) in parts.items():
        if ids:
            out[level] = (np.concatenate(ids), np.concatenate(vectors))
        else:
            out[level] = (np.empty(0, np.int64), np.empty((0, 0), np.float32))
    return out


def next_ordinals(conn: Connection, version_id: int, built: dict[str, int]) -> dict[str, int]:
    """The next free ordinal of each level: after the version's build (`built` counts) and
    after every ordinal a document change handed out (`index_versions.unit_ordinals`), so
    that no id is ever given twice, even one whose unit was deleted. A version changed before
    that column existed falls back to the highest id in use."""
    handed_out = conn.execute(
        select(index_versions.c.unit_ordinals).where(index_versions.c.version_id == version_id)
    ).scalar()
    out = {}
    for level, (table, id_column) in LEVEL_TABLES.items():
        if handed_out is not None:
            after = int(handed_out.get(level, 0))
        else:
            highest = conn.execute(
                select(func.max(id_column)).where(table.c.version_id == version_id)
            ).scalar()
            after = (int(highest) - unit_id(version_id, 0) + 1) if highest is not None else 0
        out[level] = max(built.get(level, 0), after)
    return out
