"""What cutting a long query to its strongest BM25 terms (`bm25.query_terms`) saves and what it
changes, on indexed documents as queries (the long queries: a judgment by id).

    python -m benchmarks bm25_query_terms --data-dir DIR [--by-id 40] [--caps 64 128 256 512]
        [--out benchmarks/results/bm25_query_terms.json]

A searcher over the active version as the service opens it, BM25 built first. For each cap
(and the query kept whole, the reference), each of `--by-id` indexed documents (a seeded
choice) is ranked by `bm25-rm3` (the default fusion's lexical part) and by the default method
in the mode `auto` picks, the query's source excluded. Reported per cap: the postings the
lexical first pass reads (each kept term's document frequency, summed), `bm25-rm3`'s
milliseconds (each query scored twice, the second timed), and the top-10 and top-100
overlap of both rankings with the uncapped ones (mean and least). Quality on labelled
queries is `docsim evaluate`'s (docs/serving.md); AILA's posted queries hold at most 270
distinct terms.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections import Counter
from pathlib import Path

import numpy as np
from record import save

from docsim.indexer.store.db import make_engine
from docsim.protocol.choices import Method
from docsim.protocol.requests import SimilarOptions
from docsim.search.lexical.query_terms import strongest_terms
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings
from docsim.search.types import Query

logger = logging.getLogger("benchmarks.bm25.query_terms")


def with_cap(searcher: Searcher, cap: int) -> Searcher:
    """`searcher` over the same index, postings and compressed level, its cap `cap`."""
    changed = Searcher(
        searcher.index,
        searcher.encoder,
        searcher.splitter,
        searcher.engine,
        searcher.settings.replaced(bm25={"query_terms": cap}),
        scan=searcher.context.scan,
    )
    changed.context.postings = searcher.context.postings  # built once
    changed.context.centroids = searcher.context.centroids
    return changed


def ranked(searcher: Searcher, query: Query, method: Method | None, k: int) -> list[str]:
    options = SimilarOptions(top_k=k, method=method, matches_per_result=0)
    return [h.document_id for h in searcher.similar(query, options).results]


def overlap(found: list[list[str]], reference: list[list[str]], k: int) -> dict:
    shares = [len(set(a[:k]) & set(b[:k])) / k for a, b in zip(found, reference, strict=True)]
    return {"mean": statistics.mean(shares), "least": min(shares)}


def measure(searcher: Searcher, queries: list[Query], cap: int) -> tuple[dict, dict]:
    """One cap's figures, and its rankings (by method)."""
    capped = with_cap(searcher, cap)
    bm25 = searcher.context.postings.documents()
    postings, distinct, timings = [], [], []
    rankings: dict = {"bm25-rm3": [], "default": []}
    for query in queries:
        tokens = bm25.tokens(query.bm25_text)
        idf = {t: bm25.idf(t) for t in set(tokens)}
        kept = Counter(strongest_terms(tokens, idf, cap))
        distinct.append(len(kept))
        postings.append(sum(bm25.document_frequency(t) for t in kept))
        ranked(capped, query, Method.bm25_rm3, 100)  # warm: each term's weights
        started = time.perf_counter()
        rankings["bm25-rm3"].append(ranked(capped, query, Method.bm25_rm3, 100))
        timings.append((time.perf_counter() - started) * 1000)
        rankings["default"].append(ranked(capped, query, None, 100))
    return {
        "cap": cap,
        "distinct_terms_p50": statistics.median(distinct),
        "postings_p50": statistics.median(postings),
        "postings_p95": float(np.percentile(postings, 95)),
        "bm25_rm3_p50_ms": statistics.median(timings),
        "bm25_rm3_p95_ms": float(np.percentile(timings, 95)),
    }, rankings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--by-id", type=int, default=40)
    parser.add_argument("--caps", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/bm25_query_terms.json")
    )
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = QuerySettings(data_dir=args.data_dir)
    searcher = open_searcher(settings, make_engine(settings.database_url))
    searcher.warm()
    searcher.context.postings.documents()
    rng = np.random.default_rng(args.seed)
    chosen = rng.choice(searcher.index.n_documents, size=args.by_id, replace=False)
    queries = [searcher.query_from_index(searcher.index.external_ids[d]) for d in chosen]
    whole_cap = 1 << 30
    reference, reference_rankings = measure(searcher, queries, whole_cap)
    reference["cap"] = None
    rows = [reference]
    for cap in sorted(args.caps, reverse=True):
        row, rankings = measure(searcher, queries, cap)
        for name, found in rankings.items():
            row[f"{name}_top10_overlap"] = overlap(found, reference_rankings[name], 10)
            row[f"{name}_top100_overlap"] = overlap(found, reference_rankings[name], 100)
        row["bm25_rm3_ms_ratio"] = row["bm25_rm3_p50_ms"] / reference["bm25_rm3_p50_ms"]
        rows.append(row)
        logger.info("%s", row)
    figures = {
        "data_dir": str(args.data_dir),
        "documents": searcher.index.n_documents,
        "queries": args.by_id,
        "caps": rows,
    }
    save(args.out, figures)
    print(rows)


if __name__ == "__main__":
    main()
