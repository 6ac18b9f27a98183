"""field_types: each collection's metadata field types, fixed at first write

A collection's documents written before this migration give its types: each field takes the
type its live documents' values agree on. A field on which they disagree (numbers and dates,
say) is typed `mixed`, takes any value as before, and is named in a warning here; filters on
it take eq, in and exists only. A collection with no published version gets its types from
its first write.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27 18:00:00.000000
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from docsim.indexer.text.field_types import infer_field_types

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

logger = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    with op.batch_alter_table("collections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("field_types", sa.JSON(), nullable=True))
    conn = op.get_bind()
    collections = sa.table("collections", sa.column("name"), sa.column("field_types", sa.JSON))
    active = sa.table("active_versions", sa.column("slot"), sa.column("version_id"))
    documents = sa.table(
        "documents",
        sa.column("version_id"),
        sa.column("metadata", sa.JSON),
        sa.column("retired_revision"),
    )
    slots = conn.execute(sa.select(active.c.slot, active.c.version_id)).all()
    for name, version_id in slots:
        rows = conn.execute(
            sa.select(documents.c.metadata).where(
                documents.c.version_id == version_id, documents.c.retired_revision.is_(None)
            )
        )
        types, conflicts = infer_field_types(row[0] or {} for row in rows)
        for field in conflicts:
            logger.warning(
                "Collection %r: the documents' metadata field %r holds values of several "
                "types; it stays 'mixed' (any value; filters take eq, in and exists only)",
                name,
                field,
            )
        conn.execute(
            sa.update(collections)
            .where(collections.c.name == name)
            .values(field_types={field: kind.value for field, kind in types.items()})
        )


def downgrade() -> None:
    with op.batch_alter_table("collections", schema=None) as batch_op:
        batch_op.drop_column("field_types")
