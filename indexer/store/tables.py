"""The SQL tables docsim writes (SQLAlchemy Core). Alembic migrations import this metadata.

Every unit row belongs to one index version. Unit ids are int64, identical to the FAISS ids
of that level: `(version_id << 40) + ordinal`, so a version's ids never collide with another
version's and need no round trip to the database to allocate.
"""

from __future__ import annotations

from datetime import datetime, timezone
from enum import StrEnum

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

from docsim.indexer.choices import DEFAULT_COLLECTION

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class VersionStatus(StrEnum):
    """`index_versions.status`: building -> ready (published) -> retired; a build that stops
    becomes suspended (a job may resume it) or failed (its rows and files removed)."""

    building = "building"
    suspended = "suspended"
    ready = "ready"
    retired = "retired"
    failed = "failed"


class JobStatus(StrEnum):
    """`jobs.status`: queued -> running -> succeeded | failed | cancelled."""

    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


# On SQLite an INTEGER PRIMARY KEY is the rowid (64-bit) and needs no extra index.
UnitId = BigInteger().with_variant(Integer, "sqlite")

# The collections one database and data directory serve: each has its own versions (its
# active one in `active_versions`, slot = name), jobs and documents. `settings` holds what the
# collection sets apart from the server's settings (its encoder, index and search groups);
# the keys are SHA-256 digests of the collection's API keys, for writing and for reading.
collections = Table(
    "collections",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("settings", JSON, nullable=False),
    Column("write_key_sha256", String(64), nullable=True),
    Column("read_key_sha256", String(64), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # field -> FieldType value, fixed at first write (`indexer.text.field_types`); NULL
    # until the collection's first write
    Column("field_types", JSON, nullable=True),
)

index_versions = Table(
    "index_versions",
    metadata,
    Column("version_id", Integer, primary_key=True, autoincrement=True),
    Column("collection", String(64), nullable=False, server_default=DEFAULT_COLLECTION, index=True),
    Column("status", String(16), nullable=False),  # VersionStatus
    Column("encoder_name", String(256), nullable=False),
    Column("path", String(1024), nullable=False),
    Column("manifest", JSON, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("published_at", DateTime(timezone=True), nullable=True),
    # what a resumed build needs: the plan's fingerprint and the blocks already committed
    Column("build_state", JSON, nullable=True),
    # document changes applied to the published version (POST/DELETE /documents)
    Column("revision", Integer, nullable=False, server_default="0"),
    # the next free ordinal of each level after document changes: an id is never given twice,
    # not even after the newest document was deleted
    Column("unit_ordinals", JSON, nullable=True),
)

active_versions = Table(
    "active_versions",
    metadata,
    Column("slot", String(64), primary_key=True),
    Column("version_id", Integer, ForeignKey("index_versions.version_id"), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

documents = Table(
    "documents",
    metadata,
    Column("doc_id", UnitId, primary_key=True, autoincrement=False),
    Column("version_id", Integer, ForeignKey("index_versions.version_id"), nullable=False),
    Column("external_id", String(512), nullable=False),
    Column("title", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("metadata", JSON, nullable=False),
    # `Document.content_sha256`: a later build reuses the vectors of a document whose text
    # and split are unchanged; NULL in versions built before it was recorded
    Column("content_sha256", String(64), nullable=True),
    # a replaced or deleted document stays, retired, for the readers of earlier revisions
    # (`indexer.store.generations`): live rows have NULL here
    Column("retired_revision", Integer, nullable=True),
    Column("retired_at", DateTime(timezone=True), nullable=True),
)

sections = Table(
    "sections",
    metadata,
    Column("section_id", UnitId, primary_key=True, autoincrement=False),
    Column("version_id", Integer, nullable=False, index=True),
    Column("doc_id", UnitId, ForeignKey("documents.doc_id"), nullable=False, index=True),
    Column("position", Integer, nullable=False),
    Column("title", Text, nullable=False),
    Column("char_start", Integer, nullable=False),
    Column("char_end", Integer, nullable=False),
)

paragraphs = Table(
    "paragraphs",
    metadata,
    Column("paragraph_id", UnitId, primary_key=True, autoincrement=False),
    Column("version_id", Integer, nullable=False, index=True),
    Column("doc_id", UnitId, ForeignKey("documents.doc_id"), nullable=False, index=True),
    Column("section_id", UnitId, ForeignKey("sections.section_id"), nullable=False, index=True),
    Column("position", Integer, nullable=False),
    Column("char_start", Integer, nullable=False),
    Column("char_end", Integer, nullable=False),
    Column("page", Integer, nullable=True),  # 1-based page of a paged source (PDF), else NULL
)

sentences = Table(
    "sentences",
    metadata,
    Column("sentence_id", UnitId, primary_key=True, autoincrement=False),
    Column("version_id", Integer, nullable=False, index=True),
    Column("doc_id", UnitId, ForeignKey("documents.doc_id"), nullable=False, index=True),
    Column(
        "paragraph_id", UnitId, ForeignKey("paragraphs.paragraph_id"), nullable=False, index=True
    ),
    Column("position", Integer, nullable=False),
    Column("char_start", Integer, nullable=False),
    Column("char_end", Integer, nullable=False),
)

chunks = Table(
    "chunks",
    metadata,
    Column("chunk_id", UnitId, primary_key=True, autoincrement=False),
    Column("version_id", Integer, nullable=False, index=True),
    Column("doc_id", UnitId, ForeignKey("documents.doc_id"), nullable=False, index=True),
    Column("section_id", UnitId, ForeignKey("sections.section_id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("char_start", Integer, nullable=False),
    Column("char_end", Integer, nullable=False),
    Column("n_tokens", Integer, nullable=False),
)

Index("ix_documents_version_id", documents.c.version_id)
# one live document per id and version; retired ones may share it
Index(
    "uq_documents_live_external_id",
    documents.c.version_id,
    documents.c.external_id,
    unique=True,
    sqlite_where=documents.c.retired_revision.is_(None),
    postgresql_where=documents.c.retired_revision.is_(None),
)
Index("ix_documents_retired_revision", documents.c.retired_revision)

# Vectors of documents added to a published version after its build (POST /documents): every
# level's ids and float16 vectors of one document, committed with its rows in one transaction.
document_vectors = Table(
    "document_vectors",
    metadata,
    Column("doc_id", UnitId, ForeignKey("documents.doc_id"), primary_key=True, autoincrement=False),
    Column("version_id", Integer, nullable=False, index=True),
    Column("payload", LargeBinary, nullable=False),
)

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", Integer, primary_key=True, autoincrement=True),
    Column("collection", String(64), nullable=False, server_default=DEFAULT_COLLECTION, index=True),
    Column("kind", String(32), nullable=False),
    Column("parameters", JSON, nullable=False),
    Column("status", String(16), nullable=False, index=True),  # JobStatus
    Column("done", Integer, nullable=False, default=0),
    Column("total", Integer, nullable=True),
    Column("unit", String(16), nullable=False, default="sentences"),
    Column("rate", JSON, nullable=True),  # units per second, measured
    Column("eta_seconds", JSON, nullable=True),
    Column("message", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("worker", String(128), nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("version_id", Integer, ForeignKey("index_versions.version_id"), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("heartbeat_at", DateTime(timezone=True), nullable=True),
    Column("finished_at", DateTime(timezone=True), nullable=True),
)

# The table of each level, its id column, in delete order (children first).
LEVEL_TABLES = {
    "sentence": (sentences, sentences.c.sentence_id),
    "chunk": (chunks, chunks.c.chunk_id),
    "paragraph": (paragraphs, paragraphs.c.paragraph_id),
    "section": (sections, sections.c.section_id),
    "document": (documents, documents.c.doc_id),
}

ID_SHIFT = 40


def unit_id(version_id: int, ordinal: int) -> int:
    """The int64 id of the `ordinal`-th unit of a level in a version."""
    return (version_id << ID_SHIFT) + ordinal


def as_utc(moment: datetime | None) -> datetime | None:
    """A datetime read from SQL, timezone-aware: SQLite returns naive datetimes, which were
    written in UTC."""
    if moment is not None and moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment
