"""`granularity=paragraph` by id on a real index, with the paragraph level in float32 (a FAISS
Flat index) and mapped and compressed (its scan): p50/p95 and whether the top-10 lists agree.

    python benchmarks/paragraph_search.py --data-dir DIR
        [--out benchmarks/results/paragraph_search.json]

20 indexed documents (every 150th) as queries, `sdr`'s paragraph search, in this process.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from record import save

from docsim.indexer.store.db import make_engine
from docsim.protocol.answers import UnitResult
from docsim.protocol.choices import Granularity, Method
from docsim.protocol.requests import SimilarOptions
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/paragraph_search.json")
    )
    args = parser.parse_args()
    tops: dict[str, list] = {}
    result: dict = {}
    for store in ("float32", "compressed"):
        settings = QuerySettings(
            data_dir=args.data_dir, search=SearchSettings(sentence_store=store)
        )
        searcher = open_searcher(settings, make_engine(settings.database_url))
        ids = searcher.index.external_ids[::150][:20]
        options = SimilarOptions(top_k=10, method=Method.sdr, granularity=Granularity.paragraph)
        searcher.similar(searcher.query_from_index(ids[0]), options)  # warm-up
        times, tops[store] = [], []
        for document_id in ids:
            query = searcher.query_from_index(document_id)
            started = time.perf_counter()
            found = searcher.similar(query, options)
            times.append((time.perf_counter() - started) * 1000)
            units = [h for h in found.results if isinstance(h, UnitResult)]
            tops[store].append([(h.document_id, h.unit_id) for h in units])
        result[store] = {
            "p50_ms": float(np.percentile(times, 50)),
            "p95_ms": float(np.percentile(times, 95)),
        }
    same = [a == b for a, b in zip(tops["float32"], tops["compressed"], strict=True)]
    result["identical_top10_share"] = float(np.mean(same))
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
