"""What SQL holds of a version's live documents: each level's rows in id order and how many
units of the next level each holds, for `LoadedIndex` to lay its vectors out by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, func, select

from docsim.indexer.store.db import connected
from docsim.indexer.store.generations import live_documents
from docsim.indexer.store.tables import chunks, documents, paragraphs, sections, sentences


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


def read_structure(bind: Engine | Connection, vid: int) -> StoredStructure:
    """Reads, for the version's live documents: each document's id, external id, title and
    metadata; each paragraph's id and document; the sentences of each paragraph; and the
    sections and chunks of each document. Builds them into id-ordered arrays (`StoredStructure`)."""
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
        para_rows = conn.execute(
            select(paragraphs.c.paragraph_id, paragraphs.c.doc_id)
            .where(paragraphs.c.doc_id.in_(live))
            .order_by(paragraphs.c.paragraph_id)
        ).all()
        sentence_counts: dict[int, int] = dict(
            conn.execute(
                select(sentences.c.paragraph_id, func.count())
                .where(sentences.c.doc_id.in_(live))
                .group_by(sentences.c.paragraph_id)
            ).all()
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
    return StoredStructure(
        doc_ids=np.array([d.doc_id for d in docs], dtype=np.int64),
        external_ids=[d.external_id for d in docs],
        titles=[d.title for d in docs],
        metadata=[d.metadata or {} for d in docs],
        paragraph_ids=np.array([p[0] for p in para_rows], dtype=np.int64),
        paragraph_docs=np.array([p[1] for p in para_rows], dtype=np.int64),
        paragraph_lengths=np.array(
            [sentence_counts.get(p[0], 0) for p in para_rows], dtype=np.int64
        ),
        per_document=per_document,
    )
