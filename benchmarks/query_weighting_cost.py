"""What weighting each query sentence by its rarity (`query_weighting=rarity`) costs a query of
`sdr`, `maxsim` and `rprs`, against the same methods unweighted, in one run.

    python -m benchmarks query_weighting_cost --data-dir DIR [--queries FILE] [--repeats 2]
        [--out benchmarks/results/query_weighting_cost.json]

(default queries: the AILA 2019 development queries in ../shared/data)

Two searchers over one version, opened as the service opens them (`uniform` and `rarity`),
rank every query by each method in turn, interleaved (`Searcher.similar`, exhaustive, no
paragraph pairs; each query encoded once beforehand, its vectors copied before each request so
that no request finds the weights another computed). Reported: p50 and p95 per method and
setting, the p50 ratio of `rarity` to `uniform`, and the weights' own step (the sentence
level's search) alone.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from dataclasses import replace
from pathlib import Path

from record import save

from docsim.indexer.cli.common import in_collection
from docsim.indexer.store.db import make_engine
from docsim.protocol.choices import Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.evaluation.runs import build_query, read_queries
from docsim.search.query_weights import collection_rarity
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings
from docsim.search.types import Query

logger = logging.getLogger("benchmarks.query_weighting_cost")
AILA_QUERIES = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "queries_dev.txt"
)
METHODS = (Method.sdr, Method.maxsim, Method.rprs)


def fresh(query: Query) -> Query:
    """`query` with its own copy of the sentence vectors: no weights kept for it yet."""
    return replace(query, sentence_vectors=query.sentence_vectors.clone())


def timed_ms(searcher: Searcher, query: Query, method: Method) -> float:
    options = SimilarOptions(
        top_k=10, method=method, mode=ScoringMode.exhaustive, matches_per_result=0
    )
    start = time.perf_counter()
    searcher.similar(fresh(query), options)
    return (time.perf_counter() - start) * 1000


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": statistics.median(ordered),
        "p95_ms": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/query_weighting_cost.json")
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    base = QuerySettings(data_dir=args.data_dir)
    engine = make_engine(base.database_url)
    base = in_collection(base, engine)
    rarity = base.search.model_copy(update={"query_weighting": "rarity"})
    searchers = {  # each as the service opens it (its compressed sentence level and all)
        "uniform": open_searcher(base, engine),
        "rarity": open_searcher(base.model_copy(update={"search": rarity}), engine),
    }
    uniform = searchers["uniform"]
    queries = [build_query(uniform, q) for q in read_queries(args.queries)]
    times: dict[str, dict[str, list[float]]] = {
        m.value: {s: [] for s in searchers} for m in METHODS
    }
    step: list[float] = []
    for _ in range(args.repeats):
        for query in queries:
            for method in METHODS:
                for name, searcher in searchers.items():
                    times[method.value][name].append(timed_ms(searcher, query, method))
            start = time.perf_counter()
            collection_rarity(
                uniform.index, query.sentence_vectors, base.search.rprs.sentences, None
            )
            step.append((time.perf_counter() - start) * 1000)
    figures: dict = {
        "queries": len(queries),
        "repeats": args.repeats,
        "sentences": len(uniform.index.ids["sentence"]),
        "query_sentences_mean": statistics.mean(len(q.sentence_vectors) for q in queries),
        "weights_step": summary(step),
        "methods": {},
    }
    for method, by_setting in times.items():
        found = {name: summary(values) for name, values in by_setting.items()}
        found["p50_ratio"] = found["rarity"]["p50_ms"] / found["uniform"]["p50_ms"]
        figures["methods"][method] = found
        logger.info("%s %s", method, found)
    logger.info("weights' step alone: %s", figures["weights_step"])
    save(args.out, figures)
    engine.dispose()


if __name__ == "__main__":
    main()
