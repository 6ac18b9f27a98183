"""`docsim serve`: what it does before uvicorn takes over."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_sql

_SERVE = """
import gc, sys
import uvicorn
from docsim.app import cli

def run(app, **options):  # uvicorn's place: report instead of serving
    frozen = gc.get_freeze_count()
    class Node: pass
    node = Node(); node.self = node; del node  # a cycle made after the freeze
    print(frozen, app.state.collections is None, gc.collect())  # nothing started

uvicorn.run = run
sys.argv = ["docsim", "serve", "--data-dir", sys.argv[1]]
cli.main()
"""


def test_serve_freezes_its_imports_before_any_version_loads(tmp_path: Path) -> None:
    """The objects of what `serve` imported leave the collector's walk (`gc.freeze`), before
    uvicorn starts the app (no version is loaded yet); a cycle made afterwards is still
    collected."""
    (tmp_path / "data").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _SERVE, str(tmp_path / "data")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    frozen, not_loaded, collected = done.stdout.split()
    assert int(frozen) > 50_000  # FastAPI, pydantic, SQLAlchemy, torch, the app's modules
    assert not_loaded == "True"
    assert int(collected) >= 1  # the node, found unreachable


def test_serve_refuses_a_data_directory_that_does_not_exist(tmp_path: Path) -> None:
    """A mistyped --data-dir once made the folder and an empty database, then answered 503
    for ever; it exits 2 naming the path, as `docsim info` does, and creates nothing."""
    missing = tmp_path / "no-such-dir"
    done = subprocess.run(
        [sys.executable, "-c", _SERVE, str(missing)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "does not exist" in done.stderr and "no-such-dir" in done.stderr
    assert not missing.exists()
