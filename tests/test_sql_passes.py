"""`make test` runs the suite on SQLite, then on PostgreSQL only the tests that can reach SQL:
the PostgreSQL pass leaves out `no_sql` tests, and a `no_sql` test that opens a database
connection fails, so a test cannot be left out of the PostgreSQL pass by mistake."""

from __future__ import annotations

import threading

import pytest

CONFTEST = 'pytest_plugins = ["tests.conftest"]  # the suite\'s own hooks and fixtures\n'

MIXED_MODULE = """
import pytest
from sqlalchemy import create_engine, text

pytestmark = pytest.mark.no_sql


def test_opens_a_database(tmp_path):
    with create_engine(f"sqlite:///{tmp_path / 'x.sqlite3'}").connect() as connection:
        connection.execute(text("select 1"))


def test_computes():
    assert sum(range(4)) == 6
"""


def test_a_no_sql_test_that_opens_a_database_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_mixed=MIXED_MODULE)
    result = pytester.runpytest_inprocess("--db", "sqlite", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*test_opens_a_database is marked no_sql*remove the mark*"])


def test_the_postgresql_pass_leaves_out_no_sql_tests(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    (pytester.path / "tests" / "models").mkdir(parents=True)
    (pytester.path / "tests" / "models" / "test_pure.py").write_text(
        "def test_pure():\n    assert True\n"
    )
    pytester.makepyfile(test_mixed=MIXED_MODULE, test_sql="def test_sql():\n    assert True\n")
    collected = pytester.runpytest_inprocess(
        "--db", "postgresql", "--collect-only", "-q", "-p", "no:cacheprovider"
    )
    collected.stdout.fnmatch_lines(
        ["test_sql.py::test_sql", "*1/4 tests collected (3 deselected)*"]
    )
    assert "test_pure" not in collected.stdout.str()
    on_sqlite = pytester.runpytest_inprocess("--db", "sqlite", "--collect-only", "-q")
    on_sqlite.stdout.fnmatch_lines(["*4 tests collected*"])


HEAVY_MODULE = """
import pytest


@pytest.mark.heavy_sql
def test_heavy():
    assert True


def test_light():
    assert True
"""


def test_the_postgresql_runs_of_heavy_sql_tests_are_slow(pytester: pytest.Pytester) -> None:
    """`make test`'s own selection (`-m 'not slow'`) keeps a heavy_sql test on SQLite and
    leaves it out on PostgreSQL; `-m heavy_sql` (`make test-slow`) runs it there."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_heavy=HEAVY_MODULE)

    def collected(db: str, marks: str) -> str:
        args = ("--db", db, "-m", marks, "--collect-only", "-q", "-p", "no:cacheprovider")
        return pytester.runpytest_inprocess(*args).stdout.str()

    assert "test_heavy.py::test_heavy" in collected("sqlite", "not slow")
    on_postgresql = collected("postgresql", "not slow")
    assert "test_heavy.py::test_heavy" not in on_postgresql
    assert "test_heavy.py::test_light" in on_postgresql
    slow = collected("postgresql", "heavy_sql")
    assert "test_heavy.py::test_heavy" in slow and "test_light" not in slow


THREADED_MODULE = """
import threading
import time

import pytest
from sqlalchemy import create_engine, text

pytestmark = pytest.mark.no_sql
STOP = threading.Event()


def poll(url, seconds=3.0):
    engine = create_engine(url)
    ends = time.monotonic() + seconds  # never past the run: a thread left polling at exit
    while not STOP.is_set() and time.monotonic() < ends:  # races the interpreter's atexit
        with engine.connect() as connection:
            connection.execute(text("select 1"))
        time.sleep(0.01)
    engine.dispose()


@pytest.mark.no_sql
def test_a_thread_of_this_test_opens_a_database(tmp_path):
    thread = threading.Thread(target=poll, args=(f"sqlite:///{tmp_path / 'y.sqlite3'}",))
    thread.start()
    time.sleep(0.1)
    STOP.set()
    thread.join()


def test_starts_a_poller_that_outlives_it(tmp_path_factory):
    STOP.clear()
    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'z.sqlite3'}"
    threading.Thread(target=poll, args=(url,), daemon=True, name="outliving-poller").start()
    time.sleep(0.05)


def test_computes_while_an_older_thread_polls():
    time.sleep(0.1)
    assert sum(range(4)) == 6
"""


def test_a_thread_the_test_starts_counts_and_an_older_one_does_not(
    pytester: pytest.Pytester,
) -> None:
    """The first test's own thread uses a database: it fails. The second leaves a poller
    running (its own connections count against it: it fails too), and the third, which only
    computes while that older thread polls, passes."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_threads=THREADED_MODULE)
    result = pytester.runpytest_inprocess("--db", "sqlite", "-p", "no:cacheprovider")
    for thread in threading.enumerate():  # the poller ends on its own, within seconds
        if thread.name == "outliving-poller":
            thread.join(timeout=30)
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*test_a_thread_of_this_test_opens_a_database is marked no_sql*",
            "*test_starts_a_poller_that_outlives_it is marked no_sql*",
        ]
    )


FIXTURE_MODULE = """
import pytest
from sqlalchemy import create_engine, text

pytestmark = pytest.mark.no_sql


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'w.sqlite3'}"
    with create_engine(url).connect() as connection:
        connection.execute(text("select 1"))
    return url


def test_uses_a_module_fixture_that_opened_a_database(database):
    assert database
"""


def test_a_fixture_that_opens_a_database_counts_against_a_no_sql_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_fixture=FIXTURE_MODULE)
    result = pytester.runpytest_inprocess("--db", "sqlite", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_uses_a_module_fixture_that_opened* is marked no_sql*"])
