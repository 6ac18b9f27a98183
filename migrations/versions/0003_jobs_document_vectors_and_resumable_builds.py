"""jobs, document vectors and resumable builds

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 11:34:58.884138
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=True),
        sa.Column("unit", sa.String(length=16), nullable=False),
        sa.Column("rate", sa.JSON(), nullable=True),
        sa.Column("eta_seconds", sa.JSON(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("worker", sa.String(length=128), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["index_versions.version_id"],
            name=op.f("fk_jobs_version_id_index_versions"),
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_status"), ["status"], unique=False)

    op.create_table(
        "document_vectors",
        sa.Column(
            "doc_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["doc_id"], ["documents.doc_id"], name=op.f("fk_document_vectors_doc_id_documents")
        ),
        sa.PrimaryKeyConstraint("doc_id", name=op.f("pk_document_vectors")),
    )
    with op.batch_alter_table("document_vectors", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_document_vectors_version_id"), ["version_id"], unique=False
        )

    with op.batch_alter_table("index_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("build_state", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("revision", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("index_versions", schema=None) as batch_op:
        batch_op.drop_column("revision")
        batch_op.drop_column("build_state")

    with op.batch_alter_table("document_vectors", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_document_vectors_version_id"))

    op.drop_table("document_vectors")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_status"))

    op.drop_table("jobs")
