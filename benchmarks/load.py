"""Concurrent clients against a real `docsim serve`: throughput, latency, errors and the
server's memory over the run.

    python benchmarks/load.py --data-dir DIR [--clients 16] [--seconds 120] [--port 8766]
        [--queries FILE] [--writers 0] [--sentence-store auto|float32|compressed]
        [--out benchmarks/results/load.json]

Starts `docsim serve` on DIR (a separate process, no job worker) and runs `--clients`
concurrent clients (asyncio, httpx) for `--seconds`. Each client posts, in turn, a query
document (the AILA 2019 development queries by default) and an indexed document by id (a
random one of the collection), each with the service's default method and `top_k` 10. Reports
queries per second, p50/p99 latency of each kind, errors (any status other than 200, or a
failed connection: must be 0), and the server's resident memory at the start and the end of
the load (sampled every second: it must stay flat), with its anonymous part (without the
pages of memory-mapped files, which a sharded coordinator's RSS gains as it reads them) and
the query cache's bytes (from `/metrics`: it fills up to its budget, 512 MiB by default).

`--writers N` adds N clients that change documents continuously meanwhile: each adds a
document of its own (a query text, under a new id), then deletes it, again and again. Their
changes per second, latency and errors are reported beside the reads', so that the cost of
serving reads from one snapshot while the collection changes is visible.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import time
from pathlib import Path

import httpx
import numpy as np
import psutil
from prometheus_client.parser import text_string_to_metric_families
from record import figures, save
from served import docsim_server  # benchmarks/served.py: scripts run as `python benchmarks/X.py`

logger = logging.getLogger("benchmarks.load")
AILA_QUERIES = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "queries_dev.txt"
)


def load_queries(path: Path) -> list[str]:
    return [line.split("||", 1)[1] for line in path.read_text(encoding="utf-8").splitlines()]


def summary(latencies: list[float]) -> dict:
    if not latencies:
        return {"count": 0}
    values = np.asarray(latencies) * 1000
    return {
        "count": len(values),
        "p50_ms": round(float(np.percentile(values, 50)), 1),
        "p99_ms": round(float(np.percentile(values, 99)), 1),
        "max_ms": round(float(values.max()), 1),
    }


async def client_loop(
    base: str, texts: list[str], ids: list[str], until: float, seed: int, record: dict
) -> None:
    rng = random.Random(seed)
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        turn = seed
        while time.monotonic() < until:
            kind = "posted" if turn % 2 == 0 else "by_id"
            body = (
                {"document": {"text": rng.choice(texts)}, "top_k": 10}
                if kind == "posted"
                else {"document_id": rng.choice(ids), "top_k": 10}
            )
            started = time.perf_counter()
            try:
                response = await client.post("/similar", json=body)
                ok = response.status_code == 200
                error = None if ok else f"{response.status_code}: {response.text[:200]}"
            except httpx.HTTPError as failure:
                ok, error = False, f"{type(failure).__name__}: {failure}"
            elapsed = time.perf_counter() - started
            if ok:
                record[kind].append(elapsed)
            else:
                record["errors"].append(error)
            turn += 1


async def writer_loop(base: str, texts: list[str], until: float, seed: int, record: dict) -> None:
    """Add a document, then delete it, until `until`: one change per request."""
    rng = random.Random(seed)
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        n = 0
        while time.monotonic() < until:
            doc_id = f"load-writer-{seed}-{n}"
            for kind in ("add", "delete"):
                started = time.perf_counter()
                try:
                    if kind == "add":
                        body = {"documents": [{"id": doc_id, "text": rng.choice(texts)}]}
                        response = await client.post("/documents", json=body)
                    else:
                        response = await client.delete(f"/documents/{doc_id}")
                    ok = response.status_code == 200
                    error = None if ok else f"{response.status_code}: {response.text[:200]}"
                except httpx.HTTPError as failure:
                    ok, error = False, f"{type(failure).__name__}: {failure}"
                if ok:
                    record["changes"].append(time.perf_counter() - started)
                else:
                    record["change_errors"].append(error)
                    break  # a failed add leaves nothing to delete
            n += 1


def tree_rss(process: psutil.Process) -> int:
    """The resident memory of the server and its children (Ray's shard actors and daemons
    when sharded; file pages they share are counted in each)."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            pass
    return total


async def sample_memory(
    process: psutil.Process, until: float, samples: list[int], anonymous: list[int], tree: list[int]
) -> None:
    while time.monotonic() < until:
        info = process.memory_info()
        samples.append(info.rss)
        anonymous.append(info.rss - info.shared)  # Linux: not backed by a file
        tree.append(tree_rss(process))
        await asyncio.sleep(1.0)


async def sample_cache(base: str, until: float, cache: list[int]) -> None:
    """The query cache's bytes (`/metrics`) every 10 s: bounded by its budget, it explains the
    memory that the first minutes of load add."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        while time.monotonic() < until:
            text = (await client.get("/metrics")).text
            for family in text_string_to_metric_families(text):
                if family.name == "docsim_query_cache_bytes":
                    cache.append(int(family.samples[0].value))
            await asyncio.sleep(10.0)


async def run_load(base: str, texts: list[str], ids: list[str], args, server) -> dict:  # noqa: ANN001
    record: dict = {"posted": [], "by_id": [], "errors": [], "changes": [], "change_errors": []}
    samples: list[int] = []
    anonymous: list[int] = []
    tree: list[int] = []
    cache: list[int] = []
    started = time.monotonic()
    until = started + args.seconds
    process = psutil.Process(server.pid)
    await asyncio.gather(
        sample_memory(process, until, samples, anonymous, tree),
        sample_cache(base, until, cache),
        *(client_loop(base, texts, ids, until, seed, record) for seed in range(args.clients)),
        *(writer_loop(base, texts, until, seed, record) for seed in range(args.writers)),
    )
    wall = time.monotonic() - started
    done = len(record["posted"]) + len(record["by_id"])
    return {
        "clients": args.clients,
        "seconds": round(wall, 1),
        "queries": done,
        "queries_per_second": round(done / wall, 2),
        "posted": summary(record["posted"]),
        "by_id": summary(record["by_id"]),
        "all": summary(record["posted"] + record["by_id"]),
        "errors": len(record["errors"]),
        "error_examples": record["errors"][:5],
        "writers": args.writers,
        "changes": summary(record["changes"]),
        "changes_per_second": round(len(record["changes"]) / wall, 2),
        "change_errors": len(record["change_errors"]),
        "change_error_examples": record["change_errors"][:5],
        "server_rss_start_bytes": samples[0] if samples else None,
        "server_rss_end_bytes": samples[-1] if samples else None,
        "server_rss_max_bytes": max(samples) if samples else None,
        "server_rss_every_10_s_bytes": samples[::10],
        # without file-backed pages: a sharded coordinator's memory-mapped vectors count in
        # the RSS as they are read (page cache, reclaimable), and not here
        "server_anonymous_start_bytes": anonymous[0] if anonymous else None,
        "server_anonymous_end_bytes": anonymous[-1] if anonymous else None,
        "server_anonymous_every_10_s_bytes": anonymous[::10],
        "query_cache_every_10_s_bytes": cache,
        "server_and_children_rss_start_bytes": tree[0] if tree else None,
        "server_and_children_rss_end_bytes": tree[-1] if tree else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--shards", type=int, default=0, help="docsim serve --shards N")
    parser.add_argument(
        "--writers", type=int, default=0, help="clients adding and deleting documents meanwhile"
    )
    parser.add_argument(
        "--sentence-store",
        choices=["auto", "float32", "compressed"],
        default="auto",
        help="DOCSIM_SEARCH__SENTENCE_STORE of the server (float32: before issue 28)",
    )
    parser.add_argument(
        "--ready-seconds", type=float, default=300.0, help="how long the server may take to start"
    )
    parser.add_argument("--label", default="in-process")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/load.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
    texts = load_queries(args.queries)
    env = {
        **os.environ,
        "DOCSIM_DATA_DIR": str(args.data_dir),
        "DOCSIM_JOBS__EMBEDDED_WORKER": "false",
        "DOCSIM_LOG__LEVEL": "WARNING",
        "DOCSIM_SEARCH__SENTENCE_STORE": args.sentence_store,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{args.port}"
    options = ("--shards", str(args.shards))
    log = args.out.parent / "load_server.log"
    with docsim_server(env, args.port, log, *options, ready_seconds=args.ready_seconds) as server:
        with httpx.Client(base_url=base, timeout=120) as client:
            ready = client.get("/ready").json()
            first = client.post("/similar", json={"document": {"text": texts[0]}, "top_k": 1000})
            ids = [r["document_id"] for r in first.json()["results"]]
            client.post("/similar", json={"document_id": ids[0]})  # warm: BM25 built, pages in
        logger.info(
            "Server ready (%s documents); %d clients for %.0f s",
            ready.get("documents"),
            args.clients,
            args.seconds,
        )
        result = asyncio.run(run_load(base, texts, ids, args, server))
    result = {
        "label": args.label,
        "data_dir": str(args.data_dir),
        "sentence_store": args.sentence_store,
        **result,
    }
    logger.info(
        "%s: %.2f queries/s, p50 %s ms, p99 %s ms, %d errors; %.2f changes/s, %d change "
        "errors; server RSS %.0f -> %.0f MiB",
        args.label,
        result["queries_per_second"],
        result["all"].get("p50_ms"),
        result["all"].get("p99_ms"),
        result["errors"],
        result["changes_per_second"],
        result["change_errors"],
        (result["server_rss_start_bytes"] or 0) / 2**20,
        (result["server_rss_end_bytes"] or 0) / 2**20,
    )
    runs = figures(args.out) if args.out.exists() else []
    save(args.out, [*runs, result])
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
