"""The benchmarks as a suite: the runner lists every script with its question, runs one by
name, and the README's table names every benchmark (and no other)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.utils.scripts import ROOT

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


def listed() -> dict[str, str]:
    found = subprocess.run(
        [sys.executable, "-m", "benchmarks"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return dict(line.split(None, 1) for line in found.stdout.splitlines())


def test_the_runner_lists_every_script_with_its_question() -> None:
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - {"served", "__main__"}
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
