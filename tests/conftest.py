from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Iterator
from copy import deepcopy
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.pool import Pool

from tests.utils.postgres import PostgresServer, running_server

# docsim itself is imported by the fixtures, not here: pytest-xdist's controller process loads
# this file but runs no test, and importing torch and transformers would cost it seconds of
# the cores its workers start on.
if TYPE_CHECKING:
    from docsim.indexer.text.sentences import SentenceSplitter
    from docsim.models.encoders.transformer import TransformerEncoder
    from docsim.search.settings import QuerySettings
    from tests.utils.indexes import PublishedCopies

DATABASE_URL = "DOCSIM_DB__URL"
ENCODER_CACHE = "DOCSIM_ENCODER__CACHE_DIR"
# Tests that never reach the SQL layer: `models` imports no SQL (tests/test_layers.py), nor does
# text splitting. Modules elsewhere opt in with `pytestmark = pytest.mark.no_sql`.
NO_SQL_FOLDERS = ("tests/models/", "tests/indexer/text/")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--db",
        choices=("sqlite", "postgresql"),
        default=os.environ.get("DOCSIM_TEST_DB", "sqlite"),
        help="the database backend every test runs on (default: $DOCSIM_TEST_DB or sqlite); "
        "postgresql starts a throwaway server from Debian's postgresql package",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks the tests under NO_SQL_FOLDERS `no_sql`; on `--db postgresql`, leaves every
    `no_sql` test out, since the database cannot change its outcome (the SQLite pass runs
    them, and `pytest_runtest_teardown` fails one that opens a database connection), and
    marks every `heavy_sql` test `slow`."""
    for item in items:
        if item.path.relative_to(config.rootpath).as_posix().startswith(NO_SQL_FOLDERS):
            item.add_marker(pytest.mark.no_sql)
    # Files holding a `long` test go first (in collection order; a stable sort): pytest-xdist
    # hands files to its workers in this order (with `--no-loadscope-reorder`, as `make test`
    # runs it; by default it sends the files with the most tests first), and a long file
    # handed out last would keep one worker busy while the other has nothing left.
    long_files = {item.path for item in items if item.get_closest_marker("long") is not None}
    items.sort(key=lambda item: item.path not in long_files)
    if config.getoption("--db") != "postgresql":
        return
    # The PostgreSQL runs of the heaviest SQL tests are slow ones: `make test` keeps within its
    # 10 minutes, and `make test-slow` runs them on PostgreSQL (`-m heavy_sql`). A conftest's
    # hook runs before pytest's own `-m` selection, so the added mark counts there.
    for item in items:
        if item.get_closest_marker("heavy_sql") is not None:
            item.add_marker(pytest.mark.slow)
    kept = [item for item in items if item.get_closest_marker("no_sql") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("no_sql")])
        items[:] = kept


class _Checkouts:
    """Connections taken from any SQLAlchemy pool in this process, counted per thread."""

    by_thread: Counter[int] = Counter()


@event.listens_for(Pool, "checkout")
def _count_checkout(*_args: object) -> None:
    _Checkouts.by_thread[threading.get_ident()] += 1  # each thread counts under its own key


_SQL_WATCH = pytest.StashKey[tuple[set[int | None], dict[int, int]]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Watches a `no_sql` test from before its first fixture is set up."""
    if item.get_closest_marker("no_sql") is not None:
        older = {thread.ident for thread in threading.enumerate()} - {threading.get_ident()}
        item.stash[_SQL_WATCH] = (older, dict(_Checkouts.by_thread))
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """A `no_sql` test (left out of the PostgreSQL pass) fails if it, its fixtures, or a
    thread they start, used a database. Threads older than the test (a server an earlier test
    left running in this worker) are not the test's."""
    result = yield
    if (watch := item.stash.get(_SQL_WATCH, None)) is not None:
        older, before = watch
        now = dict(_Checkouts.by_thread)
        if any(t not in older and n > before.get(t, 0) for t, n in now.items()):
            pytest.fail(
                f"{item.nodeid} is marked no_sql, so the PostgreSQL pass leaves it out, "
                "but it opened a database connection: remove the mark"
            )
    return result


@pytest.fixture(scope="session", autouse=True)
def _postgres(request: pytest.FixtureRequest) -> Iterator[PostgresServer | None]:
    """On `--db postgresql`: one server for the run; session-wide objects get one database."""
    if request.config.getoption("--db") != "postgresql":
        yield None
        return
    with running_server() as server:
        before = os.environ.get(DATABASE_URL)
        os.environ[DATABASE_URL] = server.database()
        yield server
        if before is None:
            os.environ.pop(DATABASE_URL, None)
        else:
            os.environ[DATABASE_URL] = before


@pytest.fixture(scope="session", autouse=True)
def _encoder_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cache of exported encoders for the run, as a machine keeps one: every test builds
    on the default (int8) backend, and each encoder is exported once, by the first build that
    uses it, instead of once per test's data directory. Tests of the cache itself set their
    own."""
    cache = tmp_path_factory.mktemp("encoder-cache")
    before = os.environ.get(ENCODER_CACHE)
    os.environ[ENCODER_CACHE] = str(cache)
    yield cache
    if before is None:
        os.environ.pop(ENCODER_CACHE, None)
    else:
        os.environ[ENCODER_CACHE] = before


@pytest.fixture(autouse=True)
def _database_per_test(_postgres: PostgresServer | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's settings (and the CLI processes it starts) point at a fresh database, as a
    fresh data directory gives each test a fresh SQLite file."""
    from docsim.app.core.settings import get_service_settings
    from docsim.indexer.settings import get_settings
    from docsim.search.settings import get_query_settings

    if _postgres is not None:
        monkeypatch.setenv(DATABASE_URL, _postgres.database())
    get_settings.cache_clear()  # the CLI and the service read their settings once a process
    get_query_settings.cache_clear()
    get_service_settings.cache_clear()


@pytest.fixture(scope="session")
def published_copies(
    tmp_path_factory: pytest.TempPathFactory, _postgres: PostgresServer | None
) -> PublishedCopies:
    """Published versions built once per session and copied into a test's data directory."""
    from tests.utils.indexes import PublishedCopies

    return PublishedCopies(tmp_path_factory.mktemp("published"), _postgres)


@pytest.fixture(autouse=True)
def _root_logging() -> Iterator[None]:
    """Takes docsim's stderr handler off the root logger after each test: a command run
    in-process (Typer's `CliRunner`) installs it, and it would outlive its test and print the
    records of threads still running (a purge, a job) into the test run's output. pytest's own
    capture handlers come and go with each phase and are left alone."""
    from docsim.indexer.logs import StderrHandler

    root = logging.getLogger()
    level = root.level
    yield
    for handler in list(root.handlers):
        if isinstance(handler, StderrHandler):
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture()
def on_postgres(_postgres: PostgresServer | None) -> bool:
    return _postgres is not None


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.utils.tiny_models import write_tiny_encoder

    return write_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))


@pytest.fixture(scope="session")
def _tiny_encoder(tiny_encoder_dir: Path) -> TransformerEncoder:
    from docsim.models.encoders.loading import load_encoder

    return load_encoder(tiny_encoder_dir, precision="fp32")  # type: ignore[return-value]


@pytest.fixture()
def tiny_encoder(_tiny_encoder: TransformerEncoder) -> TransformerEncoder:
    return deepcopy(_tiny_encoder)


@pytest.fixture(scope="session")
def minilm() -> TransformerEncoder:
    from docsim.models.encoders.loading import load_encoder

    return load_encoder("minilm", precision="fp32")  # type: ignore[return-value]


@pytest.fixture(scope="session")
def splitter() -> SentenceSplitter:
    from docsim.indexer.text.sentences import load_splitter

    return load_splitter()


@pytest.fixture(scope="session")
def sample_corpus() -> Path:
    from docsim.indexer.text.corpus import SAMPLE_CORPUS

    return SAMPLE_CORPUS


@pytest.fixture()
def settings(tmp_path: Path) -> QuerySettings:
    """The indexer's settings with the search group (builds and searches both take them)."""
    from docsim.search.settings import QuerySettings

    return QuerySettings(data_dir=tmp_path / "data")


@pytest.fixture()
def engine(settings: QuerySettings) -> Iterator[Engine]:
    from docsim.indexer.store.db import make_engine, upgrade

    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    yield engine
    engine.dispose()
