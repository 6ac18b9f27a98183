"""One abusive client beside ordinary ones, against a real `docsim serve`: how much the largest
requests the limits allow slow everyone else.

    python benchmarks/abuse.py --data-dir DIR [--clients 8] [--seconds 40] [--port 8767]
        [--out benchmarks/results/abuse.json] [--document-alone]

Starts `docsim serve` on DIR (no job worker), then runs two phases of `--seconds` each:
`--clients` ordinary clients alone, each posting, in turn, a short query document and an
indexed document by id (the service's default method, `top_k` 10); then the same clients with
one abuser beside them, sending over and over, one at a time, the largest requests the
default limits allow: a posted document of 2,000,000 characters (about 18,000 sentences,
under the sentence limit) and a filter of 1,024 nodes holding 65,472 values in all.
Reported: the ordinary clients' p50 and p95 latency and queries per second in each phase, the
p95 ratio (the goal: at most 2), the abuser's answers by status and latency, and the 5xx
answers of each kind of client (the goal: none to the ordinary clients; the abuser's may be
503 at its deadline, `search_deadline_seconds`, which a starved or too long request meets by
design). `--document-alone` first times the largest document with nothing else running.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from record import save
from served import docsim_server  # benchmarks/served.py: scripts run as `python benchmarks/X.py`

logger = logging.getLogger("benchmarks.abuse")
WORDS = (
    "the court held that appeal was dismissed petitioner respondent section act evidence "
    "witness trial judgment order high accused prosecution learned counsel facts case"
).split()


def largest_document(chars: int = 2_000_000) -> str:
    """Ordinary sentences of 16 words (about 110 characters), `chars` of them."""
    rng = random.Random(7)
    sentences, size = [], 0
    while size < chars - 200:
        words = [rng.choice(WORDS) for _ in range(16)]
        sentence = " ".join(words).capitalize() + "."
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)


def largest_filter(field: str, clauses: int = 1_023, values: int = 65_472) -> dict[str, Any]:
    """An `or` of `clauses` `in` lists (1,024 nodes with the `or`), `values` values in all
    (64 a list), on a keyword `field`."""
    per = values // clauses
    return {
        "or": [{"field": field, "in": [f"v{i}-{j}" for j in range(per)]} for i in range(clauses)]
    }


def summary(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {"count": 0}
    values = np.asarray(latencies) * 1000
    return {
        "count": len(values),
        "p50_ms": round(float(np.percentile(values, 50)), 1),
        "p95_ms": round(float(np.percentile(values, 95)), 1),
        "max_ms": round(float(values.max()), 1),
    }


async def ordinary(
    client: httpx.AsyncClient, ids: list[str], texts: list[str], stop: float, seen: dict
) -> None:
    rng = random.Random(len(seen["latencies"]))
    turn = 0
    while time.monotonic() < stop:
        body: dict[str, Any] = (
            {"document": {"text": rng.choice(texts)}}
            if turn % 2 == 0
            else {"document_id": rng.choice(ids)}
        )
        turn += 1
        started = time.perf_counter()
        answer = await client.post("/similar", json={**body, "top_k": 10}, timeout=600)
        seen["latencies"].append(time.perf_counter() - started)
        seen["statuses"][answer.status_code] += 1


async def abuser(client: httpx.AsyncClient, field: str, stop: float, seen: dict) -> None:
    document = largest_document()
    requests = [  # the filter first: a document may take the whole phase
        {"document_id": None, "filter": largest_filter(field), "top_k": 1_000},
        {"document": {"text": document}, "top_k": 1_000},
    ]
    turn = 0
    while time.monotonic() < stop:
        body = dict(requests[turn % 2])
        if body.get("document_id", "") is None:
            body["document_id"] = seen["some_id"]
        turn += 1
        started = time.perf_counter()
        answer = await client.post("/similar", json=body, timeout=600)
        kind = "document" if "document" in body else "filter"
        seen["latencies"][kind].append(time.perf_counter() - started)
        seen["statuses"][f"{kind} {answer.status_code}"] += 1
        if answer.status_code >= 500:
            seen["details"].append(f"{kind} {answer.status_code}: {answer.json().get('detail')}")


async def phase(
    url: str,
    clients: int,
    seconds: float,
    abusive: bool,
    ids: list[str],
    texts: list[str],
    field: str,
) -> dict[str, Any]:
    stop = time.monotonic() + seconds
    seen: dict[str, Any] = {"latencies": [], "statuses": Counter()}
    abused: dict[str, Any] = {
        "latencies": {"document": [], "filter": []},
        "statuses": Counter(),
        "details": [],
        "some_id": ids[0],
    }
    limits = httpx.Limits(max_connections=clients + 2)
    async with httpx.AsyncClient(base_url=url, limits=limits) as client:
        tasks = [ordinary(client, ids, texts, stop, seen) for _ in range(clients)]
        if abusive:
            tasks.append(abuser(client, field, stop, abused))
        await asyncio.gather(*tasks)
    result = {
        "ordinary": {
            **summary(seen["latencies"]),
            "qps": round(len(seen["latencies"]) / seconds, 2),
            "statuses": dict(seen["statuses"]),
        },
    }
    if abusive:
        result["abuser"] = {
            "statuses": dict(abused["statuses"]),
            "server_error_details": abused["details"],
            "document": summary(abused["latencies"]["document"]),
            "filter": summary(abused["latencies"]["filter"]),
        }
    return result


def largest_alone(url: str) -> dict[str, Any]:
    """The largest document's answer with nothing else running: its status and latency."""
    started = time.perf_counter()
    with httpx.Client(base_url=url, timeout=600) as client:
        answer = client.post("/similar", json={"document": {"text": largest_document()}})
    return {"status": answer.status_code, "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--port", type=int, default=8767)
    parser.add_argument("--field", default="source", help="a keyword metadata field to filter")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/abuse.json"))
    parser.add_argument(
        "--document-alone",
        action="store_true",
        help="first time the largest document alone (its status and seconds)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    env = {
        **os.environ,
        "DOCSIM_DATA_DIR": str(args.data_dir),
        "DOCSIM_JOBS__EMBEDDED_WORKER": "false",
    }
    url = f"http://127.0.0.1:{args.port}"
    log = args.out.with_suffix(".server.log")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with docsim_server(env, args.port, log):
        with httpx.Client(base_url=url, timeout=60) as client:
            ids = [
                h["document_id"]
                for h in client.post(
                    "/similar",
                    json={"document": {"text": "The court held. The appeal."}, "top_k": 50},
                ).json()["results"]
            ]
            texts = [client.get(f"/documents/{i}").json()["text"][:3000] for i in ids[:20]]
        alone_document = largest_alone(url) if args.document_alone else None
        alone = asyncio.run(phase(url, args.clients, args.seconds, False, ids, texts, args.field))
        logger.info("alone: %s", alone)
        abused = asyncio.run(phase(url, args.clients, args.seconds, True, ids, texts, args.field))
        logger.info("with the abuser: %s", abused)
    ratio = abused["ordinary"]["p95_ms"] / alone["ordinary"]["p95_ms"]
    server_errors = {
        who: sum(
            n
            for phase_ in (alone, abused)
            if who in phase_
            for status, n in phase_[who]["statuses"].items()
            if str(status).split()[-1].startswith("5")
        )
        for who in ("ordinary", "abuser")
    }
    report = {
        "clients": args.clients,
        "seconds": args.seconds,
        "largest_document_alone": alone_document,
        "alone": alone,
        "with_abuser": abused,
        "p95_ratio": round(ratio, 2),
        "server_errors": server_errors,
    }
    print(json.dumps(report, indent=1))
    save(args.out, report)


if __name__ == "__main__":
    main()
