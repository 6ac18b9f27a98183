"""Alembic environment: docsim's table metadata and the URL from docsim's settings."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context

from docsim.indexer.store.db import make_engine
from docsim.indexer.store.tables import metadata

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name)


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url")
    url = url or config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from docsim.indexer.settings import get_settings

    return get_settings().database_url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(_url())
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            # Batch operations rebuild tables (copy, drop, rename): with rows referencing them,
            # SQLite refuses the drop while foreign keys are enforced. Off for the migration
            # only (a PRAGMA that must run outside a transaction), as Alembic recommends.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        context.configure(
            connection=connection,
            target_metadata=metadata,
            compare_type=True,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
