"""Candidate mode against exhaustive scoring on a judged set, through `docsim evaluate`.

    python benchmarks/candidate_fidelity.py --data-dir DIR --queries FILE --qrels FILE
        [--query-field facet_text] [--min-rel 2] [--method sdr --method fused]
        [--out benchmarks/results/candidate_fidelity_NAME.json]

`docsim evaluate` runs three times over the whole collection (no pools), as three services
would rank: `exhaustive` (every document scored; the reference), and candidate mode
(`DOCSIM_SEARCH__EXHAUSTIVE__MAX_SENTENCES=0`) with each candidate generator: `centroids`
(PLAID-style cells and residual codes), `compressed` (the compressed level's approximate
`maxsim` over every document; `auto`'s choice up to a million sentences) and `neighbours`
(the nearest sentences, paragraphs and documents, the generator before them). For each
method and generator: the metrics' means, the paired tests against exhaustive scoring, and
the top-10 overlap with exhaustive scoring's run, per query (mean and least). Candidate
mode also normalises SDR over a fixed sample of documents, not the whole collection: the
figures include that.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from record import save

from docsim.search.evaluation.metrics import paired_tests
from docsim.search.evaluation.report import run_file

logger = logging.getLogger("benchmarks.candidate_fidelity")
CONFIGURATIONS = {
    "exhaustive": {},
    "centroids": {
        "DOCSIM_SEARCH__EXHAUSTIVE__MAX_SENTENCES": "0",
        "DOCSIM_SEARCH__CANDIDATES__GENERATOR": "centroids",
    },
    "compressed": {
        "DOCSIM_SEARCH__EXHAUSTIVE__MAX_SENTENCES": "0",
        "DOCSIM_SEARCH__CANDIDATES__GENERATOR": "compressed",
    },
    "neighbours": {
        "DOCSIM_SEARCH__EXHAUSTIVE__MAX_SENTENCES": "0",
        "DOCSIM_SEARCH__CANDIDATES__GENERATOR": "neighbours",
    },
}


def evaluate(args: argparse.Namespace, name: str, work: Path) -> tuple[dict, float]:
    """`docsim evaluate` under configuration `name`: its report and its wall seconds."""
    out = work / f"{name}.json"
    command = [sys.executable, "-m", "docsim.indexer.cli", "evaluate", "--data-dir"]
    command += [str(args.data_dir), "--queries", str(args.queries), "--qrels", str(args.qrels)]
    command += ["--min-rel", str(args.min_rel), "--query-field", args.query_field]
    command += ["--out", str(out), "--run-out", str(work / f"{name}.run")]
    for method in args.method:
        command += ["--method", method]
    started = time.perf_counter()
    found = subprocess.run(
        command, env={**os.environ, **CONFIGURATIONS[name]}, capture_output=True, text=True
    )
    if found.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{found.stderr[-3000:]}")
    return json.loads(out.read_text()), time.perf_counter() - started


def top10(run_file: Path) -> dict[str, list[str]]:
    """Each query's first 10 documents of a TREC run file."""
    ranked: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for line in run_file.read_text().splitlines():
        qid, _, doc, rank, *_ = line.split()
        ranked[qid].append((int(rank), doc))
    return {qid: [doc for _, doc in sorted(rows)[:10]] for qid, rows in ranked.items()}


def run_files(work: Path, name: str, methods: list[str]) -> dict[str, Path]:
    """The run file `docsim evaluate --run-out` wrote for each method."""
    several = len(methods) > 1
    return {m: run_file(work / f"{name}.run", m, several=several) for m in methods}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--qrels", type=Path, required=True)
    parser.add_argument("--query-field", default="text")
    parser.add_argument("--min-rel", type=int, default=1)
    parser.add_argument("--method", action="append", default=None)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/candidate_fidelity.json")
    )
    args = parser.parse_args()
    args.method = args.method or ["sdr", "fused"]
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    result: dict = {"data_dir": str(args.data_dir), "queries": str(args.queries), "methods": {}}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        reports, seconds = {}, {}
        for name in CONFIGURATIONS:
            logger.info("docsim evaluate: %s", name)
            reports[name], seconds[name] = evaluate(args, name, work)
        result["evaluate_seconds"] = seconds
        for method in args.method:
            exact_top = top10(run_files(work, "exhaustive", args.method)[method])
            row: dict = {}
            for name, report in reports.items():
                row[name] = {"mean": report["methods"][method]["mean"]}
                if name == "exhaustive":
                    continue
                per_query = {n: r["methods"][method]["per_query"] for n, r in reports.items()}
                metrics = sorted(report["methods"][method]["mean"])
                row[name]["against_exhaustive"] = {
                    metric: paired_tests(
                        {"exhaustive": per_query["exhaustive"], name: per_query[name]},
                        "exhaustive",
                        metric,
                    )[name]
                    for metric in metrics
                    if metric in ("MAP", "NDCG@20", "NDCG@20%", "MRR", "R@100")
                }
                found_top = top10(run_files(work, name, args.method)[method])
                overlaps = [
                    len(set(exact_top[q]) & set(found_top.get(q, []))) / 10 for q in exact_top
                ]
                row[name]["top10_overlap"] = {
                    "mean": statistics.mean(overlaps),
                    "min": min(overlaps),
                    "queries": len(overlaps),
                }
            result["methods"][method] = row
            logger.info("%s: %s", method, json.dumps(row))
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
