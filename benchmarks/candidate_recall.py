"""Recall of candidate mode's first pass: how much of exhaustive `sdr`'s top 10 is among the
documents each generator passes on to exact scoring, and what the pass costs.

    python benchmarks/candidate_recall.py --data-dir AILA-INDEX --corpus AILA/casedocs
        [--documents 40] [--seed 1] [--out benchmarks/results/candidate_recall.json]

Queries are not the development queries: `--documents` judgments drawn with `--seed`, each
used twice, posted (300 words from the middle of its text, about 10 sentences, as a user
would paste a passage) and by id (the whole judgment, its own document left out). For each:
exhaustive `sdr`'s top 10, then the candidates of the cells and residual codes (the default
generator, with the service's settings), of the nearest units in the FAISS levels
(`neighbours`), and of the compressed level's approximate `maxsim` over every document (the
best `candidates.max_documents`), each timed alone. Reported: mean and least recall, p50 ms.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from record import save

from docsim.indexer.store.db import make_engine
from docsim.indexer.text.corpus import json_document
from docsim.models.kernels.alignment import maxsim_scores
from docsim.protocol.choices import Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.candidates.centroids import CentroidCandidates, searched
from docsim.search.candidates.neighbours import retrieve_candidates
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings
from docsim.search.types import Query

logger = logging.getLogger("benchmarks.candidate_recall")


CandidateGenerator = Callable[[Query, np.ndarray], np.ndarray]  # (query, allowed) -> positions


def parse_args() -> argparse.Namespace:
    """The command line's options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True, help="the judgments' text files")
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/candidate_recall.json")
    )
    return parser.parse_args()


def first_passes(
    searcher: Searcher, cells: CentroidCandidates, search: SearchSettings
) -> dict[str, CandidateGenerator]:
    """Each generator of candidates by name: the cells and residual codes, the nearest units
    in the FAISS levels, and (when the compressed level is held) its approximate `maxsim`
    over every allowed document, the best `candidates.max_documents` kept."""
    scan = searcher.context.scan
    index = searcher.index

    def by_scan(query: Query, allowed: np.ndarray) -> np.ndarray:
        assert scan is not None
        scores = maxsim_scores(scan.best(query.sentence_vectors)).numpy()[allowed]
        return allowed[np.argsort(-scores, kind="stable")[: search.candidates.max_documents]]

    generators: dict[str, CandidateGenerator] = {
        "cells": lambda query, allowed: searched(cells, query.sentence_vectors, allowed, search),
        "neighbours": lambda query, allowed: retrieve_candidates(
            index, searcher.context.sentence_doc, query, allowed, search
        ),
    }
    if scan is not None:
        generators["compressed level, every document"] = by_scan
    return generators


def judgment_queries(
    searcher: Searcher, corpus: Path, position: int, every: np.ndarray
) -> dict[str, tuple[Query, np.ndarray]]:
    """The judgment at `position` as two queries, each with the documents it may find:
    `posted` (300 words from the middle of its text, every document) and `by id` (the whole
    judgment, its own document left out)."""
    external = searcher.index.external_ids[position]
    words = (corpus / f"{external}.txt").read_text().split()
    middle = " ".join(words[len(words) // 3 : len(words) // 3 + 300])
    return {
        "posted": (
            searcher.query_from_source(json_document({"id": "q", "text": middle})),
            every,
        ),
        "by id": (searcher.query_from_index(external), every[every != position]),
    }


def measure_recall(
    searcher: Searcher, generators: dict[str, CandidateGenerator], corpus: Path, chosen: np.ndarray
) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """`{kind: {generator: [(recall, ms), ...]}}`: for each chosen judgment as each kind of
    query, the share of exhaustive `sdr`'s top 10 among each generator's candidates, and the
    generator's milliseconds."""
    every = np.arange(searcher.index.n_documents)
    found: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for position in chosen:
        queries = judgment_queries(searcher, corpus, position, every)
        for kind, (query, allowed) in queries.items():
            options = SimilarOptions(
                top_k=10, method=Method.sdr, mode=ScoringMode.exhaustive, matches_per_result=0
            )
            top = {
                searcher.position(h.document_id) for h in searcher.similar(query, options).results
            }
            for name, generate in generators.items():
                started = time.perf_counter()
                candidates = set(generate(query, allowed).tolist())
                elapsed = (time.perf_counter() - started) * 1000
                found.setdefault(kind, {}).setdefault(name, []).append(
                    (len(top & candidates) / max(1, len(top)), elapsed)
                )
    return found


def main() -> None:
    args = parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = QuerySettings(data_dir=args.data_dir)
    searcher = open_searcher(settings, make_engine(settings.database_url))
    started = time.perf_counter()
    assert searcher.context.centroids is not None
    cells = searcher.context.centroids.get()
    fit_seconds = time.perf_counter() - started
    index = searcher.index
    generators = first_passes(searcher, cells, settings.search)
    chosen = np.random.default_rng(args.seed).choice(
        index.n_documents, size=args.documents, replace=False
    )
    found = measure_recall(searcher, generators, args.corpus, chosen)
    result: dict = {
        "data_dir": str(args.data_dir),
        "documents": args.documents,
        "seed": args.seed,
        "cells": cells.cells.postings.n_cells,
        "cells_fit_seconds": fit_seconds,
        "cells_bytes_per_sentence": cells.memory_bytes() / max(1, len(index.ids["sentence"])),
        "queries": {},
    }
    for kind, rows in found.items():
        result["queries"][kind] = {
            name: {
                "recall_mean": statistics.mean(r for r, _ in values),
                "recall_min": min(r for r, _ in values),
                "p50_ms": statistics.median(ms for _, ms in values),
            }
            for name, values in rows.items()
        }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
