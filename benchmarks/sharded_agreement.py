"""Whether `docsim serve --shards N` ranks as one `docsim serve` process does, on a real data
directory (issue 54: the same hundred-times-AILA version), over HTTP.

    python benchmarks/sharded_agreement.py --data-dir DIR [--shards 2] [--by-id 10]
        [--queries FILE] [--methods fused sdr] [--ready-seconds 3600]
        [--out benchmarks/results/sharded_agreement.json]

Starts `docsim serve` on DIR (no job worker, the service's default settings otherwise), posts
the development queries (the AILA 2019 ones by default) and `--by-id` indexed documents (a
seeded choice) with each method (`fused`: the default), `top_k` 10, and stops it; then
`docsim serve --shards N` on the same directory (a local Ray, shard actors as processes of
this machine) answers the same requests. The two servers run one after the other, never side
by side: each is alone on the machine. Reported per method and query set: the rankings that
are the same (the same documents in the same order, every score within 1e-5, as the sharded
service's tests ask), the top-10 overlap (mean, least), the largest score difference, and
each server's p50 and startup.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from pathlib import Path

import httpx
import numpy as np
from load import AILA_QUERIES, load_queries  # benchmarks/load.py: scripts run as a script
from record import save
from served import docsim_server

logger = logging.getLogger("benchmarks.sharded_agreement")
Ranking = list[tuple[str, float]]


def answers(
    base: str, bodies: dict[str, list[dict]], methods: list[str]
) -> tuple[dict[str, dict[str, list[Ranking]]], dict[str, dict[str, float]]]:
    """Each method's rankings of each query set's bodies, and the p50 of each."""
    rankings: dict[str, dict[str, list[Ranking]]] = {}
    p50: dict[str, dict[str, float]] = {}
    with httpx.Client(base_url=base, timeout=600) as client:
        for method in methods:
            rankings[method], p50[method] = {}, {}
            for name, group in bodies.items():
                found, latencies = [], []
                for body in group:
                    started = time.perf_counter()
                    response = client.post("/similar", json={**body, "method": method})
                    latencies.append((time.perf_counter() - started) * 1000)
                    response.raise_for_status()
                    results = response.json()["results"]
                    found.append([(r["document_id"], r["score"]) for r in results])
                rankings[method][name] = found
                p50[method][name] = statistics.median(latencies)
    return rankings, p50


def same(a: Ranking, b: Ranking) -> bool:
    """The same documents in the same order, every score within 1e-5 (relative above 1)."""
    return [d for d, _ in a] == [d for d, _ in b] and all(
        abs(x - y) <= 1e-5 * max(1.0, abs(x)) for (_, x), (_, y) in zip(a, b, strict=True)
    )


def agreement(one: list[Ranking], sharded: list[Ranking]) -> dict:
    overlaps = [
        len({d for d, _ in a} & {d for d, _ in b}) / max(1, len(a))
        for a, b in zip(one, sharded, strict=True)
    ]
    differences = [
        abs(x - y)
        for a, b in zip(one, sharded, strict=True)
        for (d, x), (e, y) in zip(a, b, strict=False)
        if d == e
    ]
    return {
        "same": sum(same(a, b) for a, b in zip(one, sharded, strict=True)),
        "queries": len(one),
        "top10_overlap_mean": statistics.mean(overlaps),
        "top10_overlap_min": min(overlaps),
        "largest_score_difference": max(differences, default=0.0),
    }


def serve_and_ask(
    args: argparse.Namespace, shards: int, bodies: dict[str, list[dict]] | None, log: Path
) -> tuple[dict, dict, float]:
    """One server's rankings, p50s and startup seconds; without `bodies`, the queries and a
    seeded choice of `--by-id` of its documents (read from its first ranking) first."""
    env = {
        **os.environ,
        "DOCSIM_DATA_DIR": str(args.data_dir),
        "DOCSIM_JOBS__EMBEDDED_WORKER": "false",
        "DOCSIM_LOG__LEVEL": "INFO",
    }
    base = f"http://127.0.0.1:{args.port}"
    started = time.perf_counter()
    options = ("--shards", str(shards))
    with docsim_server(env, args.port, log, *options, ready_seconds=args.ready_seconds):
        startup = time.perf_counter() - started
        texts = load_queries(args.queries)
        with httpx.Client(base_url=base, timeout=600) as client:
            first = client.post("/similar", json={"document": {"text": texts[0]}, "top_k": 1000})
            first.raise_for_status()
        known = sorted(r["document_id"] for r in first.json()["results"])
        if bodies is None:
            chosen = np.random.default_rng(0).choice(len(known), args.by_id, replace=False)
            bodies = {
                "posted": [{"document": {"text": t}, "top_k": 10} for t in texts],
                "by_id": [{"document_id": known[i], "top_k": 10} for i in sorted(chosen)],
            }
        rankings, p50 = answers(base, bodies, args.methods)
    return {"rankings": rankings, "bodies": bodies}, p50, startup


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--by-id", type=int, default=10)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--methods", nargs="+", default=["fused"])
    parser.add_argument("--port", type=int, default=8767)
    parser.add_argument("--ready-seconds", type=float, default=3600.0)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/sharded_agreement.json")
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    logs = args.out.with_suffix("")
    one, one_p50, one_start = serve_and_ask(args, 0, None, Path(f"{logs}.one.log"))
    logger.info("One process answered (%.0f s to start): %s", one_start, one_p50)
    sharded, sharded_p50, sharded_start = serve_and_ask(
        args, args.shards, one["bodies"], Path(f"{logs}.sharded.log")
    )
    result = {
        "data_dir": args.data_dir.name,
        "shards": args.shards,
        "startup_seconds": {"one_process": one_start, "sharded": sharded_start},
        "p50_ms": {"one_process": one_p50, "sharded": sharded_p50},
        "agreement": {
            method: {
                name: agreement(one["rankings"][method][name], sharded["rankings"][method][name])
                for name in one["rankings"][method]
            }
            for method in args.methods
        },
    }
    print(json.dumps(result, indent=2))
    save(args.out, result)


if __name__ == "__main__":
    main()
