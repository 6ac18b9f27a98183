"""Compare two `docsim evaluate` reports query by query (e.g. before and after training).

    python benchmarks/compare_evaluations.py BEFORE.json AFTER.json [--method sdr]
        [--before-method bm25 --after-method fused] [--metric MAP --metric NDCG@20] [--out FILE]

`--before-method` / `--after-method` compare two different methods (by default both are
`--method`), e.g. a method against plain BM25 evaluated under other search settings.

Prints the means of both, the mean difference and the paired t-test and Wilcoxon p-values on
each metric (the queries both reports hold), and saves them as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from docsim.search.evaluation.metrics import paired_tests


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--method", default="sdr")
    parser.add_argument("--before-method", default=None)
    parser.add_argument("--after-method", default=None)
    parser.add_argument("--metric", action="append", default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    reports = [json.loads(p.read_text()) for p in (args.before, args.after)]
    methods = [args.before_method or args.method, args.after_method or args.method]
    found = [r["methods"][m] for r, m in zip(reports, methods, strict=True)]
    metrics = args.metric or sorted(found[0]["mean"])
    result = {
        "before": f"{args.before} {methods[0]}",
        "after": f"{args.after} {methods[1]}",
    }
    for metric in metrics:
        pair = {"before": found[0]["per_query"], "after": found[1]["per_query"]}
        test = paired_tests(pair, "before", metric)
        result[metric] = {
            "before": found[0]["mean"][metric],
            "after": found[1]["mean"][metric],
            **test["after"],
        }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
