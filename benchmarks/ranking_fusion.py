"""The fusion grid of `ranking_cv.py`, scored fast, and the nested choice within it: each
query's lever scores over its population (`QueryTable`), the metrics of every fusion
configuration computed from the ranks of the judged documents (checked against ir_measures by
`ranking_cv.py`), the objective the choice maximises, and the nested leave-one-out report.
`pseudo_queries.py` and `verbatim_cv.py` use them too (through `ranking_cv`)."""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import ir_measures
import numpy as np

from docsim.search.evaluation.metrics import mean_intervals, mean_metrics, paired_tests
from docsim.search.evaluation.runs import read_pools
from docsim.search.evaluation.selection import Family, choose, nested
from docsim.search.ranking.fusion import NORMALISERS, normalise
from docsim.search.settings import SearchSettings

logger = logging.getLogger("benchmarks.ranking_fusion")
DEPTH = 1000  # documents ranked per query, as `docsim evaluate`
# the fusion grid's components (a lexical one stemmed or not) and the weights each may take
DENSE = ("sdr", "sdr-window", "document", "maxsim", "ot")
LEXICAL = ("bm25", "bm25-reduced", "bm25-rm3", "bm25-paragraph")
GRID = (0.0, 1.0, 2.0)


@dataclass(frozen=True)
class JudgedSet:
    """A judged set's files (queries, judgments and, where judged by pools, the pools), the
    least grade that counts as relevant and the queries' text field."""

    queries: Path
    qrels: Path
    pools: Path | None
    min_rel: int
    query_field: str
    exclude_own: str | None = None  # `docsim evaluate --exclude-own`: each query's own judgment


@dataclass
class QueryTable:
    """One query's normalised component scores over its population and its judgments."""

    qid: str
    docs: list[str]
    scores: dict[str, np.ndarray]  # lever -> (n,) raw scores, -inf where not ranked
    grades: np.ndarray  # (n,) judged grade of each document (0 when unjudged)
    relevant_total: int  # judged relevant (grade >= min_rel), in the population or not
    ideal_gains: np.ndarray  # every judged positive grade, descending (for NDCG's ideal)
    cutoff20: int  # NDCG%20's cutoff: 20% of the pool (0 without pools)
    tiebreak: np.ndarray  # (n,) fixed random order


def query_tables(runs: dict[str, dict], judged: JudgedSet, seed: int = 0) -> list[QueryTable]:
    qrels = list(ir_measures.read_trec_qrels(str(judged.qrels)))
    pools = read_pools(judged.pools) if judged.pools else None
    grades: dict[str, dict[str, int]] = {}
    for q in qrels:
        grades.setdefault(q.query_id, {})[q.doc_id] = q.relevance
    tables = []
    rng = np.random.default_rng(seed)
    for qid in runs["bm25"]:
        judged_docs = grades.get(qid, {})
        total = sum(g >= judged.min_rel for g in judged_docs.values())
        if not total:
            continue
        docs = sorted({d for lever in runs.values() for d, _ in lever.get(qid, [])})
        where = {d: i for i, d in enumerate(docs)}
        scores = {}
        for lever, lever_runs_ in runs.items():
            vector = np.full(len(docs), -np.inf)
            for d, s in lever_runs_.get(qid, []):
                vector[where[d]] = s
            scores[lever] = vector
        tables.append(
            QueryTable(
                qid=qid,
                docs=docs,
                scores=scores,
                grades=np.array([judged_docs.get(d, 0) for d in docs]),
                relevant_total=total,
                ideal_gains=np.sort([g for g in judged_docs.values() if g > 0])[::-1],
                cutoff20=max(1, math.ceil(0.2 * len(pools[qid]))) if pools else 0,
                tiebreak=rng.permutation(len(docs)),
            )
        )
    return tables


def ranks_of(fused: np.ndarray, tiebreak: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`(C, k)` the 1-based rank of the documents `rows` `(k,)` under each fused score row of
    `fused` `(C, n)`, ties in `tiebreak` order (as `search.ranking.top_k`)."""
    target = fused[:, rows][:, :, None]  # (C, k, 1)
    above = (fused[:, None, :] > target) | (
        (fused[:, None, :] == target) & (tiebreak[None, None, :] < tiebreak[rows][None, :, None])
    )  # (C, k, n)
    return above.sum(axis=2) + 1


def query_metrics(table: QueryTable, fused: np.ndarray, min_rel: int) -> dict[str, np.ndarray]:
    """Per weight vector `(C,)` AP, NDCG@20, NDCG%20, MRR and R@100 at depth 1000."""
    positive = np.flatnonzero(table.grades > 0)
    ranks = ranks_of(fused, table.tiebreak, positive)  # (C, k)
    gains = table.grades[positive]
    relevant = gains >= min_rel
    kept = ranks <= DEPTH
    out = {}
    rel_ranks = np.where(relevant & kept, ranks, np.inf)  # (C, k)
    ordered = np.sort(rel_ranks, axis=1)
    hits = np.arange(1, ordered.shape[1] + 1)[None, :]
    out["MAP"] = (
        np.where(np.isfinite(ordered), hits / ordered, 0).sum(axis=1) / table.relevant_total
    )
    out["MRR"] = (
        np.where(np.isfinite(ordered[:, 0]), 1 / ordered[:, 0], 0.0) if len(positive) else 0
    )
    out["R@100"] = (rel_ranks <= 100).sum(axis=1) / table.relevant_total
    for name, cutoff in (("NDCG@20", 20), ("NDCG@20%", table.cutoff20)):
        if not cutoff:
            continue
        dcg = np.where(ranks <= cutoff, gains / np.log2(ranks + 1), 0).sum(axis=1)
        ideal = table.ideal_gains[:cutoff]
        out[name] = dcg / (ideal / np.log2(np.arange(2, len(ideal) + 2))).sum()
    return out


def all_configs(components: list[str]) -> list[tuple[str, bool, dict[str, float]]]:
    """Every fusion configuration: (normaliser, stemmed BM25, weights of the grid)."""
    return [
        (how, stemmed, weights)
        for how in NORMALISERS
        for stemmed in (False, True)
        for weights in weight_grid(components)
    ]


def ndcg_metric(name: str) -> str:
    """CSFCube is judged on NDCG at 20% of each pool, AILA at rank 20."""
    return "NDCG@20%" if name == "csfcube" else "NDCG@20"


def weight_grid(components: list[str]) -> list[dict[str, float]]:
    return [
        dict(zip(components, w, strict=True))
        for w in itertools.product(GRID, repeat=len(components))
        if any(w)
    ]


def component_matrix(
    table: QueryTable, components: list[str], how: str, stemmed: bool
) -> np.ndarray:
    """`(L, n)` each component's scores normalised over the query's population."""
    everyone = np.arange(len(table.docs))
    levers = [f"{c}+stem" if stemmed and c in LEXICAL else c for c in components]
    return np.stack([normalise(table.scores[lever], everyone, how) for lever in levers])


def config_metrics(
    table: QueryTable, configs: list[tuple], components: list[str], min_rel: int, chunk: int = 1024
) -> dict[str, np.ndarray]:
    """Per configuration `(C,)` metrics of one query: the fused scores of a group of
    configurations sharing a normaliser and a stemmer are one product `W (c, L) @ Z (L, n)`."""
    out: dict[str, np.ndarray] = {}
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, (how, stemmed, _) in enumerate(configs):
        groups.setdefault((how, stemmed), []).append(i)
    for (how, stemmed), rows in groups.items():
        z = component_matrix(table, components, how, stemmed)  # (L, n)
        weights = np.array([[configs[i][2][c] for c in components] for i in rows])  # (c, L)
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            metrics = query_metrics(table, weights[start : start + chunk] @ z, min_rel)
            for name, v in metrics.items():
                out.setdefault(name, np.zeros(len(configs)))[part] = v
    return out


def fusion_values(
    per_set: dict[str, tuple[JudgedSet, list[QueryTable]]],
    configs: list[tuple],
    components: list[str],
) -> dict[str, dict[str, np.ndarray]]:
    """`value[set][metric]` `(C, q)`: every configuration's per-query metrics."""
    value: dict[str, dict[str, np.ndarray]] = {}
    for name, (judged, tables) in per_set.items():
        columns: dict[str, list[np.ndarray]] = {}
        for table in tables:
            for metric, v in config_metrics(table, configs, components, judged.min_rel).items():
                columns.setdefault(metric, []).append(v)
        value[name] = {m: np.stack(v, axis=1) for m, v in columns.items()}
    return value


def objective_of(name: str, metrics: dict[str, np.ndarray]) -> np.ndarray:
    """The per-query value the choice maximises: AP, and (AP + NDCG%20) / 2 on CSFCube."""
    if name == "csfcube":
        return (metrics["MAP"] + metrics["NDCG@20%"]) / 2
    return metrics["MAP"]


def bm25_baseline(per_set: dict[str, tuple[JudgedSet, list[QueryTable]]]) -> dict[str, np.ndarray]:
    """BM25 alone, per query `(q,)`: what each set's gain is measured against."""
    baseline = {}
    for name, (judged, tables) in per_set.items():
        alone = [query_metrics(t, t.scores["bm25"][None, :], judged.min_rel) for t in tables]
        metrics = {m: np.array([float(a[m][0]) for a in alone])[None, :] for m in alone[0]}
        baseline[name] = objective_of(name, metrics)[0]
    return baseline


def shipped_config(configs: list[tuple], components: list[str]) -> int:
    """The index in `configs` of the service's default fusion (`SearchSettings`' defaults)."""
    search = SearchSettings()
    weights = dict.fromkeys(components, 0.0)
    for method, weight in search.fusion_weights:
        weights[method.value] = weight
    target = (search.fusion_normaliser, search.bm25.stemmer is not None, weights)
    return configs.index(target)


def fusion_families(configs: list[tuple], shipped: int) -> list[Family]:
    """The freedoms the nested procedure may choose among, simplest first: the shipped
    default alone; one method; equal weights over at most 2, at most 3, or any methods; the
    whole grid (weights 0, 1, 2). Each also chooses the normaliser and the stemmer."""
    nonzero = np.array([sum(w > 0 for w in c[2].values()) for c in configs])
    equal = np.array([all(w in (0.0, 1.0) for w in c[2].values()) for c in configs])
    masks = [
        ("shipped default", np.arange(len(configs)) == shipped),
        ("one method", equal & (nonzero == 1)),
        ("equal weights, 2 methods", equal & (nonzero <= 2)),
        ("equal weights, 3 methods", equal & (nonzero <= 3)),
        ("equal weights, any", equal),
        ("grid", np.ones(len(configs), bool)),
    ]
    return [Family(name, np.flatnonzero(mask)) for name, mask in masks]


def describe(config: tuple) -> str:
    how, stemmed, weights = config
    fusion = ",".join(f"{c}:{w:g}" for c, w in weights.items() if w)
    return f"{fusion} ({how}{', stemmed' if stemmed else ''})"


def per_query_of(
    value: dict[str, np.ndarray], tables: list[QueryTable], picks: np.ndarray
) -> dict[str, dict[str, float]]:
    """`{qid: {metric: value}}` with query `i` ranked by configuration `picks[i]`."""
    return {
        t.qid: {m: float(v[picks[i], i]) for m, v in value.items()} for i, t in enumerate(tables)
    }


def with_intervals(
    mine: dict[str, dict[str, float]], others: dict[str, dict], metrics: tuple[str, ...]
) -> dict:
    """Each metric's mean with its bootstrap interval, and paired tests (with the difference's
    bootstrap interval) against each of `others` (`{name: {qid: {metric: value}}}`)."""
    tests = {
        f"vs_{name}_{m}": paired_tests({"this": mine, name: runs}, name, m)["this"]
        for name, runs in others.items()
        for m in metrics
    }
    return {"mean": mean_metrics(mine), "interval_95": mean_intervals(mine), "tests": tests}


def nested_report(
    configs: list[tuple],
    components: list[str],
    value: dict[str, dict[str, np.ndarray]],
    objective: dict[str, np.ndarray],
    baseline: dict[str, np.ndarray],
    lever_queries: dict[str, dict],
    per_set: dict,
) -> dict:
    """Nested leave-one-out of the whole choice, under both family rules, with bootstrap
    intervals and paired tests against BM25, `document` and the shipped default."""
    shipped = shipped_config(configs, components)
    families = fusion_families(configs, shipped)
    everyone = {s: np.ones(v.shape[1], bool) for s, v in objective.items()}
    report: dict = {"shipped": describe(configs[shipped]), "families": {}}
    for family in families:
        report["families"][family.name] = {
            "configurations": len(family.members),
            "chosen_on_all_queries": describe(
                configs[choose(objective, baseline, everyone, family.members)]
            ),
        }
    fixed = {  # the shipped default's per-query metrics, in sample
        name: per_query_of(value[name], tables, np.full(len(tables), shipped))
        for name, (_, tables) in per_set.items()
    }
    report["shipped_in_sample"] = {name: with_intervals(fixed[name], {}, ()) for name in fixed}
    # the shipped default was itself chosen on these queries (on earlier vectors): the
    # procedures without it choose from scratch
    procedures = {
        rule + suffix: (rule, candidates)
        for suffix, candidates in (("", families), (" from scratch", families[1:]))
        for rule in ("best", "one-se")
    }
    report["procedures"] = list(procedures)
    for label, (rule, candidates) in procedures.items():
        result = nested(objective, baseline, candidates, rule)
        report[label] = {}
        for name, (_, tables) in per_set.items():
            mine = per_query_of(value[name], tables, result.picks[name])
            others = {
                "bm25": lever_queries[name]["bm25"],
                "document": lever_queries[name]["document"],
                "shipped": fixed[name],
            }
            metrics = ("MAP", ndcg_metric(name))
            chosen = [candidates[f].name for f in result.families[name]]
            report[label][name] = {
                **with_intervals(mine, others, metrics),
                "families_chosen": {f.name: chosen.count(f.name) for f in candidates},
                "per_query": mine,
            }
            means = {m: round(v, 4) for m, v in report[label][name]["mean"].items()}
            logger.info("nested (%s) %s: %s", label, name, means)
            logger.info("nested (%s) %s families: %s", label, name, chosen)
    return report
