"""What a ranking costs exhaustively and in candidate mode, as the query grows: the figures
`DOCSIM_SEARCH__EXHAUSTIVE__MAX_PRODUCTS` (the `auto` mode's budget) is set from.

    python benchmarks/candidate_cost.py --data-dir DIR [--by-id 60] [--method fused --method sdr]
        [--out benchmarks/results/candidate_cost.json]

A searcher over the active version as the service opens it (the default sentence store),
then `--by-id` indexed documents (a seeded choice: their lengths span the collection's) as
queries. For each, each method is timed in `exhaustive` mode and in `candidate` mode (the
service's default generator, the cells fitted first and their fitting timed on its own), and
the two top-10s compared; then in `auto` mode (the service's choice, timed and recorded).
Reported: per query its sentences, the products (its sentences
times the collection's) and each mode's milliseconds; a least-squares line of each mode's
milliseconds on the products, and the products where the two lines cross; the top-10
overlap of candidate mode with exhaustive scoring (mean and least).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import numpy as np
from record import save

from docsim.indexer.store.db import make_engine
from docsim.protocol.choices import Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings
from docsim.search.types import Query

logger = logging.getLogger("benchmarks.candidate_cost")


def line(x: list[float], y: list[float]) -> tuple[float, float]:
    """Intercept and slope of the least-squares line of `y` on `x`."""
    slope, intercept = np.polyfit(np.asarray(x, dtype=float), np.asarray(y, dtype=float), 1)
    return float(intercept), float(slope)


def parse_args() -> argparse.Namespace:
    """The command line's options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--by-id", type=int, default=60)
    parser.add_argument("--method", action="append", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/candidate_cost.json"))
    return parser.parse_args()


def query_row(searcher: Searcher, query: Query, method: Method, n_sentences: int) -> dict:
    """One query's figures under `method`: its sentences and products, the milliseconds of
    each mode (`exhaustive` and `candidate` after a warm-up call, then `auto` and the mode it
    chose), and the top-10 overlap of candidate mode with exhaustive scoring."""
    row: dict = {
        "sentences": len(query.sentence_vectors),
        "products": len(query.sentence_vectors) * n_sentences,
    }
    tops = {}
    for mode in (ScoringMode.exhaustive, ScoringMode.candidate):
        options = SimilarOptions(top_k=10, method=method, mode=mode, matches_per_result=0)
        searcher.similar(query, options)  # warm: SDR's statistics of the source
        started = time.perf_counter()
        found = searcher.similar(query, options)
        row[f"{mode.value}_ms"] = (time.perf_counter() - started) * 1000
        tops[mode] = [h.document_id for h in found.results]
    options = SimilarOptions(top_k=10, method=method, matches_per_result=0)
    started = time.perf_counter()
    row["auto_mode"] = searcher.similar(query, options).mode
    row["auto_ms"] = (time.perf_counter() - started) * 1000
    row["top10_overlap"] = (
        len(set(tops[ScoringMode.exhaustive]) & set(tops[ScoringMode.candidate])) / 10
    )
    return row


def summarise(rows: list[dict], exhaustive_max_products: int) -> dict:
    """One method's summary over its query rows: each mode's p50 (and `auto`'s p95 and how
    often it chose candidate mode), the least-squares lines of milliseconds on products and
    where they cross, and the top-10 overlap (mean and least)."""
    products = [r["products"] for r in rows]
    fits = {
        mode: line(products, [r[f"{mode}_ms"] for r in rows])
        for mode in ("exhaustive", "candidate")
    }
    (a0, b0), (a1, b1) = fits["exhaustive"], fits["candidate"]
    overlaps = [r["top10_overlap"] for r in rows]
    return {
        "exhaustive_p50_ms": statistics.median(r["exhaustive_ms"] for r in rows),
        "candidate_p50_ms": statistics.median(r["candidate_ms"] for r in rows),
        "auto_p50_ms": statistics.median(r["auto_ms"] for r in rows),
        "auto_p95_ms": float(np.percentile([r["auto_ms"] for r in rows], 95)),
        "auto_candidate_share": statistics.mean(r["auto_mode"] == "candidate" for r in rows),
        "exhaustive_max_products": exhaustive_max_products,
        "lines_ms_on_products": {
            mode: {"intercept": a, "slope": b} for mode, (a, b) in fits.items()
        },
        "crossing_products": (a1 - a0) / (b0 - b1) if b0 != b1 else None,
        "top10_overlap": {"mean": statistics.mean(overlaps), "min": min(overlaps)},
    }


def main() -> None:
    args = parse_args()
    methods = [Method(m) for m in (args.method or ["fused", "sdr"])]
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = QuerySettings(data_dir=args.data_dir)
    searcher = open_searcher(settings, make_engine(settings.database_url))
    searcher.warm()
    assert searcher.context.centroids is not None
    started = time.perf_counter()
    cells = searcher.context.centroids.get()
    fit_seconds = time.perf_counter() - started
    n_sentences = len(searcher.index.ids["sentence"])
    rng = np.random.default_rng(args.seed)
    chosen = rng.choice(searcher.index.n_documents, size=args.by_id, replace=False)
    queries = [searcher.query_from_index(searcher.index.external_ids[d]) for d in chosen]
    result: dict = {
        "data_dir": str(args.data_dir),
        "sentence_store": settings.search.sentence_store,
        "sentences": n_sentences,
        "documents": searcher.index.n_documents,
        "cells": cells.cells.postings.n_cells,
        "cells_fit_seconds": fit_seconds,
        "cells_bytes_per_sentence": cells.memory_bytes() / max(1, n_sentences),
        "candidate_generator": settings.search.candidates.generator,
        "candidate_max_documents": settings.search.candidates.max_documents,
        "candidate_probe": settings.search.candidates.probe,
        "candidate_refine": settings.search.candidates.refine,
        "candidate_refine_probe": settings.search.candidates.refine_probe,
        "candidate_refine_products": settings.search.candidates.refine_products,
        "methods": {},
    }
    for method in methods:
        rows = [query_row(searcher, query, method, n_sentences) for query in queries]
        summary = summarise(rows, settings.search.exhaustive.max_products)
        result["methods"][method.value] = {"summary": summary, "queries": rows}
        logger.info("%s: %s", method.value, json.dumps(summary))
    print(json.dumps({m: r["summary"] for m, r in result["methods"].items()}, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
