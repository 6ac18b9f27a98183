"""Database engines and Alembic migrations (tables are never created with `create_all`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, Insert, create_engine, event
from sqlalchemy.engine import make_url

from docsim.indexer.errors import DatabaseError

logger = logging.getLogger(__name__)


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys and a generous busy timeout."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            folder = Path(parsed.database).parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise DatabaseError(
                    f"cannot create the database folder {str(folder)!r}: {error.strerror}"
                ) from error
        engine = create_engine(url, connect_args={"timeout": 60})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


@contextlib.contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """A connection whose reads all see one committed state of the database, so that a read
    made of several queries (loading a version) never mixes two revisions: a REPEATABLE READ
    transaction on PostgreSQL; on SQLite (WAL), a read transaction, whose snapshot is taken at
    its first read. Nothing is written through it."""
    if engine.dialect.name == "postgresql":
        with (
            engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn,
            conn.begin(),
        ):
            yield conn
        return
    with engine.connect() as conn:
        conn.exec_driver_sql("BEGIN")  # pysqlite opens no transaction for reads by itself
        try:
            yield conn
        finally:
            conn.rollback()


def connected(bind: Engine | Connection) -> contextlib.AbstractContextManager[Connection]:
    """`bind` itself when it is a connection (a caller's snapshot), else a new connection."""
    return contextlib.nullcontext(bind) if isinstance(bind, Connection) else bind.connect()


def insert_one(conn: Connection, statement: Insert) -> int:
    """Run a single-row INSERT; the primary key its row was given.

    Raises:
        DatabaseError: the driver reported no key (a table without an integer primary key).
    """
    key = conn.execute(statement).inserted_primary_key
    if key is None:
        raise DatabaseError("the INSERT gave its row no primary key")
    return int(key[0])


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    # FULL: a commit is on disk before it returns (WAL fsynced), so an acknowledged change
    # survives a power loss, not only a crash of the process
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(resources.files("docsim.migrations")))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the schema at `url` to `revision` (Alembic)."""
    make_engine(url).dispose()  # creates the SQLite folder with a clear error if it cannot
    try:
        command.upgrade(alembic_config(url), revision)
    except Exception as error:  # noqa: BLE001 - any driver error becomes one clear message
        if isinstance(error, DatabaseError):
            raise
        raise DatabaseError(f"cannot migrate the database at {make_url(url)!r}: {error}") from error


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)
