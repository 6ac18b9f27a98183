"""The house's size limits (`STYLE.md`), held by the suite: a module of the product, of the
benchmarks or of the scripts at most 400 lines, a class 200, a function 80, and at most 8
positional parameters to a function (command-line commands aside: Typer takes each option as
one). A file that outgrows them is split, never given a higher limit."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("app", "search", "indexer", "models", "docsim")
TOOLS = ("benchmarks", "scripts")  # not in the package, held to the same limits
MODULE_LINES, CLASS_LINES, FUNCTION_LINES, POSITIONAL = 400, 200, 80, 8


@dataclass(frozen=True)
class Oversize:
    where: str  # path:line name
    measure: str
    value: int
    limit: int

    def __str__(self) -> str:
        return f"{self.where}: {self.value} {self.measure} (at most {self.limit})"


def product_files(root: Path = ROOT) -> list[Path]:
    """The product's Python files, each once (`docsim/` links to the other folders)."""
    files = []
    for package in PRODUCT:
        folder = root / package
        if folder.is_dir() and not folder.is_symlink():
            files += [p for p in folder.rglob("*.py") if not p.is_symlink()]
    return sorted(files)


def tool_files(root: Path = ROOT) -> list[Path]:
    """The Python files of the benchmarks and the scripts."""
    return sorted(p for folder in TOOLS for p in (root / folder).rglob("*.py"))


def is_command(node: ast.FunctionDef | ast.AsyncFunctionDef, path: Path) -> bool:
    """A Typer command: a function of a `cli` module or package, decorated by `*.command`."""
    in_cli = "cli" in path.parts or path.stem == "cli"
    decorated = any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "command"
        for d in node.decorator_list
    )
    return in_cli and decorated


def oversizes(path: Path, source: str) -> list[Oversize]:
    """Every limit `source` (the text of `path`) passes."""
    found = []
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    lines = len(source.splitlines())
    if lines > MODULE_LINES:
        found.append(Oversize(name, "lines in the module", lines, MODULE_LINES))
    for node in ast.walk(ast.parse(source)):
        where = f"{name}:{getattr(node, 'lineno', 0)} {getattr(node, 'name', '')}"
        if isinstance(node, ast.ClassDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > CLASS_LINES:
                found.append(Oversize(where, "lines in the class", length, CLASS_LINES))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES:
                found.append(Oversize(where, "lines in the function", length, FUNCTION_LINES))
            positional = [
                a.arg
                for a in [*node.args.posonlyargs, *node.args.args]
                if a.arg not in ("self", "cls")
            ]
            if len(positional) > POSITIONAL and not is_command(node, path):
                found.append(Oversize(where, "positional parameters", len(positional), POSITIONAL))
    return found


def test_the_product_keeps_its_size_limits() -> None:
    files = product_files()
    assert len(files) > 100  # the walk found the product
    found = [str(o) for path in files for o in oversizes(path, path.read_text(encoding="utf-8"))]
    assert not found, "split these:\n" + "\n".join(found)


def test_the_benchmarks_and_scripts_keep_the_size_limits() -> None:
    files = tool_files()
    assert {p.relative_to(ROOT).parts[0] for p in files} == set(TOOLS)  # the walk found both
    found = [str(o) for path in files for o in oversizes(path, path.read_text(encoding="utf-8"))]
    assert not found, "split these:\n" + "\n".join(found)


def test_the_guard_sees_each_kind_of_violation(tmp_path: Path) -> None:
    """A deliberate violation of each limit is caught; the same code within them is not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES))
    long_function = f"def f():\n{body}\n"
    methods = "\n".join(f"    def m{i}(self):\n        return {i}\n" for i in range(70))
    long_class = f"class C:\n{methods}"
    many = ", ".join(f"a{i}" for i in range(POSITIONAL + 1))
    wide = f"def g({many}):\n    return a0\n"
    keyword_only = f"def h(*, {many}):\n    return a0\n"
    module = "\n" * MODULE_LINES + "x = 1\n"
    kinds = {
        long_function: "lines in the function",
        long_class: "lines in the class",
        wide: "positional parameters",
        module: "lines in the module",
    }
    for source, measure in kinds.items():
        assert [o.measure for o in oversizes(tmp_path / "m.py", source)] == [measure]
    assert oversizes(tmp_path / "m.py", keyword_only) == []
    assert oversizes(tmp_path / "m.py", "def f():\n    return 1\n") == []
    command = f"@app.command()\n{wide}"
    assert oversizes(tmp_path / "cli" / "m.py", command) == []  # Typer's options
    assert [o.measure for o in oversizes(tmp_path / "m.py", command)] == ["positional parameters"]
