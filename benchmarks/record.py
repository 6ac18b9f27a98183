"""The suite's one result shape. Every benchmark saves its figures with `save`, which wraps them
in a record that says what produced them:

    {"schema": 1, "benchmark": NAME, "command": "python -m benchmarks NAME ARGS",
     "commit": SHA or null, "machine": {"cpu", "cores", "memory_gib", "gpu"} or null,
     "figures": what the benchmark measured, in its own layout}

`figures` reads a record's figures back. Paths outside the repository are recorded as `<path>`
(no folder of one machine lands in the repository); records saved before the shape existed were
wrapped as they were, with the command and machine they named, if any
(`tests/test_benchmarks.py` checks every file under `results/`).
"""

from __future__ import annotations

import json
import os
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


def recorded_argument(argument: str) -> str:
    """`argument` as the record shows it: a path outside the repository becomes `<path>`,
    one inside it is relative to the repository's root."""
    if not argument.startswith(("/", "~")):
        return argument
    path = Path(argument).expanduser().resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else "<path>"


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
        "figures": figures,
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
    return found


def figures(path: Path) -> Any:
    """The figures of the record at `path`."""
    return json.loads(path.read_text(encoding="utf-8"))["figures"]
