"""The units of a version in SQL: ids handed out per level, rows written per document, and the
vectors of documents added after a build (one `.npz` blob per document)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, delete, func, insert, select

from indexer.store.db import connected
from indexer.store.generations import live_documents
from indexer.store.tables import (
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
from indexer.text.documents import Document, page_at


class UnitCounter:
    """Hands out the next ordinal of each level within one version."""

    def __init__(self, version_id: int) -> None:
        self.version_id = version_id
        self.next = dict.fromkeys(LEVEL_TABLES, 0)

    def take(self, level: str, n: int) -> list[int]:
        start = self.next[level]
        self.next[level] = start + n
        return [unit_id(self.version_id, i) for i in range(start, start + n)]


def insert_documents(
    conn: Connection, version_id: int, docs: Sequence[Document], counter: UnitCounter
) -> dict[str, list[int]]:
    """Insert the rows of `docs` and return the ids given to each level, in document order."""
    rows: dict[str, list[dict[str, Any]]] = {level: [] for level in LEVEL_TABLES}
    ids: dict[str, list[int]] = {level: [] for level in LEVEL_TABLES}
    for doc in docs:
        counts = doc.counts()
        doc_id = counter.take("document", 1)[0]
        section_ids = counter.take("section", counts["section"])
        paragraph_ids = iter(counter.take("paragraph", counts["paragraph"]))
        sentence_ids = iter(counter.take("sentence", counts["sentence"]))
        chunk_ids = counter.take("chunk", counts["chunk"])
        ids["document"].append(doc_id)
        ids["section"].extend(section_ids)
        ids["chunk"].extend(chunk_ids)
        rows["document"].append(
            {
                "doc_id": doc_id,
                "version_id": version_id,
                "external_id": doc.doc_id,
                "title": doc.title,
                "text": doc.text,
                "metadata": dict(doc.metadata),
            }
        )
        p_pos = s_pos = 0
        for s_idx, section in enumerate(doc.sections):
            rows["section"].append(
                {
                    "section_id": section_ids[s_idx],
                    "version_id": version_id,
                    "doc_id": doc_id,
                    "position": s_idx,
                    "title": section.title,
                    "char_start": section.start,
                    "char_end": section.end,
                }
            )
            for paragraph in section.paragraphs:
                paragraph_id = next(paragraph_ids)
                ids["paragraph"].append(paragraph_id)
                rows["paragraph"].append(
                    {
                        "paragraph_id": paragraph_id,
                        "version_id": version_id,
                        "doc_id": doc_id,
                        "section_id": section_ids[s_idx],
                        "position": p_pos,
                        "char_start": paragraph.start,
                        "char_end": paragraph.end,
                        "page": page_at(doc.metadata.get("pages"), paragraph.start),
                    }
                )
                p_pos += 1
                for sentence in paragraph.sentences:
                    sentence_id = next(sentence_ids)
                    ids["sentence"].append(sentence_id)
                    rows["sentence"].append(
                        {
                            "sentence_id": sentence_id,
                            "version_id": version_id,
                            "doc_id": doc_id,
                            "paragraph_id": paragraph_id,
                            "position": s_pos,
                            "char_start": sentence.start,
                            "char_end": sentence.end,
                        }
                    )
                    s_pos += 1
        for c_pos, chunk in enumerate(doc.chunks):
            rows["chunk"].append(
                {
                    "chunk_id": chunk_ids[c_pos],
                    "version_id": version_id,
                    "doc_id": doc_id,
                    "section_id": section_ids[chunk.section],
                    "position": c_pos,
                    "char_start": chunk.start,
                    "char_end": chunk.end,
                    "n_tokens": chunk.n_tokens,
                }
            )
    # parents before children (foreign keys)
    for table, level in (
        (documents, "document"),
        (sections, "section"),
        (paragraphs, "paragraph"),
        (sentences, "sentence"),
        (chunks, "chunk"),
    ):
        if rows[level]:
            conn.execute(insert(table), rows[level])
    return ids


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
    np.savez(buffer, **arrays)
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
