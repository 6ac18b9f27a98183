"""A throwaway PostgreSQL server for the test suite's PostgreSQL run.

The server is Debian's `postgresql` package, run from its binaries in a temporary directory
(`initdb`, then `pg_ctl start`), listening on a free loopback port with trust authentication
and durability off (a test database needs no fsync). PostgreSQL refuses to run as root, so
when the tests run as root the cluster belongs to the `postgres` system user the package
creates. Each test gets its own database (`CREATE DATABASE`), so tests stay as independent as
with a SQLite file per data directory.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

logger = logging.getLogger(__name__)

SYSTEM_USER = "postgres"  # made by Debian's package; the server cannot run as root


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries here (install Debian's `postgresql`)."""


def server_binaries() -> Path:
    """The folder with `initdb` and `pg_ctl`: `$DOCSIM_PG_BINDIR`, else the newest Debian
    `/usr/lib/postgresql/<major>/bin`, else whatever is on PATH."""
    if configured := os.environ.get("DOCSIM_PG_BINDIR"):
        return Path(configured)
    debian = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if debian:
        return Path(debian[-1]).parent
    found = shutil.which("initdb")
    if found is None:
        raise PostgresUnavailable(
            "PostgreSQL is not installed: `apt-get install -y postgresql` (or set DOCSIM_PG_BINDIR)"
        )
    return Path(found).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One running cluster; `database()` makes a fresh database and returns its URL."""

    def __init__(self, root: Path) -> None:
        self.bindir = server_binaries()
        self.root = root
        self.data = root / "cluster"
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        self._names = count(1)

    def _run(self, *args: str) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.as_root:
            command = ["runuser", "-u", SYSTEM_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.as_root:
            shutil.chown(self.root, SYSTEM_USER, SYSTEM_USER)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.resume()

    def resume(self) -> None:
        """Start the initialised cluster (again, after `stop`)."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
            "-o", options, "start",
        )  # fmt: skip
        logger.info("PostgreSQL %s started on port %d", self.bindir.parent.name, self.port)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except RuntimeError as error:
            logger.warning("could not stop the test PostgreSQL: %s", error)

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _administer(self, *statements: str) -> None:
        """Run statements that cannot run in a transaction (CREATE / DROP DATABASE)."""
        admin = create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                for statement in statements:
                    conn.execute(text(statement))
        finally:
            admin.dispose()

    def database(self) -> str:
        """A new, empty database's SQLAlchemy URL."""
        name = f"docsim_{os.getpid()}_{next(self._names)}_{int(time.time() * 1000) % 100000}"
        self._administer(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def copy_database(self, template_url: str, target_url: str) -> None:
        """Replace the database of `target_url` with a copy of `template_url`'s, which nobody
        may be connected to (PostgreSQL's `CREATE DATABASE ... TEMPLATE`)."""
        template, target = make_url(template_url).database, make_url(target_url).database
        self._administer(
            f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)',
            f'CREATE DATABASE "{target}" TEMPLATE "{template}"',
        )


@contextmanager
def running_server() -> Iterator[PostgresServer]:
    """A started server in a new folder under the system temp directory (pytest's own temp
    folders are private to root, so the `postgres` user could not enter them)."""
    root = Path(tempfile.mkdtemp(prefix="docsim-pg-"))
    server = PostgresServer(root)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
