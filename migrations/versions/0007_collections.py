"""collections: one database and data directory serve several, the existing one as `default`

Every version and job so far belongs to the collection `default`, which this migration
creates with no settings of its own; its active version (slot `default`) and its files under
`<data_dir>/indexes` stay where they are, so nothing is rebuilt.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 03:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT = "default"
UNIT_TABLES = (  # children first
    "document_vectors",
    "sentences",
    "chunks",
    "paragraphs",
    "sections",
    "documents",
)


def upgrade() -> None:
    collections = op.create_table(
        "collections",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("write_key_sha256", sa.String(length=64), nullable=True),
        sa.Column("read_key_sha256", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_collections")),
    )
    op.bulk_insert(
        collections, [{"name": DEFAULT, "settings": {}, "created_at": datetime.now(timezone.utc)}]
    )
    for table in ("index_versions", "jobs"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(
                sa.Column(
                    "collection", sa.String(length=64), nullable=False, server_default=DEFAULT
                )
            )
            batch_op.create_index(f"ix_{table}_collection", ["collection"], unique=False)


def downgrade() -> None:
    others = f"collection <> '{DEFAULT}'"
    op.execute(f"DELETE FROM jobs WHERE {others}")  # noqa: S608
    op.execute(
        "DELETE FROM active_versions WHERE version_id IN "
        f"(SELECT version_id FROM index_versions WHERE {others})"  # noqa: S608
    )
    # the other collections' versions lose their units and stay as retired rows
    theirs = f"SELECT version_id FROM index_versions WHERE {others}"  # noqa: S608
    for table in UNIT_TABLES:
        op.execute(f"DELETE FROM {table} WHERE version_id IN ({theirs})")  # noqa: S608
    op.execute(f"UPDATE index_versions SET status = 'retired' WHERE {others}")  # noqa: S608
    for table in ("jobs", "index_versions"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_index(f"ix_{table}_collection")
            batch_op.drop_column("collection")
    op.drop_table("collections")
