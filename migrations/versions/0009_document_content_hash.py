"""each document's content hash, so that a later build reuses its vectors

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28 02:10:00.000000

Documents stored before this revision keep NULL: the first build after it encodes them again,
and records their hashes for the builds after that.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("content_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_column("content_sha256")
