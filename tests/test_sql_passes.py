"""`make test` runs the suite on SQLite, then on PostgreSQL only the tests that can reach SQL:
the PostgreSQL pass leaves out `no_sql` tests, and a `no_sql` test that opens a database
connection fails, so a test cannot be left out of the PostgreSQL pass by mistake."""

from __future__ import annotations

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
