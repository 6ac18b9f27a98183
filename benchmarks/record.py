"""The suite's one result shape. Every benchmark saves its figures with `save`, which wraps them
in a record that says what produced them:

    {"schema": 1, "benchmark": NAME, "command": "python -m benchmarks NAME ARGS",
     "commit": SHA or null, "machine": {"cpu", "cores", "memory_gib", "gpu"} or null,
     "figures": what the benchmark measured, in its own layout}

`figures` reads a record's figures back. No folder of one machine lands in the repository: an
absolute path anywhere in a record, its command or its figures (`--set aila=/data/aila`, a
path inside a figure's text), is written relative to the repository (`../shared/data/...`
beside it) or as `<path>`; records saved before the shape existed were
wrapped as they were, with the command and machine they named, if any
(`tests/test_benchmarks.py` checks every file under `results/`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

SCHEMA = 1
# records of finished experiments whose scripts left the tree (their figures stay, and in
# docs/evaluation.md)
FINISHED = {"facts_detector"}
KEYS = ("schema", "benchmark", "command", "commit", "machine", "figures")
ROOT = Path(__file__).resolve().parents[1]


# an absolute path inside any text: `/` (or `~/`) and a folder name, where a word can start
ABSOLUTE_PATH = re.compile(r"""(?<![^\s'"=(,\[])(?:~|/(?=[\w.~-]+/))[^\s'",)\]]*""")


def recorded_path(path_text: str) -> str:
    """An absolute path as a record shows it: relative to the repository's root when inside
    it or beside it (`../shared/...`), else `<path>`."""
    path = Path(path_text).expanduser().resolve()
    if path.is_relative_to(ROOT):
        return str(path.relative_to(ROOT))
    if path.is_relative_to(ROOT.parent) and ROOT.parent != Path(ROOT.anchor):
        return str(Path("..") / path.relative_to(ROOT.parent))
    return "<path>"


def recorded_argument(argument: str) -> str:
    """`argument` (or any text) as the record shows it: every absolute path in it as
    `recorded_path` writes it."""
    return ABSOLUTE_PATH.sub(lambda found: recorded_path(found.group()), argument)


def without_paths(value: Any) -> Any:
    """`value` (JSON: figures) with `recorded_argument` applied to every string in it, keys
    included."""
    if isinstance(value, str):
        return recorded_argument(value)
    if isinstance(value, dict):
        return {without_paths(key): without_paths(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_paths(item) for item in value]
    return value


def command(argv: list[str] | None = None) -> str:
    """The command that runs this benchmark with this process's arguments."""
    argv = sys.argv if argv is None else argv
    shown = []
    for argument in argv[1:]:
        flag, equals, value = argument.partition("=")
        if equals and flag.startswith("--"):
            shown.append(f"{flag}={recorded_argument(value)}")
        else:
            shown.append(recorded_argument(argument))
    return shlex.join(["python", "-m", "benchmarks", Path(argv[0]).stem, *shown])


def commit() -> str | None:
    """The repository's commit, with `+changes` when the tree differs from it; None outside
    a git checkout."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{sha}+changes" if dirty else sha


# the commit the run started from (a record is saved at its end, when the tree may have moved)
STARTED_COMMIT = commit()


def machine() -> dict[str, Any]:
    """The CPU's model, its cores, the memory, and the GPU when torch is loaded and sees one."""
    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpu = None
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(0)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(memory, 1), "gpu": gpu}


def wrap(figures: Any, argv: list[str] | None = None) -> dict[str, Any]:
    """`figures` as a record of this run."""
    argv = sys.argv if argv is None else argv
    return {
        "schema": SCHEMA,
        "benchmark": Path(argv[0]).stem,
        "command": command(argv),
        "commit": STARTED_COMMIT,
        "machine": machine(),
        "figures": without_paths(figures),
    }


def save(out: Path, figures: Any) -> dict[str, Any]:
    """Write `figures` to `out` as a record of this run; returns the record."""
    record = wrap(figures)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def problems(record: Any, known: set[str]) -> list[str]:
    """What makes `record` not a result of the suite (`known`: the benchmarks' names)."""
    if not isinstance(record, dict):
        return ["not a JSON object"]
    found = []
    if tuple(record) != KEYS:
        found.append(f"keys {list(record)}, expected {list(KEYS)}")
    if record.get("schema") != SCHEMA:
        found.append(f"schema {record.get('schema')!r}, expected {SCHEMA}")
    if record.get("benchmark") not in known:
        found.append(f"benchmark {record.get('benchmark')!r} is not one of the suite's")
    if not isinstance(record.get("command"), str | None):
        found.append("command is not a string or null")
    if not isinstance(record.get("machine"), dict | None):
        found.append("machine is not an object or null")
    paths = sorted({p.group() for p in ABSOLUTE_PATH.finditer(json.dumps(record.get("figures")))})
    paths += [p.group() for p in ABSOLUTE_PATH.finditer(str(record.get("command")))]
    if paths:
        found.append(f"names folders of a machine: {paths[:3]}")
    return found


def figures(path: Path) -> Any:
    """The figures of the record at `path`."""
    return json.loads(path.read_text(encoding="utf-8"))["figures"]
