"""The code the documentation names exists: every repository path in backticks
(`search/lexical/bm25.py`, `tests/app/test_fuzz.py`) is a file or folder here, and every
module in backticks (`search.lexical.bm25`, `docsim.models.kernels.scoring.sdr_scores`) is a
module here, and a name after it is defined there. A move that leaves a page behind fails."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.test_layers import defined_names

pytestmark = pytest.mark.no_sql

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("app", "search", "indexer", "models", "docsim", "benchmarks", "scripts", "tests",
           "migrations", "deploy", "docs")  # fmt: skip
PATH = re.compile(r"`((?:" + "|".join(FOLDERS) + r")/[\w./-]+)`")
MODULE = re.compile(r"`((?:docsim\.)?(?:app|search|indexer|models)(?:\.\w+)+)`")


def pages() -> list[Path]:
    return sorted(
        [*(ROOT / "docs").glob("*.md"), ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
    )


def top_level_names(path: Path) -> set[str]:
    """What a module defines (`tests.test_layers.defined_names`) or imports at its top level."""
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    return defined_names(path) | imported


def module_problem(dotted: str) -> str | None:
    """None when `dotted` is a module of ours, or a module and a name it defines (and what
    follows that name); else what is wrong."""
    parts = dotted.removeprefix("docsim.").split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT / Path(*parts[:cut])
        path = base / "__init__.py" if (base / "__init__.py").is_file() else base.with_suffix(".py")
        if path.is_file():
            if cut == len(parts) or parts[cut] in top_level_names(path):
                return None
            return f"{parts[cut]!r} is not defined in {path.relative_to(ROOT)}"
    return "no such module"


def references() -> list[tuple[str, str, str | None]]:
    """`(page, reference, problem)` for every path and module the pages name."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        name = str(page.relative_to(ROOT))
        for match in PATH.finditer(text):
            ref = match.group(1).rstrip(".")
            if "*" not in ref and "<" not in ref:
                found.append((name, ref, None if (ROOT / ref).exists() else "no such path"))
        for match in MODULE.finditer(text):
            found.append((name, match.group(1), module_problem(match.group(1))))
    return found


def test_every_path_and_module_the_docs_name_exists() -> None:
    found = references()
    assert len(found) > 100  # the pages do name code
    assert [f"{page}: `{ref}`: {why}" for page, ref, why in found if why] == []


def test_a_moved_module_is_found(tmp_path: Path) -> None:
    """The check can fail: a path, a module and a name that are not there."""
    assert module_problem("search.lexical.bm25") is None
    assert module_problem("docsim.search.lexical.bm25.Bm25Index") is None
    assert module_problem("search.lexical.bm26") == (
        "'bm26' is not defined in search/lexical/__init__.py"
    )
    assert module_problem("search.nowhere.bm25") == "'nowhere' is not defined in search/__init__.py"
    assert module_problem("search.lexical.bm25.NoSuchIndex") == (
        "'NoSuchIndex' is not defined in search/lexical/bm25.py"
    )
    assert not (ROOT / "search/lexical/bm26.py").exists()
    page = tmp_path / "page.md"
    page.write_text("See `search/lexical/bm26.py` and `search/lexical/bm25.py`.")
    assert [m.group(1) for m in PATH.finditer(page.read_text())] == [
        "search/lexical/bm26.py",
        "search/lexical/bm25.py",
    ]
