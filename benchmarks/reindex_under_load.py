"""A full reindex through the HTTP API while the service answers queries.

    python benchmarks/reindex_under_load.py --data-dir DIR --source CORPUS
        [--queries FILE] [--port 8765] [--poll 20] [--out benchmarks/results/reindex.json]

Starts `docsim serve` on DIR (a real process, embedded worker), measures POST /similar
latency on the queries before the job, then queues `POST /jobs/reindex` for CORPUS, polls
`GET /jobs/{id}` for progress and keeps querying until the new version answers, then measures
again. Every response's status and index version is kept: the run counts failed requests and
checks that versions only move forward. Figures are printed and saved as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path

import httpx
import numpy as np
from record import save
from served import docsim_server  # benchmarks/served.py: scripts run as `python benchmarks/X.py`

logger = logging.getLogger("benchmarks.reindex_under_load")
AILA_QUERIES = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "queries_dev.txt"
)


def load_queries(path: Path) -> list[str]:
    return [
        line.split("||", 1)[1]
        for line in path.read_text(encoding="utf-8").splitlines()
        if "||" in line
    ]


def summary(latencies: list[float]) -> dict:
    if not latencies:
        return {}
    values = np.asarray(latencies)
    return {
        "p50_ms": round(float(np.percentile(values, 50)), 1),
        "p95_ms": round(float(np.percentile(values, 95)), 1),
        "requests": len(latencies),
    }


class Prober:
    """Sends /similar queries round-robin and records what came back."""

    def __init__(self, client: httpx.Client, queries: list[str]) -> None:
        self.client = client
        self.queries = queries
        self.at = 0
        self.records: list[dict] = []

    def one(self, phase: str) -> dict:
        text = self.queries[self.at % len(self.queries)]
        self.at += 1
        started = time.perf_counter()
        try:
            response = self.client.post(
                "/similar", json={"document": {"text": text}, "top_k": 10}, timeout=120
            )
            status = response.status_code
            version = response.json().get("index_version") if status == 200 else None
        except httpx.HTTPError as error:
            status, version = f"error: {error}", None
        record = {
            "phase": phase,
            "at": time.time(),
            "ms": (time.perf_counter() - started) * 1000,
            "status": status,
            "version": version,
        }
        self.records.append(record)
        return record

    def latencies(self, phase: str) -> list[float]:
        return [r["ms"] for r in self.records if r["phase"] == phase and r["status"] == 200]


def parse_args() -> argparse.Namespace:
    """The command line's options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--poll", type=float, default=20.0, help="Seconds between job polls.")
    parser.add_argument("--baseline", type=int, default=20, help="Queries before and after.")
    parser.add_argument(
        "--interval", type=float, default=2.0, help="Seconds between queries during the job."
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/reindex.json"))
    return parser.parse_args()


def query_until_finished(
    client: httpx.Client,
    prober: Prober,
    job_id: int,
    submitted: float,
    poll: float,
    interval: float,
) -> list[dict]:
    """Queries every `interval` seconds while job `job_id` runs, polling it every `poll`
    seconds until it has succeeded, failed or been cancelled; returns the polls' progress
    (`at`: seconds since `submitted`)."""
    polls = []
    last_poll = 0.0
    while True:
        prober.one("during")
        time.sleep(interval)
        if time.monotonic() - last_poll >= poll:
            last_poll = time.monotonic()
            job = client.get(f"/jobs/{job_id}").json()
            polls.append(
                {"at": time.time() - submitted, **job["progress"], "status": job["status"]}
            )
            logger.info(
                "job %d %s: %s / %s %s, %s/s, ETA %s s",
                job_id,
                job["status"],
                job["progress"]["done"],
                job["progress"]["total"],
                job["progress"]["unit"],
                job["progress"]["rate"],
                job["progress"]["eta_seconds"],
            )
            if job["status"] in ("succeeded", "failed", "cancelled"):
                return polls


def report(
    prober: Prober,
    finished: dict,
    job_id: int,
    before_version: int,
    submitted: float,
    polls: list[dict],
) -> dict:
    """The figures saved: the finished job, the versions before and after, the requests (all,
    failed, and whether the versions they saw only moved forward), the latency of each phase
    and the progress polls."""
    versions = [r["version"] for r in prober.records if r["version"] is not None]
    failed = [r for r in prober.records if r["status"] != 200]
    result = {
        "job": {
            "job_id": job_id,
            "status": finished["status"],
            "error": finished["error"],
            "index_version": finished["index_version"],
            "created_at": finished["created_at"],
            "started_at": finished["started_at"],
            "finished_at": finished["finished_at"],
            "wall_seconds": round(time.time() - submitted, 1),
            "sentences": finished["progress"]["total"],
        },
        "versions": {"before": before_version, "after": finished["index_version"]},
        "requests": len(prober.records),
        "failed_requests": len(failed),
        "versions_only_move_forward": all(
            a <= b for a, b in zip(versions, versions[1:], strict=False)
        ),
        "latency": {
            phase: summary(prober.latencies(phase)) for phase in ("before", "during", "after")
        },
        "progress_polls": polls,
    }
    result["latency"]["during_over_before_p50"] = round(
        result["latency"]["during"]["p50_ms"] / result["latency"]["before"]["p50_ms"], 2
    )
    return result


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)

    env = {
        **os.environ,
        "DOCSIM_DATA_DIR": str(args.data_dir),
        "DOCSIM_JOBS__ALLOWED_ROOTS": json.dumps([str(args.source.resolve().parent)]),
        "HF_HUB_OFFLINE": "1",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{args.port}"
    with docsim_server(env, args.port, args.out.parent / "reindex_server.log"):
        with httpx.Client(base_url=base) as client:
            before_version = client.get("/ready").json()["index_version"]
            prober = Prober(client, load_queries(args.queries))
            for _ in range(args.baseline):
                prober.one("before")
            logger.info("before: %s", summary(prober.latencies("before")))

            job_id = client.post(
                "/jobs/reindex", json={"source": str(args.source.resolve())}
            ).json()["job_id"]
            submitted = time.time()
            polls = query_until_finished(
                client, prober, job_id, submitted, args.poll, args.interval
            )
            finished = client.get(f"/jobs/{job_id}").json()
            new_version = finished["index_version"]
            swap_deadline = time.monotonic() + 300
            while prober.one("swap")["version"] != new_version:
                assert time.monotonic() < swap_deadline, "the service never swapped"
            for _ in range(args.baseline):
                prober.one("after")

    result = report(prober, finished, job_id, before_version, submitted, polls)
    print(json.dumps({k: v for k, v in result.items() if k != "progress_polls"}, indent=2))
    save(args.out, result)


if __name__ == "__main__":
    main()
