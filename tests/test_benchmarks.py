"""The benchmarks as a suite: the runner lists every script with its question, runs one by
name, the README's table names every benchmark (and no other), and every result has the one
shape (`benchmarks/record.py`)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.utils.scripts import ROOT

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def listed() -> dict[str, str]:
    found = subprocess.run(
        [sys.executable, "-m", "benchmarks"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return dict(line.split(None, 1) for line in found.stdout.splitlines())


def test_the_runner_lists_every_script_with_its_question() -> None:
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - {
        "served",
        "record",
        "ranking_fusion",
        "synthetic_scale",
        "__main__",
    }
    found = listed()
    assert set(found) == scripts
    assert all(len(question) > 20 for question in found.values()), found


def test_the_readme_names_every_benchmark() -> None:
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    in_table = set(re.findall(r"^\| `([a-z_0-9]+)` \|", readme, flags=re.M))
    assert in_table == set(listed())


def test_the_runner_runs_a_benchmark_by_name_and_refuses_an_unknown_one() -> None:
    run = [sys.executable, "-m", "benchmarks"]
    helped = subprocess.run([*run, "split_scaling", "--help"], cwd=ROOT, capture_output=True)
    assert helped.returncode == 0 and b"usage" in helped.stdout.lower()
    unknown = subprocess.run([*run, "no_such_benchmark"], cwd=ROOT, capture_output=True)
    assert unknown.returncode == 2 and b"no benchmark" in unknown.stderr


def record_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record", ROOT / "benchmarks" / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_result_has_the_one_shape() -> None:
    record = record_module()
    known = set(listed()) | record.FINISHED
    results = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    assert len(results) > 30
    wrong = {
        path.name: found
        for path in results
        if (found := record.problems(json.loads(path.read_text(encoding="utf-8")), known))
    }
    assert wrong == {}


def test_a_saved_record_has_the_shape_and_names_no_outside_path(tmp_path: Path) -> None:
    record = record_module()
    out = tmp_path / "figures.json"
    argv = [str(ROOT / "benchmarks" / "query_latency.py"), "--data-dir", str(tmp_path)]
    saved = record.wrap({"p50_ms": 12.5}, argv)
    out.write_text(json.dumps(saved), encoding="utf-8")
    assert record.problems(json.loads(out.read_text()), {"query_latency"}) == []
    assert record.figures(out) == {"p50_ms": 12.5}
    assert saved["command"] == "python -m benchmarks query_latency --data-dir '<path>'"
    assert saved["machine"]["cores"] >= 1


def test_the_shape_check_finds_a_record_out_of_shape() -> None:
    record = record_module()
    assert record.problems({"p50_ms": 12.5}, {"query_latency"})  # figures without a record
    renamed = record.wrap({}, ["benchmarks/no_such.py"])
    assert record.problems(renamed, {"query_latency"}) == [
        "benchmark 'no_such' is not one of the suite's"
    ]


def test_no_record_names_a_folder_of_a_machine(tmp_path: Path) -> None:
    """Absolute paths become relative or `<path>` wherever they are: in a `name=path`
    argument, inside a figure's text, in a key."""
    record = record_module()
    argv = ["benchmarks/ranking_cv.py", "--set", f"aila={tmp_path}/aila", f"--out={tmp_path}"]
    figures = {"runs": [f"{tmp_path}/run.json fused"], f"{tmp_path}/k": str(ROOT / "x.json")}
    saved = record.wrap(figures, argv)
    assert saved["command"] == "python -m benchmarks ranking_cv --set 'aila=<path>' '--out=<path>'"
    assert saved["figures"] == {"runs": ["<path> fused"], "<path>": "x.json"}
    assert record.problems(saved, {"ranking_cv"}) == []
    assert record.problems(
        record.wrap({"dir": f"{tmp_path}/a"}, argv) | {"figures": {"dir": f"{tmp_path}/a"}},
        {"ranking_cv"},
    ) == [f"names folders of a machine: ['{tmp_path}/a']"]
