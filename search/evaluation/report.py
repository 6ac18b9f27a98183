"""`docsim evaluate`'s stages after the index is open: read the judged queries, rank them with
every method and score the rankings, then the JSON report and the table the command prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from docsim.protocol.requests import FilterIn
from docsim.search.evaluation.metrics import (
    mean_intervals,
    mean_metrics,
    micro_at,
    paired_tests,
    score_runs,
    write_trec_run,
)
from docsim.search.evaluation.runs import (
    EvalQuery,
    MethodSpec,
    excluding_own,
    read_pools,
    read_qrels,
    read_queries,
    run_queries,
)
from docsim.search.searcher import Searcher

BASELINES = ("bm25", "hybrid")  # the methods every other one is tested against, when run

PerQuery = dict[str, dict[str, float]]  # qid -> metric -> value


@dataclass(frozen=True)
class Judged:
    """The queries to rank, their relevance judgments (`ir_measures.Qrel`s) and, to re-rank
    rather than search, each query's pool of candidate ids."""

    queries: list[EvalQuery]
    judgments: list[Any]
    pools: dict[str, list[str]] | None
    filter: FilterIn | None = None  # rank only the documents it keeps

    def relevant_counts(self, min_rel: int) -> dict[str, int]:
        """Each query's documents judged relevant (grade `min_rel` or more)."""
        counts: dict[str, int] = {}
        for judgment in self.judgments:
            if judgment.relevance >= min_rel:
                counts[judgment.query_id] = counts.get(judgment.query_id, 0) + 1
        return counts

    def within(self, searcher: Searcher) -> Judged:
        """The judgments of the documents the filter keeps only: a relevant document it
        leaves out could never be found, and counts for no method."""
        if self.filter is None:
            return self
        mask = searcher.filter_mask(self.filter.tree())
        kept = {d for d, keep in zip(searcher.index.external_ids, mask, strict=True) if keep}
        return replace(self, judgments=[j for j in self.judgments if j.doc_id in kept])


def read_judged(
    queries: Path,
    qrels: Path,
    pools: Path | None,
    query_field: str,
    filter: FilterIn | None = None,
    exclude_own: str | None = None,
) -> Judged:
    """Read the queries (AILA lines or JSONL, the text in `query_field`), the TREC qrels and
    the optional pools (JSON); with `filter`, every query ranks only what it keeps; with
    `exclude_own`, each leaves out the document its id names (`excluding_own`).

    Raises:
        ValueError, OSError: a file that is missing or not in its format (naming it), or an
            `exclude_own` that is not a regular expression with a group.
    """
    read = read_queries(queries, query_field)
    return Judged(
        queries=excluding_own(read, exclude_own) if exclude_own else read,
        judgments=read_qrels(qrels),
        pools=read_pools(pools) if pools else None,
        filter=filter,
    )


def score_methods(
    searcher: Searcher,
    specs: Sequence[MethodSpec],
    judged: Judged,
    *,
    depth: int,
    min_rel: int,
    sdr_metrics: bool,
    run_out: Path | None,
    cutoffs: Sequence[int] = (),
) -> dict[str, PerQuery]:
    """Rank the queries with each method (`depth` documents each) and score the rankings
    against the judgments (grades from `min_rel` count as relevant; with `sdr_metrics`, SDR's
    MPR and HR@k too; P@k and R@k at `cutoffs`). With `run_out`, each method's ranking is
    written as a TREC run file (`run_file`). Returns the per-query metrics of each method, by
    name."""
    per_method: dict[str, PerQuery] = {}
    for spec in specs:
        runs = run_queries(searcher, judged.queries, spec, judged.pools, depth, judged.filter)
        if run_out is not None:
            path = run_file(run_out, spec.name, several=len(specs) > 1)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_trec_run(path, runs, f"docsim-{spec.name}")
        per_method[spec.name] = score_runs(
            runs,
            judged.judgments,
            min_rel=min_rel,
            pools=judged.pools,
            sdr_metrics=sdr_metrics,
            n_documents=searcher.index.n_documents,
            cutoffs=cutoffs,
        )
    return per_method


def run_file(run_out: Path, method: str, *, several: bool) -> Path:
    """Where the TREC run of `method` goes: `run_out` itself for a single method, else
    `run_out` with the method's name before its suffix (`runs.bm25.txt`)."""
    return run_out.with_name(f"{run_out.stem}.{method}{run_out.suffix}") if several else run_out


def build_report(
    *,
    queries: Path,
    qrels: Path,
    pools: Path | None,
    index_version: int,
    per_method: dict[str, PerQuery],
    search_settings: dict[str, Any],
    filter: Any = None,
    micro: tuple[dict[str, int], Sequence[int]] = ({}, ()),
) -> dict[str, Any]:
    """The JSON report: the inputs, each method's mean and per-query metrics (and its micro
    averages at each k of `micro`, with each query's relevant count), the paired tests of
    every method against each baseline that ran (with another method to compare), and the
    search settings (and the filter, JSON) the rankings used."""
    relevant, micro_cutoffs = micro
    report: dict[str, Any] = {
        "queries": str(queries),
        "qrels": str(qrels),
        "pools": str(pools) if pools else None,
        "filter": filter,
        "index_version": index_version,
        "methods": {
            name: {
                "mean": mean_metrics(per_query),
                "interval_95": mean_intervals(per_query),
                "micro": {
                    metric: value
                    for k in micro_cutoffs
                    for metric, value in micro_at(per_query, relevant, k).items()
                },
                "per_query": per_query,
            }
            for name, per_query in per_method.items()
        },
    }
    for baseline in BASELINES:
        if baseline in per_method and len(per_method) > 1:
            report[f"paired_tests_vs_{baseline}_on_MAP"] = paired_tests(per_method, baseline)
    report["search_settings"] = search_settings
    return report


def _interval(bounds: list[float]) -> str:
    return f"[{bounds[0]:+.4f}, {bounds[1]:+.4f}]"


def report_table(report: dict[str, Any]) -> list[str]:
    """The lines `docsim evaluate` prints: each method's mean metrics in columns, then each
    paired test against a baseline."""

    def figures(result: dict[str, Any]) -> dict[str, float]:
        micro = result.get("micro", {})
        return {**result["mean"], **{n: v for n, v in micro.items() if n.startswith("microF1")
                                     and not n.endswith("_95")}}  # fmt: skip

    names = sorted({m for r in report["methods"].values() for m in figures(r)})
    lines = ["method      " + " ".join(f"{n:>9}" for n in names)]
    for name, result in report["methods"].items():
        found = figures(result)
        lines.append(f"{name:<11} " + " ".join(f"{found.get(n, float('nan')):9.4f}" for n in names))
    for baseline in BASELINES:
        for name, test in report.get(f"paired_tests_vs_{baseline}_on_MAP", {}).items():
            lines.append(
                f"{name} vs {baseline} (MAP): diff {test['mean_difference']:+.4f} "
                f"(95% bootstrap {_interval(test['difference_interval_95'])}), "
                f"t-test p={test['t_test_p']:.3f}, Wilcoxon p={test['wilcoxon_p']:.3f}"
            )
    return lines
