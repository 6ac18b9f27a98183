"""What storing the vectors as int8 rows changes in rankings: the default method's top 10 on a
version with int8 rows against the same vectors stored as float16, and each against the
exhaustive float32 ranking of the float16 rows (the reference of issue 54's fidelity goal).

    python benchmarks/stored_rows_fidelity.py --float16-dir F16_DATA_DIR --int8-dir I8_DATA_DIR
        --queries queries_dev.txt [--by-id 40] [--seed 0]
        [--out benchmarks/results/stored_rows_fidelity.json]

The two data directories hold the same vectors: the int8 one is the float16 one reindexed
with `DOCSIM_INDEX__STORED_ROWS=int8` (`docsim reindex current`: every vector reused, nothing
encoded). Queries: `--by-id` indexed documents drawn at random (each excluded from its own
ranking) and the posted queries of `--queries` (AILA's text format or JSONL), each through
`Searcher.similar` (the API's code path). Reported per kind of query: the mean and least
top-10 overlap of each pair of rankings.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from record import save

from docsim.indexer.store.db import make_engine
from docsim.protocol.requests import SimilarOptions
from docsim.search.evaluation.runs import build_query, read_queries
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings
from docsim.search.types import Query

PAIRS = {  # name -> (ranking, ranking)
    "int8_vs_float16": ("int8", "float16"),
    "int8_vs_float32": ("int8", "float32"),
    "float16_vs_float32": ("float16", "float32"),
}


def searcher_of(data_dir: Path, **search: Any) -> Searcher:
    settings = QuerySettings(data_dir=data_dir, search=search)
    return open_searcher(settings, make_engine(settings.database_url))


def top10(searcher: Searcher, query: Query) -> list[str]:
    options = SimilarOptions(top_k=10, matches_per_result=0)  # the default method
    return [hit.document_id for hit in searcher.similar(query, options).results]


def overlaps(searchers: dict[str, Searcher], queries: dict[str, Any], by_id: bool) -> dict:
    """Per pair of `PAIRS`: the mean and least top-10 overlap over `queries`."""
    found: dict[str, list[float]] = {pair: [] for pair in PAIRS}
    for item in queries.values():
        tops = {
            name: top10(s, s.query_from_index(item) if by_id else build_query(s, item))
            for name, s in searchers.items()
        }
        for pair, (a, b) in PAIRS.items():
            found[pair].append(len(set(tops[a]) & set(tops[b])) / 10)
    return {
        pair: {"mean": round(float(np.mean(v)), 4), "least": min(v), "queries": len(v)}
        for pair, v in found.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--float16-dir", type=Path, required=True)
    parser.add_argument("--int8-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--by-id", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/stored_rows_fidelity.json")
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    searchers = {
        "float32": searcher_of(args.float16_dir, sentence_store="float32"),
        "float16": searcher_of(args.float16_dir),
        "int8": searcher_of(args.int8_dir),
    }
    ids = list(searchers["float16"].index.external_ids)
    drawn = np.random.default_rng(args.seed).choice(len(ids), args.by_id, replace=False)
    posted = {query.qid: query for query in read_queries(args.queries)}
    figures = {
        "by_id": overlaps(searchers, {ids[i]: ids[i] for i in drawn.tolist()}, by_id=True),
        "posted": overlaps(searchers, posted, by_id=False),
    }
    print(json.dumps(figures, indent=2))
    save(args.out, figures)


if __name__ == "__main__":
    main()
