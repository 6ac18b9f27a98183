"""Every ranking lever on the judged sets, and score fusion of the levers with its weights chosen
by leave-one-query-out cross-validation.

    python benchmarks/ranking_cv.py --set aila=DATA_DIR --set csfcube=DATA_DIR[@COLLECTION] \\
        [--cache DIR] [--out benchmarks/results/ranking_cv.json]

Each DATA_DIR holds an index of that set's corpus (`docsim index`). The sets' queries and
judgments come from ../shared/data (development sets only).

1. Each lever (a `/similar` method, or a method under another search setting, e.g. stemmed
   BM25) ranks every query's population through `Searcher.similar`, the API's code path, to
   full depth (runs cached in `--cache`). Metrics by `search.evaluation.metrics` (ir_measures),
   paired t and Wilcoxon tests on MAP and NDCG against `bm25`, `document`, the default
   `fused` and `hybrid`, and a variant `METHOD+SETTING` against its plain `METHOD`.
2. Fusion: every weight vector of the grid (weights {0, 1, 2} per component, z-score or min-max
   normalisation, stemmed or plain BM25) fuses the components' per-query normalised scores with
   `search.ranking.fusion.fuse`, the `fused` method's own function. Per-query AP, NDCG and
   friends of each weight vector are computed here from the ranks of the judged documents
   (checked against ir_measures on the single levers).
3. Leave-one-query-out: for each query of either set, the weight vector that maximises the
   objective on every OTHER query (both sets) ranks the held-out query. The objective is the
   minimum (or, with --objective mean, the mean) over the two sets of (mean per-query value /
   BM25's on the same queries), the value
   being AP on AILA and (AP + NDCG%20) / 2 on CSFCube: one default for both sets, never tuned
   on the query it is scored on. The cross-validated figure of a set is the mean over its
   held-out queries. The in-sample figure is that of the weight vector chosen on all queries
   (the one shipped as the default).
4. Nested leave-one-out (`search.evaluation.selection`), the error of the whole procedure: for each
   query, how much freedom the choice has (the shipped default alone, one method, equal
   weights over at most 2, at most 3 or any methods, the grid) is chosen by leave-one-out on
   the other queries (rule `best`, or `one-se`: the simplest within one standard error of the
   best), then the configuration within it, and the held-out query is ranked by that. Every
   figure comes with a bootstrap 95% interval over queries, and paired tests against `bm25`,
   `document` and the shipped default.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import ir_measures
import numpy as np
from ranking_fusion import (  # benchmarks/ranking_fusion.py: the fusion grid, scored fast
    DENSE,
    DEPTH,
    LEXICAL,
    JudgedSet,
    QueryTable,
    all_configs,
    bm25_baseline,
    fusion_values,
    ndcg_metric,
    nested_report,
    objective_of,
    query_metrics,
    query_tables,
)

# re-exported: pseudo_queries.py and verbatim_cv.py import these from here
from ranking_fusion import describe as describe
from ranking_fusion import fusion_families as fusion_families
from ranking_fusion import per_query_of as per_query_of
from ranking_fusion import ranks_of as ranks_of
from ranking_fusion import shipped_config as shipped_config
from ranking_fusion import with_intervals as with_intervals
from record import save

from docsim.indexer.choices import DEFAULT_COLLECTION
from docsim.indexer.cli.common import in_collection
from docsim.indexer.store.db import make_engine
from docsim.search.evaluation.metrics import (
    mean_intervals,
    mean_metrics,
    paired_tests,
    score_runs,
)
from docsim.search.evaluation.runs import (
    MethodSpec,
    excluding_own,
    read_pools,
    read_queries,
    run_queries,
)
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings, VerbatimSettings

logger = logging.getLogger("benchmarks.ranking_cv")
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

SETS = {
    "aila": JudgedSet(
        DATA / "aila2019" / "queries_dev.txt", DATA / "aila2019" / "qrels_dev.txt", None, 1, "text"
    ),
    "csfcube": JudgedSet(
        DATA / "csfcube" / "queries_dev.jsonl",
        DATA / "csfcube" / "qrels_dev.txt",
        DATA / "csfcube" / "pools_dev.json",
        2,
        "facet_text",
    ),
    "ilpcr": JudgedSet(
        DATA / "ilpcr" / "queries_dev.jsonl",
        DATA / "ilpcr" / "qrels_dev.txt",
        None,
        1,
        "text",
        exclude_own="Q(.+)",
    ),
}
# lever -> (method, search-setting overrides); `+stem`: Snowball-stemmed BM25 tokens. The
# plain lexical levers and `hybrid` are today's (bm25s' tokens, no stemming), whatever the
# current default stemmer.
PLAIN = {"bm25": {"stemmer": None}}
STEM = {"bm25": {"stemmer": "english"}}
RARITY = {"query_weighting": "rarity"}
LEVERS = {
    "bm25": ("bm25", PLAIN),
    "bm25-reduced": ("bm25-reduced", PLAIN),
    "bm25-rm3": ("bm25-rm3", PLAIN),
    "bm25+stem": ("bm25", STEM),
    "bm25-reduced+stem": ("bm25-reduced", STEM),
    "bm25-rm3+stem": ("bm25-rm3", STEM),
    "bm25-paragraph": ("bm25-paragraph", PLAIN),
    "bm25-paragraph+stem": ("bm25-paragraph", STEM),
    "sdr": ("sdr", {}),
    "sdr-raw": ("sdr-raw", {}),
    "sdr-window": ("sdr-window", {}),
    "document": ("document", {}),
    "maxsim": ("maxsim", {}),
    "best-sentence": ("best-sentence", {}),
    "ot": ("ot", {}),
    "rprs": ("rprs", {}),  # alone: not in the fusion grid (DENSE), which it would triple
    "hybrid": ("hybrid", PLAIN),
    # issue 56's levers: each query sentence weighted by its rarity, and the default fusion
    # (`fused`, today's default) with `rprs` added or `maxsim` weighted, fixed beforehand
    "rprs+rarity": ("rprs", RARITY),
    "maxsim+rarity": ("maxsim", RARITY),
    "sdr+rarity": ("sdr", RARITY),
    "fused": ("fused", {}),
    "fused+rprs": ("fused", {"fusion": f"{SearchSettings().fusion},rprs:1"}),
    "fused+rarity": ("fused", RARITY),
    # issue 69's levers: BM25 over word shingles of 2 (the default) and 1 to 5 words
    "bm25-shingles": ("bm25-shingles", {}),
    **{
        f"bm25-shingles+n{n}": ("bm25-shingles", {"verbatim": VerbatimSettings(shingle_words=n)})
        for n in (1, 3, 4, 5)
    },
}
BASELINES = ("bm25", "document", "fused", "hybrid")  # each lever's paired tests against these


def lever_runs(name: str, index: str, judged: JudgedSet, cache: Path) -> dict:
    """`{qid: [(doc_id, score), ...]}` of `name` over each query's whole population, on
    `index`: a data directory, or `DATA_DIR@COLLECTION`."""
    folder, _, collection = index.partition("@")
    data_dir = Path(folder)
    path = cache / f"{data_dir.name}{'.' + collection if collection else ''}.{name}.json"
    if path.exists():
        return {q: [tuple(x) for x in r] for q, r in json.loads(path.read_text()).items()}
    method, overrides = LEVERS[name]
    base = QuerySettings(data_dir=data_dir, collection=collection or DEFAULT_COLLECTION)
    engine = make_engine(base.database_url)
    base = in_collection(base, engine)
    settings = base.model_copy(update={"search": base.search.replaced(**overrides)})
    searcher = open_searcher(settings, engine)
    pools = read_pools(judged.pools) if judged.pools else None
    queries = read_queries(judged.queries, judged.query_field)
    if judged.exclude_own:
        queries = excluding_own(queries, judged.exclude_own)
    runs = run_queries(
        searcher, queries, MethodSpec.parse(method), pools, searcher.index.n_documents
    )
    engine.dispose()
    path.write_text(json.dumps(runs))
    return runs


def against_plain(per_lever: dict[str, dict], lever: str, ndcg: str) -> dict[str, dict]:
    """A variant `METHOD+SETTING`'s paired tests against its plain `METHOD` (e.g.
    `maxsim+rarity` against `maxsim`), on MAP and NDCG: `{}` for a plain lever."""
    plain = lever.partition("+")[0]
    if plain == lever or plain not in per_lever:
        return {}
    pair = {lever: per_lever[lever], plain: per_lever[plain]}
    return {
        "vs_plain": paired_tests(pair, plain)[lever],
        "vs_plain_ndcg": paired_tests(pair, plain, ndcg)[lever],
    }


def parse_args() -> argparse.Namespace:
    """The command line's options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--set", action="append", required=True, help="NAME=DATA_DIR or NAME=DATA_DIR@COLLECTION"
    )
    parser.add_argument("--cache", type=Path, default=Path("ranking-cv-cache"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/ranking_cv.json"))
    parser.add_argument("--components", default=",".join(LEXICAL + DENSE))
    parser.add_argument(
        "--objective",
        choices=("min", "mean"),
        default="min",
        help="Combine the sets' gains over BM25 by their minimum (the default must win on "
        "both) or their mean.",
    )
    return parser.parse_args()


def scored_levers(
    judged: JudgedSet, folder: str, cache: Path
) -> tuple[dict[str, dict], dict[str, dict]]:
    """Every lever's runs over `judged`'s queries on index `folder` (`lever_runs`), and its
    per-query metrics by ir_measures at depth `DEPTH`: `(runs, per_lever)`, both by lever."""
    qrels = list(ir_measures.read_trec_qrels(str(judged.qrels)))
    pools = read_pools(judged.pools) if judged.pools else None
    runs, per_lever = {}, {}
    for lever in LEVERS:
        runs[lever] = lever_runs(lever, folder, judged, cache)
        depth = {q: r[:DEPTH] for q, r in runs[lever].items()}
        per_lever[lever] = score_runs(depth, qrels, min_rel=judged.min_rel, pools=pools)
    return runs, per_lever


def lever_figures(name: str, per_lever: dict[str, dict]) -> dict[str, dict]:
    """Each lever's mean metrics on set `name` with their bootstrap intervals, its paired
    tests on MAP and NDCG against each of `BASELINES`, and a variant's against its plain
    method."""
    ndcg = ndcg_metric(name)
    tests = {b: paired_tests(per_lever, b) for b in BASELINES}  # on MAP
    ndcg_tests = {b: paired_tests(per_lever, b, ndcg) for b in BASELINES}
    return {
        lever: {
            "mean": mean_metrics(pq),
            "interval_95": mean_intervals(pq),
            **{f"vs_{b}": tests[b].get(lever) for b in BASELINES},
            **{f"vs_{b}_ndcg": ndcg_tests[b].get(lever) for b in BASELINES},
            **against_plain(per_lever, lever, ndcg),
        }
        for lever, pq in per_lever.items()
    }


def check_fast_metrics(tables: list[QueryTable], per_lever: dict[str, dict], min_rel: int) -> None:
    """Warns of each metric of a lever alone (`bm25`, `sdr`, `document`) that the fast
    metrics (`query_metrics`) give otherwise than ir_measures (score ties?)."""
    for lever in ("bm25", "sdr", "document"):  # the fast metrics equal ir_measures'
        for table in tables:
            mine = query_metrics(table, table.scores[lever][None, :], min_rel)
            theirs = per_lever[lever][table.qid]
            for metric, value in mine.items():
                if abs(float(value[0]) - theirs[metric]) > 1e-6:
                    logger.warning(
                        "%s %s %s: %.6f here, %.6f by ir_measures (score ties?)",
                        lever,
                        table.qid,
                        metric,
                        float(value[0]),
                        theirs[metric],
                    )


def best_config(
    objective: dict[str, np.ndarray],
    baseline: dict[str, np.ndarray],
    combine: str,
    excluded: tuple[str, int] | None = None,
) -> int:
    """The configuration that maximises the objective on every query but `excluded` (a set's
    name and a query's position in it): each set's mean value over BM25's, the sets combined
    by their minimum (`combine` "min") or their mean."""
    gains = []
    for name, table in objective.items():
        keep = np.ones(table.shape[1], bool)
        if excluded is not None and excluded[0] == name:
            keep[excluded[1]] = False
        means = table[:, keep].mean(axis=1)
        gains.append(means / max(baseline[name][keep].mean(), 1e-9))
    combined = np.min(gains, axis=0) if combine == "min" else np.mean(gains, axis=0)
    return int(np.argmax(combined))


def held_out_figures(
    name: str,
    tables: list[QueryTable],
    value: dict[str, np.ndarray],
    picks: list[int],
    chosen_all: int,
    lever_queries: dict[str, dict],
) -> dict:
    """Set `name`'s figures in sample (configuration `chosen_all`) and cross-validated (query
    `i` ranked by configuration `picks[i]`), with paired tests of the latter against `bm25`
    and `hybrid` on MAP and NDCG."""
    cv = {m: [float(value[m][pick, q]) for q, pick in enumerate(picks)] for m in value}
    figures = {
        "in_sample": {m: float(v[chosen_all].mean()) for m, v in value.items()},
        "cross_validated": {m: float(np.mean(v)) for m, v in cv.items()},
        "cross_validated_per_query": {
            t.qid: {m: cv[m][i] for m in cv} for i, t in enumerate(tables)
        },
        "folds_choosing_the_shipped_config": int(sum(p == chosen_all for p in picks)),
        "folds": len(tables),
    }
    cross_validated = figures["cross_validated_per_query"]
    for against in ("bm25", "hybrid"):
        for metric in ("MAP", ndcg_metric(name)):
            pair = {"cv": cross_validated, against: lever_queries[against]}
            figures[f"cv_vs_{against}_{metric}"] = paired_tests(pair, against, metric)["cv"]
    return figures


def fusion_report(
    configs: list[tuple],
    value: dict[str, dict[str, np.ndarray]],
    objective: dict[str, np.ndarray],
    baseline: dict[str, np.ndarray],
    lever_queries: dict[str, dict],
    per_set: dict[str, tuple[JudgedSet, list[QueryTable]]],
    combine: str,
) -> dict:
    """Step 3: the configuration chosen on all queries, and each set's figures in sample and
    by leave-one-query-out (each query ranked by the configuration chosen on the others)."""
    report: dict = {}
    chosen_all = best_config(objective, baseline, combine)
    how, stemmed, weights = configs[chosen_all]
    report["chosen_on_all_queries"] = {
        "normaliser": how,
        "bm25_stemmer": "english" if stemmed else None,
        "weights": weights,
    }
    for name, (_, tables) in per_set.items():
        picks = [best_config(objective, baseline, combine, (name, q)) for q in range(len(tables))]
        report[name] = held_out_figures(
            name, tables, value[name], picks, chosen_all, lever_queries[name]
        )
        logger.info("%s fused in-sample %s", name, report[name]["in_sample"])
        logger.info("%s fused cross-validated %s", name, report[name]["cross_validated"])
    logger.info("chosen on all queries: %s", report["chosen_on_all_queries"])
    return report


def main() -> None:
    args = parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    args.cache.mkdir(parents=True, exist_ok=True)
    components = args.components.split(",")
    report: dict = {"levers": {}, "fusion": {}}
    per_set: dict[str, tuple[JudgedSet, list[QueryTable]]] = {}
    lever_queries: dict[str, dict] = {}  # set -> lever -> per-query metrics (ir_measures)
    for spec in args.set:
        name, _, folder = spec.partition("=")
        judged = SETS[name]
        runs, per_lever = scored_levers(judged, folder, args.cache)
        report["levers"][name] = lever_figures(name, per_lever)
        tables = query_tables(runs, judged)
        per_set[name] = (judged, tables)
        lever_queries[name] = per_lever
        check_fast_metrics(tables, per_lever, judged.min_rel)
        for lever, values in report["levers"][name].items():
            logger.info(
                "%s %-18s %s",
                name,
                lever,
                json.dumps({k: round(v, 4) for k, v in values["mean"].items()}),
            )
    configs = all_configs(components)
    logger.info("Fusing %d configurations", len(configs))
    value = fusion_values(per_set, configs, components)
    objective = {name: objective_of(name, value[name]) for name in value}
    baseline = bm25_baseline(per_set)
    report["fusion"] = fusion_report(
        configs, value, objective, baseline, lever_queries, per_set, args.objective
    )
    report["nested"] = nested_report(
        configs, components, value, objective, baseline, lever_queries, per_set
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, report)
    logger.info("Saved %s", args.out)


if __name__ == "__main__":
    main()
