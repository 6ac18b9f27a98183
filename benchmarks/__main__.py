"""The benchmarks' one runner: `python -m benchmarks` lists them, each with its question (the
first paragraph of its docstring); `python -m benchmarks NAME [ARGS...]` runs `NAME.py` with
ARGS, as `python benchmarks/NAME.py ARGS` would (`make bench NAME=... ARGS="..."`).

Every benchmark prints its figures and saves them as JSON under `benchmarks/results/`, with the
command that produced them; README.md says what each one asks and where its latest figures are.
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HELPERS = {
    "served",
    "record",
    "ranking_fusion",
    "synthetic_scale",
    "__main__",
}  # modules the benchmarks share, not benchmarks themselves


def benchmarks() -> dict[str, str]:
    """`name -> question` of every benchmark script, by name."""
    found = {}
    for path in sorted(HERE.glob("*.py")):
        if path.stem in HELPERS or path.stem.startswith("_"):
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        found[path.stem] = " ".join(doc.split("\n\n")[0].split())
    return found


def main(argv: list[str]) -> int:
    known = benchmarks()
    if not argv or argv[0] in ("-h", "--help", "--list"):
        width = max(len(name) for name in known)
        for name, question in known.items():
            print(f"{name:{width}}  {question}")
        return 0
    name, args = argv[0].removesuffix(".py"), argv[1:]
    if name not in known:
        print(f"no benchmark {name!r}; `python -m benchmarks` lists them", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))  # the scripts import their helpers (`served`) by name
    sys.argv = [str(HERE / f"{name}.py"), *args]
    runpy.run_path(sys.argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
