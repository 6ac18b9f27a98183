"""A sharded query on a Ray cluster of separate nodes against one process, on the same
collection (ten times AILA, written by `benchmarks/grown_version.py`), and the bytes a query
sends between the nodes. Needs root (network namespaces).

    python benchmarks/cluster_latency.py --data-dir AILA_10X_DIR [--workers 3] [--shards 3]
        [--queries FILE] [--limit 20] [--out benchmarks/results/cluster_latency.json]

(default queries: the AILA 2019 development queries in ../shared/data)

The cluster is the cluster test's (`tests/utils/netns_cluster.py`): a Ray head without shard
units and `--workers` worker nodes, each in a network namespace of its own on a private
bridge, holding `--shards / --workers` shard actors each. `docsim serve` runs twice in a
namespace of its own, one after the other: alone (no shards: everything in its process) and
on the cluster (Ray Client through the head, `DOCSIM_SHARDS__NODE_RESOURCE`), so that both
answers cross the same virtual link. The same posted queries go to each: exhaustive `sdr`
(scoring dominates: every sentence of the collection against the query's) and the default
method (`fused`, candidate pool). Per run and query set: p50 and p95; the cluster's ratio to
one process; the top-10 agreement and the largest score difference. On the cluster, each
query alone: the bytes carried by the workers' links, the head's and the api's (both ways,
Ray's own traffic in the same time included), against the query's sentences (a least-squares
line: bytes = fixed + per sentence). And the resident memory of each shard process, and
per run and query set the CPU time of every process of the nodes and the api (per query, and
as cores kept busy on average).
All nodes share this machine's cores: the cluster adds work here (round trips, the query's
vectors to every shard, the coordinator's merge) and can only win the cores one process
leaves idle; on separate machines it buys cores and memory per node.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
from record import save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the cluster harness lives with the tests

from docsim.indexer.text.sentences import load_splitter  # noqa: E402
from tests.utils.netns_cluster import SHARD_RESOURCE, NetnsCluster, unavailable  # noqa: E402

logger = logging.getLogger("benchmarks.cluster_latency")
AILA_QUERIES = ROOT.parent / "shared" / "data" / "aila2019" / "queries_dev.txt"
PORT = 8471
QUERY_SETS = {"sdr_exhaustive": {"method": "sdr", "mode": "exhaustive"}, "default": {}}


def served(cluster: NetnsCluster, env: dict[str, str], log: Path) -> Any:
    """`docsim serve` in the cluster's api namespace with `env`, once `/ready` is 200."""
    docsim = str(Path(sys.executable).parent / "docsim")
    argv = [docsim, "serve", "--host", cluster.client.address, "--port", str(PORT)]
    with log.open("wb") as out:
        api = cluster.popen(cluster.client, argv, env, stdout=out, stderr=out)
    url = f"http://{cluster.client.address}:{PORT}"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if api.poll() is not None:
            raise RuntimeError(f"the api exited: see {log}")
        try:
            if httpx.get(f"{url}/ready", timeout=10).status_code == 200:
                return api, url
        except httpx.TransportError:
            pass
        time.sleep(1)
    api.kill()
    raise RuntimeError(f"the api was not ready in 900 s: see {log}")


def ask_all(
    http: httpx.Client, texts: list[str], extra: dict, count_bytes: Any = None
) -> dict[str, Any]:
    """Each posted text once (after one warm-up query): latencies, top-10s, and with
    `count_bytes` the bytes it counts per query."""
    body = {"top_k": 10, **extra}
    http.post("/similar", json={"document": {"text": texts[0]}, **body}).raise_for_status()
    latencies, rankings, carried = [], [], []
    for text in texts:
        before = count_bytes() if count_bytes else None
        started = time.perf_counter()
        answer = http.post("/similar", json={"document": {"text": text}, **body})
        latencies.append((time.perf_counter() - started) * 1000)
        answer.raise_for_status()
        if count_bytes:
            after = count_bytes()
            carried.append({k: after[k] - before[k] for k in after})
        rankings.append([(r["document_id"], r["score"]) for r in answer.json()["results"]])
    return {"latencies": latencies, "rankings": rankings, "bytes": carried}


def cpu_seconds(cluster: NetnsCluster) -> float:
    """The CPU time (user and system) used so far by every process of every node and of the
    api's namespace: the one process alone, or the api, Ray and the shards together."""
    total = 0.0
    for node in [*cluster.nodes, cluster.client]:
        for pid in cluster.pids(node):
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
    return total


def shard_memory(cluster: NetnsCluster) -> list[dict[str, Any]]:
    """RSS and USS (GiB) of each shard actor's process, with its node."""
    found = []
    for node in cluster.workers:
        for pid in cluster.pids(node):
            try:
                process = psutil.Process(pid)
                if "ShardActor" not in " ".join(process.cmdline()):
                    continue
                memory = process.memory_full_info()
            except psutil.Error:
                continue
            found.append(
                {
                    "node": node.address,
                    "rss_gib": round(memory.rss / 2**30, 2),
                    "uss_gib": round(memory.uss / 2**30, 2),
                }
            )
    return found


def bytes_per_sentence(carried: list[dict[str, int]], sentences: list[int]) -> dict[str, Any]:
    """Per link group: the mean bytes a query, and a least-squares line against the query's
    sentences."""
    out = {}
    x = np.asarray(sentences, dtype=float)
    for key in carried[0]:
        y = np.asarray([c[key] for c in carried], dtype=float)
        slope, fixed = np.polyfit(x, y, 1)
        out[key] = {
            "mean_bytes_per_query": round(float(y.mean())),
            "fixed_bytes": round(float(fixed)),
            "bytes_per_query_sentence": round(float(slope)),
        }
    return out


def summary(run: dict[str, Any]) -> dict[str, float]:
    values = np.asarray(run["latencies"])
    return {
        "p50_ms": round(float(np.percentile(values, 50)), 1),
        "p95_ms": round(float(np.percentile(values, 95)), 1),
    }


def agreement(one: list, other: list) -> dict[str, float]:
    """The share of queries with the same top 10 in the same order, and the largest score
    difference of a document both rank."""
    pairs = list(zip(one, other, strict=True))
    same = np.mean([[d for d, _ in a] == [d for d, _ in b] for a, b in pairs])
    diff = max(abs(score - dict(b)[doc]) for a, b in pairs for doc, score in a if doc in dict(b))
    return {"same_top10_share": round(float(same), 3), "max_score_difference": float(diff)}


def link_counter(cluster: NetnsCluster) -> Any:
    """A function giving the bytes carried so far by the workers' links, the head's and the
    api's."""
    groups = {"workers": cluster.workers, "head": [cluster.head], "api": [cluster.client]}
    return lambda: {key: cluster.link_bytes(nodes) for key, nodes in groups.items()}


def measure(
    cluster: NetnsCluster, name: str, env: dict[str, str], texts: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Serve with `env`, ask every query set; the runs, and the figures of the service."""
    started = time.monotonic()
    api, url = served(cluster, env, cluster.temp / f"api-{name}.log")
    figures: dict[str, Any] = {"ready_seconds": round(time.monotonic() - started, 1)}
    runs = {}
    counter = link_counter(cluster) if name == "cluster" else None
    try:
        with httpx.Client(base_url=url, timeout=900) as http:
            for query_set, extra in QUERY_SETS.items():
                cpu_before, wall_before = cpu_seconds(cluster), time.monotonic()
                runs[query_set] = ask_all(http, texts, extra, counter)
                cpu, wall = cpu_seconds(cluster) - cpu_before, time.monotonic() - wall_before
                figures[query_set] = {  # the warm-up query included
                    "cpu_seconds_per_query": round(cpu / (len(texts) + 1), 2),
                    "cores_busy": round(cpu / wall, 2),
                }
            if name == "cluster":
                figures["shards_per_node"] = http.get("/ready").json()["shards"]["nodes"]
                figures["shard_memory"] = shard_memory(cluster)
    finally:
        api.terminate()
        api.wait(60)
    return runs, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/cluster_latency.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    reason = unavailable()
    if reason is not None:
        sys.exit(f"cannot make the cluster: {reason}")
    lines = args.queries.read_text(encoding="utf-8").splitlines()[: args.limit]
    texts = [line.split("||", 1)[1] for line in lines]
    splitter = load_splitter()
    sentences = [len(splitter.spans(text)) for text in texts]
    base = {
        "DOCSIM_DATA_DIR": str(args.data_dir.resolve()),
        "DOCSIM_JOBS__EMBEDDED_WORKER": "false",
        "DOCSIM_LOG__LEVEL": "WARNING",
    }
    sharded = base | {
        "DOCSIM_SHARDS__COUNT": str(args.shards),
        "DOCSIM_SHARDS__CPUS": "1",
        "DOCSIM_SHARDS__NODE_RESOURCE": SHARD_RESOURCE,
        "DOCSIM_SHARDS__CALL_TIMEOUT_SECONDS": "600",
    }
    units = -(-args.shards // args.workers)
    results: dict[str, Any] = {"queries": len(texts), "query_sentences": sentences}
    with NetnsCluster(workers=args.workers, shard_units=units, worker_cpus=2) as cluster:
        sharded["DOCSIM_RAY__ADDRESS"] = cluster.client_address
        alone, results["one_process"] = measure(cluster, "one_process", base, texts)
        on_cluster, results["cluster"] = measure(cluster, "cluster", sharded, texts)
    for query_set in QUERY_SETS:
        one, on = alone[query_set], on_cluster[query_set]
        results[query_set] = {
            "one_process": summary(one),
            "cluster": summary(on),
            "cluster_over_one_process_p50": round(
                float(np.percentile(on["latencies"], 50) / np.percentile(one["latencies"], 50)),
                2,
            ),
            **agreement(one["rankings"], on["rankings"]),
            "link_bytes": bytes_per_sentence(on["bytes"], sentences),
        }
    results["setup"] = {"workers": args.workers, "shards": args.shards, "units_per_worker": units}
    logger.info("%s", json.dumps(results, indent=1))
    save(args.out, results)


if __name__ == "__main__":
    main()
