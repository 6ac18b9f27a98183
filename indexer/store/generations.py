"""Generations of a version's rows: what each revision of document changes can still read.

A document change never deletes the rows a reader may hold. The replaced and deleted
documents are *retired*: `documents.retired_revision` records the revision that retired them,
and they stay, with their units and vectors, for requests answering from an earlier revision.
Rows are addressed by id, and ids are never given twice, so a reader at revision r that reads
the rows of the documents it holds reads exactly what revision r held.

Queries that list a version's documents (loading it, a reindex, the next change) see the live
rows only (`live_documents`). Retired rows are purged (`purge_retired`) once no reader can need
them: every reader of this process answers from a later revision, and readers elsewhere (other
processes on the same database) have had the grace period to finish.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from sqlalchemy import Connection, Engine, Select, delete, select, update

from docsim.indexer.store.tables import LEVEL_TABLES, document_vectors, documents

logger = logging.getLogger(__name__)


def live_documents(version_id: int) -> Select:
    """The doc ids of a version's live (not retired) documents, as a subquery."""
    return select(documents.c.doc_id).where(
        documents.c.version_id == version_id, documents.c.retired_revision.is_(None)
    )


def retire_documents(conn: Connection, doc_ids: Sequence[int], revision: int) -> None:
    """Retire `doc_ids` at `revision` (in the caller's transaction)."""
    if not doc_ids:
        return
    conn.execute(
        update(documents)
        .where(documents.c.doc_id.in_(list(doc_ids)))
        .values(retired_revision=revision, retired_at=datetime.now(timezone.utc))
    )


def purge_retired(
    engine: Engine, version_id: int, *, up_to_revision: int, grace_seconds: float
) -> int:
    """Delete the documents of `version_id` retired at a revision `<= up_to_revision` (no
    reader of this process answers from an earlier one) at least `grace_seconds` ago, with
    their units and vectors; returns how many documents went."""
    cutoff = datetime.now(timezone.utc) - timedelta(seconds=grace_seconds)
    with engine.begin() as conn:
        gone = list(
            conn.execute(
                select(documents.c.doc_id).where(
                    documents.c.version_id == version_id,
                    documents.c.retired_revision <= up_to_revision,
                    documents.c.retired_at <= cutoff,
                )
            ).scalars()
        )
        for start in range(0, len(gone), 500):
            part = gone[start : start + 500]
            conn.execute(delete(document_vectors).where(document_vectors.c.doc_id.in_(part)))
            for table, _ in LEVEL_TABLES.values():  # children first, the documents last
                conn.execute(delete(table).where(table.c.doc_id.in_(part)))
    if gone:
        logger.info("Purged %d retired documents of version %d", len(gone), version_id)
    return len(gone)
