"""Scoring runs against judgments: ir_measures' metrics, SDR's MPR and HR@k, micro-averaged
precision, recall and F1 at k, paired tests.

Metrics come from `ir_measures` (pytrec_eval underneath): MAP, P@10, NDCG@20, MRR, Recall@100,
P@k and R@k at the asked cutoffs, and NDCG at 20% of each query's pool when pools are given.
SDR's MPR and HR@k (paper section 4.2) and the micro averages over queries (`micro_at`, the
figures published on IL-PCR) are computed here because no IR library has them. Several
methods are compared with a paired t-test and a Wilcoxon signed-rank test on per-query AP
against a baseline (BM25).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import ir_measures
from ir_measures import AP, RR, R, nDCG
from ir_measures import P as Precision


def write_trec_run(path: Path, runs: dict[str, list[tuple[str, float]]], tag: str) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for qid, ranked in runs.items():
            for rank, (doc_id, score) in enumerate(ranked, start=1):
                handle.write(f"{qid} Q0 {doc_id} {rank} {score:.6f} {tag}\n")


def sdr_rank_metrics(
    ranked: list[str], relevant: set[str], n_candidates: int, ks: Iterable[int]
) -> dict[str, float]:
    """MPR (mean percentile rank of the relevant documents, lower is better) and HR@k (share of
    the relevant documents ranked in the top k), as in SDR section 4.2."""
    position = {doc: i for i, doc in enumerate(ranked)}
    ranks = [position.get(doc, n_candidates - 1) for doc in relevant]
    out = {"MPR": sum(r / max(n_candidates - 1, 1) for r in ranks) / len(ranks)} if ranks else {}
    for k in ks:
        if ranks:
            out[f"HR@{k}"] = sum(r < k for r in ranks) / len(ranks)
    return out


def score_runs(
    runs: dict[str, list[tuple[str, float]]],
    qrels: list[Any],
    *,
    min_rel: int = 1,
    pools: dict[str, list[str]] | None = None,
    sdr_metrics: bool = False,
    n_documents: int = 0,
    cutoffs: Iterable[int] = (),
) -> dict[str, dict[str, float]]:
    """Per-query metrics `{qid: {metric: value}}`, for queries with a relevant document
    (`P@k` and `R@k` for each k of `cutoffs` too)."""
    judged = [q for q in qrels if q.query_id in runs]
    scored_docs = [
        ir_measures.ScoredDoc(qid, doc, score)
        for qid, ranked in runs.items()
        for doc, score in ranked
    ]
    named = {
        "MAP": AP(rel=min_rel),
        "P@10": Precision(rel=min_rel) @ 10,
        "NDCG@20": nDCG @ 20,
        "MRR": RR(rel=min_rel),
        "R@100": R(rel=min_rel) @ 100,
    }
    for k in cutoffs:
        named[f"P@{k}"] = Precision(rel=min_rel) @ k
        named[f"R@{k}"] = R(rel=min_rel) @ k
    measures = list(named.values())
    names = {str(measure): name for name, measure in named.items()}
    per_query: dict[str, dict[str, float]] = {}
    for metric in ir_measures.iter_calc(measures, judged, scored_docs):
        per_query.setdefault(metric.query_id, {})[names[str(metric.measure)]] = metric.value
    relevant: dict[str, set[str]] = {}
    for q in judged:
        if q.relevance >= min_rel:
            relevant.setdefault(q.query_id, set()).add(q.doc_id)
    for qid in relevant:  # a query that ranked nothing scores 0, never drops out of the mean
        if not runs.get(qid):
            per_query[qid] = dict.fromkeys(names.values(), 0.0)
    per_query = {q: m for q, m in per_query.items() if q in relevant}
    for qid, metrics in per_query.items():
        if pools is not None and not runs.get(qid):
            metrics["NDCG@20%"] = 0.0
        elif pools is not None:
            cutoff = max(1, math.ceil(0.2 * len(pools[qid])))
            only = [q for q in judged if q.query_id == qid]
            value = ir_measures.calc_aggregate(
                [nDCG @ cutoff], only, [d for d in scored_docs if d.query_id == qid]
            )
            metrics["NDCG@20%"] = value[nDCG @ cutoff]
        if sdr_metrics:
            n = len(pools[qid]) if pools is not None else n_documents
            metrics.update(sdr_rank_metrics([d for d, _ in runs[qid]], relevant[qid], n, (10, 100)))
    return per_query


def mean_metrics(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    names = sorted({m for metrics in per_query.values() for m in metrics})
    return (
        {m: sum(q[m] for q in per_query.values()) / len(per_query) for m in names}
        if per_query
        else {}
    )


BOOTSTRAP_RESAMPLES = 10_000


def micro_at(
    per_query: dict[str, dict[str, float]], relevant: dict[str, int], k: int
) -> dict[str, Any]:
    """Micro-averaged precision, recall and F1 at `k` over the queries of `per_query` (which
    hold `P@k`): every query's relevant documents in its top k summed, over k times the
    queries (precision) and over their relevant documents summed (recall; `relevant` counts
    each query's); F1 their harmonic mean, with its 95% bootstrap interval over resampled
    queries."""
    import numpy as np
    from scipy import stats

    qids = sorted(per_query)
    hits = np.array([round(per_query[q][f"P@{k}"] * k) for q in qids], np.float64)  # (Q,)
    judged = np.array([relevant[q] for q in qids], np.float64)  # (Q,)

    def f1(found: np.ndarray, wanted: np.ndarray) -> float:
        precision, recall = found.sum() / (k * len(found)), found.sum() / max(wanted.sum(), 1)
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    if not len(qids):
        return {}
    precision, recall = hits.sum() / (k * len(qids)), hits.sum() / max(judged.sum(), 1)
    interval = [f1(hits, judged)] * 2
    if len(qids) > 1 and np.ptp(hits / np.maximum(judged, 1)):
        found = stats.bootstrap(
            (hits, judged),
            f1,
            paired=True,
            vectorized=False,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(0),
        ).confidence_interval
        interval = [float(found.low), float(found.high)]
    return {
        f"microP@{k}": float(precision),
        f"microR@{k}": float(recall),
        f"microF1@{k}": f1(hits, judged),
        f"microF1@{k}_interval_95": interval,
    }


def bootstrap_interval(
    values: list[float], confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of `values` (one per query), over
    BOOTSTRAP_RESAMPLES resamples of the queries with replacement (scipy.stats.bootstrap),
    seeded so that a report is reproducible."""
    import numpy as np
    from scipy import stats

    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return (math.nan, math.nan)
    if np.all(data == data[0]):  # every resample has the same mean
        return (float(data[0]), float(data[0]))
    result = stats.bootstrap(
        (data,),
        np.mean,
        confidence_level=confidence,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def mean_intervals(per_query: dict[str, dict[str, float]]) -> dict[str, list[float]]:
    """Each metric's 95% bootstrap interval of the mean over the queries."""
    names = sorted({m for metrics in per_query.values() for m in metrics})
    return {
        m: list(bootstrap_interval([q[m] for q in per_query.values() if m in q])) for m in names
    }


def paired_tests(
    per_method: dict[str, dict[str, dict[str, float]]], baseline: str, metric: str = "MAP"
) -> dict[str, Any]:
    """Paired t-test and Wilcoxon signed-rank test of each method against `baseline`, and the
    95% bootstrap interval of the mean per-query difference."""
    from scipy import stats

    out = {}
    base = per_method[baseline]
    for name, per_query in per_method.items():
        if name == baseline:
            continue
        qids = sorted(set(base) & set(per_query))
        a = [per_query[q][metric] for q in qids]
        b = [base[q][metric] for q in qids]
        diffs = [x - y for x, y in zip(a, b, strict=True)]
        t = stats.ttest_rel(a, b) if any(diffs) else None
        w = stats.wilcoxon(a, b) if any(diffs) else None
        out[name] = {
            "mean_difference": sum(diffs) / len(diffs) if diffs else 0.0,
            "difference_interval_95": list(bootstrap_interval(diffs)),
            "t_test_p": float(t.pvalue) if t is not None else 1.0,
            "wilcoxon_p": float(w.pvalue) if w is not None else 1.0,
            "queries": len(qids),
        }
    return out
