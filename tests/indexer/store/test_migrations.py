from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from indexer.config import Settings
from indexer.store.db import downgrade, make_engine, upgrade
from indexer.store.tables import metadata

TABLES = {
    "index_versions",
    "active_versions",
    "documents",
    "sections",
    "paragraphs",
    "sentences",
    "chunks",
}


def test_upgrade_downgrade_on_a_fresh_database(tmp_path: Path) -> None:
    url = Settings(data_dir=tmp_path).database_url  # SQLite, or the run's PostgreSQL
    upgrade(url)
    engine = make_engine(url)
    assert TABLES <= set(inspect(engine).get_table_names())
    with engine.connect() as conn:
        # the migrations create exactly what the table metadata describes
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []
    downgrade(url, "base")
    assert not TABLES & set(inspect(engine).get_table_names())
    upgrade(url)
    assert TABLES <= set(inspect(engine).get_table_names())
    engine.dispose()
