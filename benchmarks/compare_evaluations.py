"""Compare two `docsim evaluate` reports query by query (e.g. before and after training).

    python benchmarks/compare_evaluations.py BEFORE.json AFTER.json [--method sdr]
        [--metric MAP --metric NDCG@20] [--out FILE]

Prints the means of both, the mean difference and the paired t-test and Wilcoxon p-values on
each metric (the queries both reports hold), and saves them as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from indexer.evaluation.metrics import paired_tests


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--method", default="sdr")
    parser.add_argument("--metric", action="append", default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    reports = [json.loads(p.read_text()) for p in (args.before, args.after)]
    per_query = [r["methods"][args.method]["per_query"] for r in reports]
    metrics = args.metric or sorted(reports[0]["methods"][args.method]["mean"])
    result = {"method": args.method, "before": str(args.before), "after": str(args.after)}
    for metric in metrics:
        test = paired_tests({"before": per_query[0], "after": per_query[1]}, "before", metric)
        result[metric] = {
            "before": reports[0]["methods"][args.method]["mean"][metric],
            "after": reports[1]["methods"][args.method]["mean"][metric],
            **test["after"],
        }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
