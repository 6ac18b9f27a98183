"""replaced and deleted documents stay, retired, for the readers of earlier revisions

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 23:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LIVE = sa.text("retired_revision IS NULL")


def upgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("retired_revision", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.drop_constraint("uq_documents_version_id", type_="unique")
        batch_op.create_index(
            "uq_documents_live_external_id",
            ["version_id", "external_id"],
            unique=True,
            sqlite_where=LIVE,
            postgresql_where=LIVE,
        )
        batch_op.create_index("ix_documents_retired_revision", ["retired_revision"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_index("ix_documents_retired_revision")
        batch_op.drop_index("uq_documents_live_external_id")
    # retired rows cannot stay under the old constraint: they go, with their units
    retired = "SELECT doc_id FROM documents WHERE retired_revision IS NOT NULL"
    for table in ("document_vectors", "sentences", "chunks", "paragraphs", "sections"):
        op.execute(f"DELETE FROM {table} WHERE doc_id IN ({retired})")  # noqa: S608
    op.execute("DELETE FROM documents WHERE retired_revision IS NOT NULL")
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_column("retired_at")
        batch_op.drop_column("retired_revision")
        batch_op.create_unique_constraint("uq_documents_version_id", ["version_id", "external_id"])
