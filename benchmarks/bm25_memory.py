"""What BM25's document postings hold in memory over a published version's texts, against
the same postings held as before issue 54 (int64 ids and int32 counts per posting; each
document's distinct tokens as a tuple of strings and int32 counts), built in the same run.

    python benchmarks/bm25_memory.py --data-dir AILA_DATA_DIR [--copies 4]
        [--out results/bm25_memory.json]

Bytes are Python's own allocations (`tracemalloc`) retained by the index after its build;
both layouts hold the same tokens, counts and scores (checked on a few documents' texts).
Each token costs the same fixed bytes in both (its dict entry and its posting's arrays),
which dominate at AILA's size; `--copies K` indexes the texts K times (as K documents each)
so that the postings grow and the tokens do not, and the bytes of a posting itself show in
the difference between the two sizes (`marginal_bytes_per_posting`). The documents' ids are a
version's (`(version_id << 40) + ordinal`), as a served index holds them.
"""

from __future__ import annotations

import argparse
import gc
import logging
import time
import tracemalloc
from pathlib import Path

import numpy as np
from record import save

from docsim.indexer.store.db import make_engine
from docsim.indexer.store.reader import stored_documents
from docsim.indexer.store.versions import active_version
from docsim.search.lexical.bm25 import Bm25Index
from docsim.search.settings import QuerySettings

logger = logging.getLogger("benchmarks.bm25_memory")
VERSION_BASE = 1 << 40  # version 1's first document id


def widened(index: Bm25Index) -> Bm25Index:
    """`index` in the layout before: wide arrays, each document's tokens as strings."""
    postings = {
        token: (index.holders(token), counts.astype(np.int32))
        for token, (_, counts) in index._postings.items()
    }
    terms = {d: tuple(index._vocabulary.decoded(t)) for d, t in index._terms.items()}
    counts = {d: c.astype(np.int32) for d, c in index._counts.items()}
    return Bm25Index(postings, dict(index._lengths), terms, counts, index.stemmer)  # type: ignore[arg-type]


def retained(build: object) -> tuple[object, int, float]:
    """What `build()` returns, the bytes it keeps allocated, and its seconds."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    made = build()  # type: ignore[operator]
    seconds = time.perf_counter() - started
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return made, kept, seconds


def measured(texts: list[str]) -> dict:
    """Both layouts' retained bytes over `texts` (version 1's ids)."""
    ids = [VERSION_BASE + i for i in range(len(texts))]
    compact, compact_bytes, seconds = retained(lambda: Bm25Index.build(ids, texts))
    assert isinstance(compact, Bm25Index)
    wide, wide_bytes, _ = retained(lambda: widened(compact))
    assert isinstance(wide, Bm25Index)
    for text in texts[:5]:
        np.testing.assert_array_equal(compact.scores(text), wide.scores(text))
    postings = sum(len(p[0]) for p in compact._postings.values())
    return {
        "documents": len(texts),
        "postings": postings,
        "tokens": len(compact._postings),
        "build_seconds": round(seconds, 1),
        "bytes": {"before": wide_bytes, "compact": compact_bytes},
        "bytes_per_posting": {
            "before": round(wide_bytes / postings, 2),
            "compact": round(compact_bytes / postings, 2),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/bm25_memory.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = QuerySettings(data_dir=args.data_dir)
    engine = make_engine(settings.database_url)
    try:
        version = active_version(engine)
        documents = list(stored_documents(engine, version.version_id))
    finally:
        engine.dispose()
    texts = [doc.text for doc in documents]
    sizes = {}
    for copies in (1, args.copies):
        sizes[copies] = measured(texts * copies)
        logger.info("%d copies: %s", copies, sizes[copies])
    one, many = sizes[1], sizes[args.copies]
    added = many["postings"] - one["postings"]
    facts = {
        "documents": len(documents),
        "sizes": {str(k): v for k, v in sizes.items()},
        "marginal_bytes_per_posting": {
            layout: round((many["bytes"][layout] - one["bytes"][layout]) / added, 2)
            for layout in ("before", "compact")
        },
    }
    marginal = facts["marginal_bytes_per_posting"]
    facts["marginal_ratio"] = round(marginal["compact"] / marginal["before"], 3)
    print(save(args.out, facts))


if __name__ == "__main__":
    main()
