"""The layers point one way (app -> indexer -> models) and only one module imports faiss."""

from __future__ import annotations

import ast
import subprocess
import sys
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


def module_graph(packages: tuple[str, ...] = ("models", "indexer", "app")) -> dict[str, set[str]]:
    """`module -> modules of ours it imports`, counting imports inside functions too (a lazy
    import that breaks a circle at run time still ties the modules together)."""
    modules = {}
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in graph[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return circles


def test_no_module_imports_itself_through_others() -> None:
    assert import_circles(module_graph()) == []


def test_the_circle_check_finds_a_circle() -> None:
    """The check above can fail: a reversed import (registry -> loading) makes a circle."""
    graph = module_graph()
    graph["models.registry"] = graph["models.registry"] | {"models.loading"}
    circles = import_circles(graph)
    assert any({"models.loading", "models.registry"} <= set(c) for c in circles), circles


def test_loading_an_encoder_does_not_import_training() -> None:
    code = (
        "import sys, models.loading; "
        "assert 'models.training' not in sys.modules, 'models.training was imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
