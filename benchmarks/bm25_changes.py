"""BM25 in docsim (`search.lexical.bm25`) against bm25s, on real judgments.

    python benchmarks/bm25_changes.py [--corpus DIR] [--documents N] [--queries FILE]
        [--changes 20] [--out benchmarks/results/bm25_changes.json]

Measured in one run on the same texts: building the index (docsim's postings vs bm25s'
precomputed score matrix), answering the AILA development queries (scores of every document),
and following a document change: replacing one document through `Bm25Index.with_changes`
against rebuilding from scratch (what a new searcher did before). It also checks that the two
give the same scores (bm25s' arithmetic, to the bit) and prints ratios against bm25s.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import bm25s
import numpy as np
from record import save

from docsim.search.lexical.bm25 import Bm25Index
from docsim.search.lexical.tokens import tokenize

logger = logging.getLogger("benchmarks.bm25_changes")
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019"


def timed(function):  # noqa: ANN001, ANN201
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started


def bm25s_scores(retriever: bm25s.BM25, query: str, n: int) -> np.ndarray:
    known = [t for t in tokenize([query])[0] if t in retriever.vocab_dict]
    return np.asarray(retriever.get_scores(known), np.float64) if known else np.zeros(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=SHARED / "casedocs")
    parser.add_argument("--documents", type=int, default=0, help="0: every document")
    parser.add_argument("--queries", type=Path, default=SHARED / "queries_dev.txt")
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/bm25_changes.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    files = sorted(args.corpus.glob("*.txt"))
    if args.documents:
        files = files[: args.documents]
    texts = [f.read_text(encoding="utf-8", errors="replace") for f in files]
    queries = [line.split("||", 1)[1] for line in args.queries.read_text().splitlines() if line]
    ids = np.arange(len(texts), dtype=np.int64)
    logger.info(
        "%d documents (%.1f M characters), %d queries",
        len(texts),
        sum(map(len, texts)) / 1e6,
        len(queries),
    )

    reference = bm25s.BM25()
    _, bm25s_build = timed(
        lambda: reference.index(
            bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False
        )
    )
    index, docsim_build = timed(lambda: Bm25Index.build(ids.tolist(), texts))

    expected, bm25s_query = timed(lambda: [bm25s_scores(reference, q, len(texts)) for q in queries])
    found, docsim_query = timed(lambda: [index.scores(q) for q in queries])
    identical = all(np.array_equal(a, b) for a, b in zip(expected, found, strict=True))

    rng = np.random.default_rng(0)
    change_seconds, rebuild_seconds = [], []
    current, current_ids, current_texts = index, ids, dict(zip(ids.tolist(), texts, strict=True))
    for step in range(args.changes):
        old = int(rng.choice(current_ids))
        new = int(current_ids.max()) + 1
        text = current_texts.pop(old) + f" amended {step}"
        current_texts[new] = text
        current, seconds = timed(lambda: current.with_changes([old], [(new, text)]))  # noqa: B023
        change_seconds.append(seconds)
        current_ids = np.array(sorted(current_texts), dtype=np.int64)
        rebuilt, seconds = timed(
            lambda: Bm25Index.build(current_ids.tolist(), [current_texts[d] for d in current_ids])  # noqa: B023
        )
        rebuild_seconds.append(seconds)
    same_after = all(np.array_equal(current.scores(q), rebuilt.scores(q)) for q in queries[:5])
    figures = {
        "documents": len(texts),
        "characters": sum(map(len, texts)),
        "queries": len(queries),
        "identical_scores_to_bm25s": identical,
        "changed_equals_rebuilt": same_after,
        "build_seconds": {"bm25s": bm25s_build, "docsim": docsim_build},
        "build_ratio_docsim_over_bm25s": docsim_build / bm25s_build,
        "query_ms_mean": {
            "bm25s": 1000 * bm25s_query / len(queries),
            "docsim": 1000 * docsim_query / len(queries),
        },
        "query_ratio_docsim_over_bm25s": docsim_query / bm25s_query,
        "one_document_change_ms_median": 1000 * statistics.median(change_seconds),
        "rebuild_ms_median": 1000 * statistics.median(rebuild_seconds),
        "speedup_change_over_rebuild": statistics.median(rebuild_seconds)
        / statistics.median(change_seconds),
    }
    print(json.dumps(figures, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, figures)
    logger.info("Saved %s", args.out)


if __name__ == "__main__":
    main()
