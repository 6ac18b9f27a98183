"""index sentences by paragraph and paragraphs by section

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 10:23:48.578328
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("paragraphs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_paragraphs_section_id"), ["section_id"], unique=False)

    with op.batch_alter_table("sentences", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_sentences_paragraph_id"), ["paragraph_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("sentences", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sentences_paragraph_id"))

    with op.batch_alter_table("paragraphs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_paragraphs_section_id"))
