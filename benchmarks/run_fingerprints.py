"""Fingerprints of every method's TREC run on a judged set, so that a refactoring can show it
ranks exactly as before: `docsim evaluate` (the API's code path) writes one run per method,
and each run's SHA-256 is recorded; `--against` compares with an earlier record.

    python benchmarks/run_fingerprints.py --data-dir DIR [--collection NAME] \\
        --queries Q --qrels R [--pools P] [--query-field F] [--exclude-own RE] --out before.json
    ... the change ...
    python benchmarks/run_fingerprints.py ... --out after.json --against before.json
    python benchmarks/run_fingerprints.py ... --out after.json \\
        --against benchmarks/results/run_fingerprints.json --against-set aila

Exits 1 when a method's run differs from the record it is compared against.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from record import figures, save

logger = logging.getLogger("benchmarks.run_fingerprints")
METHODS = [
    "sdr", "sdr-raw", "sdr-window", "document", "document-prf", "maxsim", "best-sentence", "ot",
    "bm25", "bm25-reduced", "bm25-rm3", "bm25-paragraph", "bm25-shingles", "hybrid", "fused",
]  # fmt: skip


def evaluate_command(args: argparse.Namespace, runs: Path, methods: list[str]) -> list[str]:
    docsim = str(Path(sys.executable).parent / "docsim")
    command = [docsim]
    if args.collection:
        command += ["--collection", args.collection]
    command += ["evaluate", "--data-dir", str(args.data_dir), "--queries", str(args.queries)]
    command += ["--qrels", str(args.qrels), "--run-out", str(runs / "run.txt")]
    command += ["--out", str(runs / "evaluation.json"), "--query-field", args.query_field]
    if args.pools:
        command += ["--pools", str(args.pools)]
    if args.exclude_own:
        command += ["--exclude-own", args.exclude_own]
    for method in methods:
        command += ["--method", method]
    return command


def fingerprints(args: argparse.Namespace, methods: list[str]) -> dict[str, str]:
    """`method -> SHA-256 of its TREC run`, from one `docsim evaluate` of every method."""
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder)
        subprocess.run(evaluate_command(args, runs, methods), check=True)
        return {
            m: hashlib.sha256((runs / f"run.{m}.txt").read_bytes()).hexdigest() for m in methods
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--collection", default=None)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--qrels", type=Path, required=True)
    parser.add_argument("--pools", type=Path, default=None)
    parser.add_argument("--query-field", default="text")
    parser.add_argument("--exclude-own", default=None, help="as `docsim evaluate`'s (IL-PCR)")
    parser.add_argument("--method", action="append", help="default: every method")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--against", type=Path, default=None, help="a record to compare with")
    parser.add_argument(
        "--against-set", default=None, help="the set of `--against` to compare with (aila, ...)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    found = fingerprints(args, args.method or METHODS)
    save(args.out, found)
    if args.against is None:
        print(json.dumps(found, indent=1))
        return
    before = figures(args.against)
    if args.against_set is not None:
        before = before[args.against_set]
    changed = sorted(m for m in found if before.get(m) != found[m])
    for method in found:
        print(f"{method:15} {'CHANGED' if method in changed else 'identical'}")
    sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
