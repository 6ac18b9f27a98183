"""The layers point one way (app -> indexer -> models) and only one module imports faiss."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imports(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def test_models_import_no_upper_layer_sql_or_http() -> None:
    for path, names in imports("models").items():
        assert not names & {"indexer", "app", "sqlalchemy", "fastapi", "alembic", "faiss"}, path


def test_indexer_does_not_import_app() -> None:
    for path, names in imports("indexer").items():
        assert "app" not in names, path


def test_only_vector_index_imports_faiss() -> None:
    users = [
        p
        for pkg in ("models", "indexer", "app", "migrations")
        for p, n in imports(pkg).items()
        if "faiss" in n
    ]
    assert users == ["indexer/vector_index.py"]
