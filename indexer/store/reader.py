"""Reads of a version's rows: unit offsets and titles, document texts, stored documents."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
from sqlalchemy import Engine, select

from docsim.indexer.errors import RowsPurgedError
from docsim.indexer.store.generations import live_documents
from docsim.indexer.store.tables import LEVEL_TABLES, documents, paragraphs, sections
from docsim.indexer.text.documents import SectionSource, SourceDocument

logger = logging.getLogger(__name__)


def _all_found(found: dict, wanted: list[int], what: str) -> None:
    missing = set(wanted) - set(found)
    if missing:
        raise RowsPurgedError(
            f"{len(missing)} {what} of this request's snapshot were purged by later document "
            "changes; retry"
        )


def level_unit_rows(engine: Engine, level: str, unit_ids: list[int]) -> dict[int, dict[str, Any]]:
    """doc_id, char offsets (and section title) of units of one level, by id."""
    table, id_column = LEVEL_TABLES[level]
    if level == "document":
        columns = [id_column, documents.c.doc_id]
    else:
        columns = [id_column, table.c.doc_id, table.c.char_start, table.c.char_end]
        if level == "section":
            columns.append(sections.c.title)
    with engine.connect() as conn:
        rows = conn.execute(select(*columns).where(id_column.in_(unit_ids))).mappings().all()
    found = {int(row[id_column.name]): dict(row) for row in rows}
    _all_found(found, unit_ids, f"{level} rows")
    return found


def document_units(engine: Engine, level: str, doc_id: int) -> list[tuple[int, int, int]]:
    """(id, char_start, char_end) of one document's units of `level`, in order."""
    table, id_column = LEVEL_TABLES[level]
    with engine.connect() as conn:
        rows = conn.execute(
            select(id_column, table.c.char_start, table.c.char_end)
            .where(table.c.doc_id == doc_id)
            .order_by(id_column)
        ).all()
    return [(int(a), int(b), int(c)) for a, b, c in rows]


def units_of_documents(engine: Engine, level: str, doc_ids: list[int]) -> np.ndarray:
    """The ids of every unit of `level` in the documents `doc_ids` `(n,)` int64."""
    table, id_column = LEVEL_TABLES[level]
    column = documents.c.doc_id if level == "document" else table.c.doc_id
    with engine.connect() as conn:
        found = conn.execute(select(id_column).where(column.in_(doc_ids))).scalars().all()
    return np.asarray(found, dtype=np.int64)


def document_texts(engine: Engine, doc_ids: list[int]) -> dict[int, str]:
    """The texts of documents by doc id, live or retired.

    Raises:
        RowsPurgedError: one of them is gone.
    """
    with engine.connect() as conn:
        rows = conn.execute(
            select(documents.c.doc_id, documents.c.text).where(documents.c.doc_id.in_(doc_ids))
        )
        found = {int(r.doc_id): r.text for r in rows}
    _all_found(found, doc_ids, "documents")
    return found


def document_paragraph_texts(
    engine: Engine, doc_ids: list[int], batch: int = 5000
) -> dict[int, str]:
    """The text of every paragraph of the documents `doc_ids`, by paragraph id."""
    out: dict[int, str] = {}
    for i in range(0, len(doc_ids), batch):
        part = doc_ids[i : i + batch]
        texts = document_texts(engine, part)
        with engine.connect() as conn:
            rows = conn.execute(
                select(
                    paragraphs.c.paragraph_id,
                    paragraphs.c.doc_id,
                    paragraphs.c.char_start,
                    paragraphs.c.char_end,
                ).where(paragraphs.c.doc_id.in_(part))
            )
            for r in rows:
                out[int(r.paragraph_id)] = texts[int(r.doc_id)][r.char_start : r.char_end]
    return out


def paragraph_offsets(
    engine: Engine, paragraph_ids: list[int]
) -> dict[int, tuple[int, int, int | None]]:
    """`(char_start, char_end, page)` of paragraphs by id; the page is None unless the source
    was paged (PDF)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                paragraphs.c.paragraph_id,
                paragraphs.c.char_start,
                paragraphs.c.char_end,
                paragraphs.c.page,
            ).where(paragraphs.c.paragraph_id.in_(paragraph_ids))
        )
        found = {int(r.paragraph_id): (r.char_start, r.char_end, r.page) for r in rows}
    _all_found(found, paragraph_ids, "paragraphs")
    return found


def document_section_titles(engine: Engine, doc_id: int) -> list[str]:
    """The titles of one document's sections, in order."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(sections.c.title)
            .where(sections.c.doc_id == doc_id)
            .order_by(sections.c.section_id)
        ).all()
    return [r.title for r in rows]


def stored_documents(engine: Engine, version_id: int, batch: int = 256) -> Iterator[SourceDocument]:
    """The documents of a version as they were stored, with their section layout, so that
    they can be split and encoded again (a reindex of the current collection)."""
    with engine.connect() as conn:
        doc_ids = list(
            conn.execute(
                select(documents.c.doc_id)
                .where(documents.c.doc_id.in_(live_documents(version_id)))
                .order_by(documents.c.doc_id)
            ).scalars()
        )
    for start in range(0, len(doc_ids), batch):
        yield from _stored(doc_ids[start : start + batch], engine)


def _stored(wanted: list[int], engine: Engine) -> Iterator[SourceDocument]:
    """The stored documents `wanted` (doc ids), with their section layout."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                documents.c.doc_id,
                documents.c.external_id,
                documents.c.title,
                documents.c.text,
                documents.c.metadata,
            )
            .where(documents.c.doc_id.in_(wanted))
            .order_by(documents.c.doc_id)
        ).all()
        layout: dict[int, list[SectionSource]] = {d: [] for d in wanted}
        section_rows = conn.execute(
            select(sections.c.doc_id, sections.c.title, sections.c.char_start, sections.c.char_end)
            .where(sections.c.doc_id.in_(wanted))
            .order_by(sections.c.section_id)
        )
        for doc_id, title, char_start, char_end in section_rows:
            layout[int(doc_id)].append(SectionSource(title, char_start, char_end))
    for row in rows:
        yield SourceDocument(
            doc_id=row.external_id,
            title=row.title,
            text=row.text,
            metadata=row.metadata or {},
            sections=tuple(layout[int(row.doc_id)]),
        )


def stored_document_by_id(engine: Engine, doc_id: int) -> SourceDocument:
    """One stored document by its doc id (live or retired), with its section layout.

    Raises:
        RowsPurgedError: it is gone.
    """
    found = list(_stored([doc_id], engine))
    if not found:
        raise RowsPurgedError("the document of this request's snapshot was purged; retry")
    return found[0]
