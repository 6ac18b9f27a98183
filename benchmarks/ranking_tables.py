"""The ranking tables of docs/evaluation.md, from the JSON that `ranking_cv.py` saves.

    python benchmarks/ranking_tables.py benchmarks/results/ranking_cv.json > tables.md

One table per judged set: every lever, then the fusions (the grid's choice in sample and
cross-validated, the shipped default, and each nested procedure), each figure with its 95%
bootstrap interval where the JSON has one. Then the nested procedures' paired tests.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

METRICS = ("MAP", "NDCG", "MRR", "R@100")


def ndcg_name(name: str) -> str:
    """CSFCube is judged on NDCG at 20% of each pool, AILA at rank 20."""
    return "NDCG@20%" if name == "csfcube" else "NDCG@20"


def cell(mean: dict, intervals: dict | None, metric: str) -> str:
    value = f"{mean[metric]:.4f}"
    if intervals and metric in intervals:
        low, high = intervals[metric]
        value += f" [{low:.3f}, {high:.3f}]"
    return value


def test_cell(test: dict | None) -> str:
    if not test:
        return ""
    return f"{test['mean_difference']:+.4f}, {test['t_test_p']:.3f}, {test['wilcoxon_p']:.3f}"


AGAINST = ("bm25", "document", "fused", "plain")  # each lever's paired tests shown (MAP)


def set_table(name: str, report: dict) -> list[str]:
    ndcg = ndcg_name(name)
    metrics = [m if m != "NDCG" else ndcg for m in METRICS]
    tests_head = " | ".join(
        "MAP vs its plain method" if b == "plain" else f"MAP vs `{b}`: diff, t p, W p"
        for b in AGAINST
    )
    head = [
        "| lever | " + " | ".join(metrics) + f" | {tests_head} |",
        "|---" * (len(metrics) + 1 + len(AGAINST)) + "|",
    ]
    blank = " |" * len(AGAINST)
    rows = []
    for lever, values in report["levers"][name].items():
        cells = [cell(values["mean"], values.get("interval_95"), m) for m in metrics]
        tests = [test_cell(values.get(f"vs_{b}")) for b in AGAINST]
        rows.append(f"| `{lever}` | " + " | ".join(cells + tests) + " |")
    fusion, nested = report["fusion"][name], report["nested"]
    rows.append(
        "| grid, chosen on all queries (in sample) | "
        + " | ".join(cell(fusion["in_sample"], None, m) for m in metrics)
        + f" |{blank}"
    )
    rows.append(
        "| grid, leave-one-out | "
        + " | ".join(cell(fusion["cross_validated"], None, m) for m in metrics)
        + f" |{blank}"
    )
    shipped = nested["shipped_in_sample"][name]
    rows.append(
        f"| **shipped `fused`** ({nested['shipped']}), in sample | "
        + " | ".join(cell(shipped["mean"], shipped["interval_95"], m) for m in metrics)
        + f" |{blank}"
    )
    for label in nested["procedures"]:
        result = nested[label][name]
        tests = [
            test_cell(result["tests"].get(f"vs_{'shipped' if b == 'fused' else b}_MAP"))
            for b in AGAINST
        ]
        rows.append(
            f"| nested, `{label}` | "
            + " | ".join([cell(result["mean"], result["interval_95"], m) for m in metrics] + tests)
            + " |"
        )
    return head + rows


def tests_table(report: dict) -> list[str]:
    nested = report["nested"]
    lines = [
        "| set | procedure | families chosen | "
        "vs bm25 (MAP; NDCG) | vs document (MAP; NDCG) | vs shipped (MAP; NDCG) |",
        "|---|---|---|---|---|---|",
    ]
    for label in nested["procedures"]:
        for name, result in nested[label].items():
            chosen = ", ".join(f"{f} {n}" for f, n in result["families_chosen"].items() if n)
            ndcg = ndcg_name(name)
            cells = []
            for against in ("bm25", "document", "shipped"):
                pair = [result["tests"][f"vs_{against}_{m}"] for m in ("MAP", ndcg)]
                cells.append("; ".join(interval_test(t) for t in pair))
            lines.append(f"| {name} | `{label}` | {chosen} | " + " | ".join(cells) + " |")
    return lines


def interval_test(test: dict) -> str:
    low, high = test["difference_interval_95"]
    return (
        f"{test['mean_difference']:+.3f} [{low:+.3f}, {high:+.3f}] "
        f"p {test['t_test_p']:.2f}/{test['wilcoxon_p']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    saved = json.loads(parser.parse_args().report.read_text())
    report = saved["figures"] if "figures" in saved else saved  # a record (benchmarks/record.py)
    for name in report["levers"]:
        print(f"**{name}**\n")
        print("\n".join(set_table(name, report)) + "\n")
    print("**Nested procedures: paired differences [95% bootstrap], t / Wilcoxon p**\n")
    print("\n".join(tests_table(report)))


if __name__ == "__main__":
    main()
