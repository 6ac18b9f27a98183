"""POST /similar latency of the default method under two fusion settings, in one run: the
default before issue 69 (`bm25-rm3:1,document:1,maxsim:1`) and today's (with the shingle
channel), each an in-process service (ASGI, query encoding included) over the same index.

    python benchmarks/fusion_latency.py --data-dir AILA_DATA_DIR [--queries FILE] [--by-id 40]
        [--repeats 3] [--out benchmarks/results/fusion_latency.json]

(default queries: the AILA 2019 development queries in ../shared/data)

Each service answers the posted queries and `--by-id` indexed documents (a seeded choice) as
queries with the default method, `--repeats` times, after one warm-up pass (both services
keep their postings, shingle postings included, mapped from the version's folder). The two
services alternate by round, so that a drift of the machine falls on both. Reported: p50/p95
and CPU per request of each, and today's over before's (p50 and mean).
"""

from __future__ import annotations

import argparse
import logging
import random
from pathlib import Path

from fastapi.testclient import TestClient
from query_latency import AILA_QUERIES, timed_requests
from record import save

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app, served_state
from docsim.search.settings import SearchSettings

logger = logging.getLogger("benchmarks.fusion_latency")
BEFORE = "bm25-rm3:1,document:1,maxsim:1"  # the default fusion before issue 69


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--by-id", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/fusion_latency.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    texts = [line.split("||", 1)[1] for line in args.queries.read_text().splitlines() if line]
    today = SearchSettings().fusion
    settings = {
        name: ServiceSettings(data_dir=args.data_dir).model_copy(
            update={"search": SearchSettings(fusion=fusion)}
        )
        for name, fusion in (("before", BEFORE), ("today", today))
    }
    clients = {name: TestClient(create_app(s)) for name, s in settings.items()}
    for client in clients.values():
        client.__enter__()
    try:
        ids = sorted(served_state(clients["today"].app).searcher.index.external_ids)  # type: ignore[attr-defined]
        chosen = random.Random(0).sample(ids, min(args.by_id, len(ids)))
        bodies = {
            "posted": [{"document": {"text": t}, "top_k": 10} for t in texts],
            "by_id": [{"document_id": d, "top_k": 10} for d in chosen],
        }
        for client in clients.values():  # warm-up: postings mapped, caches filled
            for group in bodies.values():
                timed_requests(client, group, 1)
        rounds: dict = {n: {g: [] for g in bodies} for n in clients}
        for _ in range(args.repeats):
            for name, client in clients.items():
                for group, requests in bodies.items():
                    rounds[name][group].append(timed_requests(client, requests, 1)[0])
    finally:
        for client in clients.values():
            client.__exit__(None, None, None)
    figures: dict = {"fusions": {"before": BEFORE, "today": today}, "queries": {}}
    for group in bodies:
        figures["queries"][group] = {
            name: {
                "p50_ms": sorted(r["p50_ms"] for r in rounds[name][group])[
                    len(rounds[name][group]) // 2
                ],
                "p95_ms": max(r["p95_ms"] for r in rounds[name][group]),
                "mean_ms": sum(r["mean_ms"] for r in rounds[name][group]) / args.repeats,
                "cpu_ms_per_request": sum(r["cpu_ms_per_request"] for r in rounds[name][group])
                / args.repeats,
            }
            for name in clients
        }
        pair = figures["queries"][group]
        pair["today_over_before_p50"] = round(pair["today"]["p50_ms"] / pair["before"]["p50_ms"], 3)
        pair["today_over_before_mean"] = round(
            pair["today"]["mean_ms"] / pair["before"]["mean_ms"], 3
        )
        logger.info("%s: %s", group, pair)
    print(save(args.out, figures))


if __name__ == "__main__":
    main()
