"""Issue 69: the shingle channel on the three judged sets, alone and in the default fusion,
with its weight chosen by cross-validation and the whole choice checked by nested
leave-one-out.

    python benchmarks/verbatim_cv.py --set aila=AILA_DATA_DIR --set csfcube=CSF_DATA_DIR \\
        --set ilpcr=ILPCR_DATA_DIR [--cache DIR] [--out benchmarks/results/verbatim_cv.json]

1. Levers (`ranking_cv.lever_runs`, the API's code path, every query's whole population, each
   IL-PCR query's own judgment left out): `bm25`, `bm25-rm3`, `document`, `maxsim`, the
   default `fused`, and `bm25-shingles` over shingles of 1 to 5 words, each with MAP,
   NDCG@20 (NDCG@20% on CSFCube), R@100 and micro-F1@7, bootstrap intervals and paired tests
   against `fused` and `bm25`.
2. Fusions, declared before any figure was seen: the default (`bm25-rm3:1,document:1,
   maxsim:1`, min-max) plus the shingle channel of n words (n = 2, 3) either
   - `add`: min-max normalised with weight w in {0.5, 1, 2} (the default's own rule), or
   - `gate`: only its outliers, `w * max(z - t, 0) / (max z - t)` with z its z-scores over the
     population, t in {2, 3, 4} and w in {1, 2}: a collection or query without verbatim
     reuse has no outliers and keeps the default ranking, one with it gets a bonus of up to
     w for the documents that quote the most.
3. Choice: the objective of `ranking_cv` (the smallest over the sets of mean AP, or
   (AP + NDCG%20) / 2 on CSFCube, over BM25's): in sample, leave-one-query-out, and nested
   leave-one-out over the families {default alone, add, gate, any} under the rules `best` and
   `one-se` (`search.evaluation.selection`).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import ir_measures
import numpy as np
from ranking_cv import (
    SETS,
    JudgedSet,
    QueryTable,
    lever_runs,
    ndcg_metric,
    objective_of,
    query_metrics,
    query_tables,
    ranks_of,
    with_intervals,
)
from record import save

from docsim.search.evaluation.metrics import mean_intervals, mean_metrics, paired_tests, score_runs
from docsim.search.evaluation.runs import read_pools
from docsim.search.evaluation.selection import Family, leave_one_out, nested
from docsim.search.ranking.fusion import normalise

logger = logging.getLogger("benchmarks.verbatim_cv")
SHINGLE_LEVERS = ("bm25-shingles+n1", "bm25-shingles", *(f"bm25-shingles+n{n}" for n in (3, 4, 5)))
LEVERS = ("bm25+stem", "bm25-rm3+stem", "document", "maxsim", "fused", *SHINGLE_LEVERS)
DEFAULT = {"bm25-rm3+stem": 1.0, "document": 1.0, "maxsim": 1.0}  # today's `fused`, min-max
SHINGLES = {2: "bm25-shingles", 3: "bm25-shingles+n3"}
MICRO_K = 7  # IL-PCR's published cutoff (U-CREAT)


def configurations() -> list[dict]:
    """Every fusion tried: the default, then `add` and `gate` of each shingle length."""
    configs: list[dict] = [{"name": "default", "rule": "default"}]
    for n, lever in SHINGLES.items():
        for w in (0.5, 1.0, 2.0):
            configs.append({"name": f"add n{n} w{w:g}", "rule": "add", "lever": lever, "w": w})
        for t in (2.0, 3.0, 4.0):
            for w in (1.0, 2.0):
                name = f"gate n{n} t{t:g} w{w:g}"
                configs.append({"name": name, "rule": "gate", "lever": lever, "w": w, "t": t})
    return configs


def fused_scores(table: QueryTable, config: dict) -> np.ndarray:
    """`(n,)` the configuration's fused score of each document of the query's population."""
    everyone = np.arange(len(table.docs))
    base = sum(w * normalise(table.scores[c], everyone, "minmax") for c, w in DEFAULT.items())
    if config["rule"] == "default":
        return base
    if config["rule"] == "add":
        return base + config["w"] * normalise(table.scores[config["lever"]], everyone, "minmax")
    z = normalise(table.scores[config["lever"]], everyone, "zscore")  # (n,)
    top, t = float(z.max()), config["t"]
    if top <= t:
        return base  # no outlier: the default ranking
    return base + config["w"] * np.maximum(z - t, 0) / (top - t)


def config_values(
    tables: list[QueryTable], configs: list[dict], min_rel: int
) -> dict[str, np.ndarray]:
    """`{metric: (C, q)}` every configuration's per-query metrics, with `hits@K` (relevant
    documents in the top `MICRO_K`) for micro-F1."""
    columns: dict[str, list[np.ndarray]] = {}
    for table in tables:
        fused = np.stack([fused_scores(table, c) for c in configs])  # (C, n)
        metrics = query_metrics(table, fused, min_rel)
        relevant = np.flatnonzero(table.grades >= min_rel)
        metrics["hits@K"] = (ranks_of(fused, table.tiebreak, relevant) <= MICRO_K).sum(axis=1)
        for name, v in metrics.items():
            columns.setdefault(name, []).append(np.asarray(v, np.float64))
    return {m: np.stack(v, axis=1) for m, v in columns.items()}


def micro_f1(hits: np.ndarray, relevant: np.ndarray) -> float:
    """Micro-F1 at `MICRO_K` of queries with `hits` `(q,)` of their `relevant` `(q,)`."""
    precision = hits.sum() / (MICRO_K * len(hits))
    recall = hits.sum() / max(relevant.sum(), 1)
    return float(2 * precision * recall / (precision + recall)) if hits.sum() else 0.0


def micro_interval(hits: np.ndarray, relevant: np.ndarray, seed: int = 0) -> list[float]:
    """A 95% percentile bootstrap interval of `micro_f1` over resampled queries."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(hits), size=(10_000, len(hits)))
    values = [micro_f1(hits[d], relevant[d]) for d in draws]
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]


def lever_report(name: str, folder: str, judged: JudgedSet, cache: Path) -> tuple[dict, dict]:
    """Each lever's metrics (ir_measures, depth 1000) with intervals and paired tests, and
    the runs."""
    qrels = list(ir_measures.read_trec_qrels(str(judged.qrels)))
    pools = read_pools(judged.pools) if judged.pools else None
    runs, per_lever = {}, {}
    for lever in LEVERS:
        runs[lever] = lever_runs(lever, folder, judged, cache)
        depth = {q: r[:1000] for q, r in runs[lever].items()}
        per_lever[lever] = score_runs(
            depth, qrels, min_rel=judged.min_rel, pools=pools, cutoffs=(MICRO_K,)
        )
    relevant: dict[str, int] = {}
    for q in qrels:
        relevant[q.query_id] = relevant.get(q.query_id, 0) + int(q.relevance >= judged.min_rel)
    report = {}
    for lever, pq in per_lever.items():
        qids = sorted(pq)
        hits = np.array([round(pq[q][f"P@{MICRO_K}"] * MICRO_K) for q in qids], np.float64)
        wanted = np.array([relevant[q] for q in qids], np.float64)
        report[lever] = {
            "mean": mean_metrics(pq),
            "interval_95": mean_intervals(pq),
            f"micro_f1@{MICRO_K}": micro_f1(hits, wanted),
            f"micro_f1@{MICRO_K}_interval_95": micro_interval(hits, wanted),
            **{
                f"vs_{b}_{m}": paired_tests(per_lever, b, m).get(lever)
                for b in ("fused", "bm25+stem")
                for m in ("MAP", ndcg_metric(name))
            },
        }
        logger.info("%s %-18s %s micro-F1@%d %.4f", name, lever,
                    json.dumps({k: round(v, 4) for k, v in report[lever]["mean"].items()}),
                    MICRO_K, report[lever][f"micro_f1@{MICRO_K}"])  # fmt: skip
    return report, {"runs": runs, "per_lever": per_lever}


def families(configs: list[dict]) -> list[Family]:
    rules = np.array([c["rule"] for c in configs])
    return [
        Family("default alone", np.flatnonzero(rules == "default")),
        Family("add", np.flatnonzero(rules != "gate")),
        Family("gate", np.flatnonzero(rules != "add")),
        Family("any", np.arange(len(configs))),
    ]


def per_query(value: dict[str, np.ndarray], tables: list[QueryTable], picks: np.ndarray) -> dict:
    return {
        t.qid: {m: float(v[picks[i], i]) for m, v in value.items()} for i, t in enumerate(tables)
    }


def summary(name: str, mine: dict, fixed: dict, bm25: dict, tables: list[QueryTable]) -> dict:
    """Means, intervals and paired tests against the default and BM25, with micro-F1@K."""
    ndcg = ndcg_metric(name)
    out = with_intervals(mine, {"default": fixed, "bm25": bm25}, ("MAP", ndcg))
    hits = np.array([mine[t.qid]["hits@K"] for t in tables])
    wanted = np.array([t.relevant_total for t in tables], np.float64)
    out[f"micro_f1@{MICRO_K}"] = micro_f1(hits, wanted)
    out[f"micro_f1@{MICRO_K}_interval_95"] = micro_interval(hits, wanted)
    return out


def bm25_objective(per_set: dict) -> dict[str, np.ndarray]:
    """Per set `(q,)` BM25's per-query objective: what each gain is measured against."""
    out = {}
    for n, (judged, tables) in per_set.items():
        alone = [query_metrics(t, t.scores["bm25+stem"][None, :], judged.min_rel) for t in tables]
        metrics = {m: np.array([[float(a[m][0]) for a in alone]]) for m in alone[0]}
        out[n] = objective_of(n, metrics)[0]
    return out


def fusion_report(per_set: dict, levers: dict) -> dict:
    """In sample, leave-one-out and nested figures of every configuration and procedure."""
    configs = configurations()
    value = {n: config_values(t, configs, j.min_rel) for n, (j, t) in per_set.items()}
    objective = {n: objective_of(n, v) for n, v in value.items()}
    baseline = bm25_objective(per_set)
    everyone = {n: np.ones(v.shape[1], bool) for n, v in objective.items()}
    report: dict = {"configurations": [c["name"] for c in configs], "sets": {}}
    loo = leave_one_out(objective, baseline, everyone, np.arange(len(configs)))
    procedures = {
        rule: nested(objective, baseline, families(configs), rule) for rule in ("best", "one-se")
    }
    for n, (_, tables) in per_set.items():
        fixed = per_query(value[n], tables, np.zeros(len(tables), int))
        bm25 = levers[n]["per_lever"]["bm25+stem"]
        entry: dict = {"in_sample": {}}
        for c, config in enumerate(configs):
            mine = per_query(value[n], tables, np.full(len(tables), c))
            entry["in_sample"][config["name"]] = summary(n, mine, fixed, bm25, tables)
        entry["leave_one_out"] = summary(
            n, per_query(value[n], tables, loo[n]), fixed, bm25, tables
        )
        entry["leave_one_out"]["picks"] = [configs[p]["name"] for p in loo[n]]
        for rule, result in procedures.items():
            mine = per_query(value[n], tables, result.picks[n])
            entry[f"nested_{rule}"] = summary(n, mine, fixed, bm25, tables)
            entry[f"nested_{rule}"]["families"] = [
                families(configs)[f].name for f in result.families[n]
            ]
        report["sets"][n] = entry
        logger.info(
            "%s leave-one-out %s",
            n,
            {k: round(v, 4) for k, v in entry["leave_one_out"]["mean"].items()},
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", required=True, help="NAME=DATA_DIR[@COLLECTION]")
    parser.add_argument("--cache", type=Path, default=Path("ranking-cv-cache"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/verbatim_cv.json"))
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    args.cache.mkdir(parents=True, exist_ok=True)
    report: dict = {"levers": {}}
    per_set: dict[str, tuple[JudgedSet, list[QueryTable]]] = {}
    levers: dict[str, dict] = {}
    for spec in args.set:
        name, _, folder = spec.partition("=")
        judged = SETS[name]
        report["levers"][name], levers[name] = lever_report(name, folder, judged, args.cache)
        runs = {"bm25": levers[name]["runs"]["bm25+stem"], **levers[name]["runs"]}  # its queries
        per_set[name] = (judged, query_tables(runs, judged))
    report["fusion"] = fusion_report(per_set, levers)
    save(args.out, report)
    logger.info("Saved %s", args.out)


if __name__ == "__main__":
    main()
