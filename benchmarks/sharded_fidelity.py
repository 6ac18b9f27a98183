"""How far compressed shards rank as the float32 level does: the same version ranked in one
process with float32 sentences, and on shards that compress theirs (in this process, the
shards' own code, `shards.in_process`), for the posted development queries and for indexed
documents as queries.

    python benchmarks/sharded_fidelity.py --data-dir DIR [--shards 2] [--by-id 20]
        [--queries FILE] [--methods fused maxsim]
        [--out benchmarks/results/sharded_fidelity.json]

Each compressed shard projects its own sentences (`ScanShape` from the search settings) on
the basis fitted on the whole collection and estimates every document of its range from them;
the service rescores the `rescore_depth` best of all exactly on the shards, and a fusion
then refines its own best there. Reported per method and query set: the
top-10 overlap with float32 (mean and least) and both p50s (in-process shards run one after
the other, so the time is a sum, not a sharded service's latency: `load.py --shards` measures
that).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import numpy as np
from growth import AILA_QUERIES, query_texts  # benchmarks/growth.py: run as a script
from record import save

from docsim.indexer.store.db import make_engine
from docsim.indexer.text.corpus import json_document
from docsim.protocol.choices import Method
from docsim.protocol.requests import SimilarOptions
from docsim.search.searcher import Searcher
from docsim.search.served.sentence_scan import ScanShape
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings
from docsim.search.shards.coordinator import ShardedSdr
from docsim.search.shards.cuts import shards_of
from docsim.search.shards.shard import in_process
from docsim.search.types import Query

logger = logging.getLogger("benchmarks.sharded_fidelity")


def ranked(searcher: Searcher, query: Query, method: Method) -> tuple[list[str], float]:
    started = time.perf_counter()
    options = SimilarOptions(top_k=10, method=method, matches_per_result=0)
    found = searcher.similar(query, options).results
    return [h.document_id for h in found], (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--by-id", type=int, default=20)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--methods", nargs="+", default=["fused", "maxsim"])
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/sharded_fidelity.json")
    )
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = QuerySettings(
        data_dir=args.data_dir, search=SearchSettings(sentence_store="float32")
    )
    engine = make_engine(settings.database_url)
    exact = open_searcher(settings, engine)
    search = settings.search
    sharded = Searcher(exact.index, exact.encoder, exact.splitter, engine, search)
    shape = ScanShape(search.scan.dimensions, search.scan.group, search.seed)
    started = time.perf_counter()
    shards = shards_of(exact.index, sharded.tiebreak, args.shards, shape)
    logger.info("%d shards compressed in %.1f s", args.shards, time.perf_counter() - started)
    sharded.use_shards(
        ShardedSdr(in_process(shards), args.shards, sharded.tiebreak, compressed=True)
    )
    posted = [
        exact.query_from_source(json_document({"id": f"q{i}", "text": text}))
        for i, text in enumerate(query_texts(args.queries))
    ]
    ids = exact.index.external_ids
    drawn = np.random.default_rng(0).choice(len(ids), min(args.by_id, len(ids)), replace=False)
    by_id = [exact.query_from_index(ids[int(i)]) for i in np.sort(drawn)]
    result: dict = {"shards": args.shards, "scan": shape.__dict__, "methods": {}}
    for name in args.methods:
        method = Method(name)
        rows = {}
        for kind, queries in (("posted", posted), ("by_id", by_id)):
            overlaps, exact_ms, sharded_ms = [], [], []
            for query in queries:
                reference, spent = ranked(exact, query, method)
                exact_ms.append(spent)
                found, spent = ranked(sharded, query, method)
                sharded_ms.append(spent)
                overlaps.append(len(set(reference) & set(found)) / 10)
            rows[kind] = {
                "top10_overlap": {"mean": statistics.mean(overlaps), "min": min(overlaps)},
                "float32_p50_ms": float(np.percentile(exact_ms, 50)),
                "sharded_p50_ms": float(np.percentile(sharded_ms, 50)),
            }
            logger.info("%s %s: %s", name, kind, rows[kind])
        result["methods"][name] = rows
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
