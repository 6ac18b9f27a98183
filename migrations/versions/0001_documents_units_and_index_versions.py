"""documents, units and index versions

Revision ID: 0001
Revises:
Create Date: 2026-11-21 08:44:17.295504
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "index_versions",
        sa.Column("version_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("encoder_name", sa.String(length=256), nullable=False),
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("manifest", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("version_id", name=op.f("pk_index_versions")),
    )
    op.create_table(
        "active_versions",
        sa.Column("slot", sa.String(length=64), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["index_versions.version_id"],
            name=op.f("fk_active_versions_version_id_index_versions"),
        ),
        sa.PrimaryKeyConstraint("slot", name=op.f("pk_active_versions")),
    )
    op.create_table(
        "documents",
        sa.Column(
            "doc_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("external_id", sa.String(length=512), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["index_versions.version_id"],
            name=op.f("fk_documents_version_id_index_versions"),
        ),
        sa.PrimaryKeyConstraint("doc_id", name=op.f("pk_documents")),
        sa.UniqueConstraint("version_id", "external_id", name=op.f("uq_documents_version_id")),
    )
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.create_index("ix_documents_version_id", ["version_id"], unique=False)

    op.create_table(
        "sections",
        sa.Column(
            "section_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("doc_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("char_start", sa.Integer(), nullable=False),
        sa.Column("char_end", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["doc_id"], ["documents.doc_id"], name=op.f("fk_sections_doc_id_documents")
        ),
        sa.PrimaryKeyConstraint("section_id", name=op.f("pk_sections")),
    )
    with op.batch_alter_table("sections", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sections_doc_id"), ["doc_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_sections_version_id"), ["version_id"], unique=False)

    op.create_table(
        "chunks",
        sa.Column(
            "chunk_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("doc_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "section_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("char_start", sa.Integer(), nullable=False),
        sa.Column("char_end", sa.Integer(), nullable=False),
        sa.Column("n_tokens", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["doc_id"], ["documents.doc_id"], name=op.f("fk_chunks_doc_id_documents")
        ),
        sa.ForeignKeyConstraint(
            ["section_id"], ["sections.section_id"], name=op.f("fk_chunks_section_id_sections")
        ),
        sa.PrimaryKeyConstraint("chunk_id", name=op.f("pk_chunks")),
    )
    with op.batch_alter_table("chunks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_chunks_doc_id"), ["doc_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_chunks_version_id"), ["version_id"], unique=False)

    op.create_table(
        "paragraphs",
        sa.Column(
            "paragraph_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("doc_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "section_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("char_start", sa.Integer(), nullable=False),
        sa.Column("char_end", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["doc_id"], ["documents.doc_id"], name=op.f("fk_paragraphs_doc_id_documents")
        ),
        sa.ForeignKeyConstraint(
            ["section_id"], ["sections.section_id"], name=op.f("fk_paragraphs_section_id_sections")
        ),
        sa.PrimaryKeyConstraint("paragraph_id", name=op.f("pk_paragraphs")),
    )
    with op.batch_alter_table("paragraphs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_paragraphs_doc_id"), ["doc_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_paragraphs_version_id"), ["version_id"], unique=False)

    op.create_table(
        "sentences",
        sa.Column(
            "sentence_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("doc_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "paragraph_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("char_start", sa.Integer(), nullable=False),
        sa.Column("char_end", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["doc_id"], ["documents.doc_id"], name=op.f("fk_sentences_doc_id_documents")
        ),
        sa.ForeignKeyConstraint(
            ["paragraph_id"],
            ["paragraphs.paragraph_id"],
            name=op.f("fk_sentences_paragraph_id_paragraphs"),
        ),
        sa.PrimaryKeyConstraint("sentence_id", name=op.f("pk_sentences")),
    )
    with op.batch_alter_table("sentences", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sentences_doc_id"), ["doc_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_sentences_version_id"), ["version_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("sentences", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sentences_version_id"))
        batch_op.drop_index(batch_op.f("ix_sentences_doc_id"))

    op.drop_table("sentences")
    with op.batch_alter_table("paragraphs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_paragraphs_version_id"))
        batch_op.drop_index(batch_op.f("ix_paragraphs_doc_id"))

    op.drop_table("paragraphs")
    with op.batch_alter_table("chunks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chunks_version_id"))
        batch_op.drop_index(batch_op.f("ix_chunks_doc_id"))

    op.drop_table("chunks")
    with op.batch_alter_table("sections", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sections_version_id"))
        batch_op.drop_index(batch_op.f("ix_sections_doc_id"))

    op.drop_table("sections")
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_index("ix_documents_version_id")

    op.drop_table("documents")
    op.drop_table("active_versions")
    op.drop_table("index_versions")
