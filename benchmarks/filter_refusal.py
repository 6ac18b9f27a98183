"""How long a request refused for its filter's size takes, against a real `docsim serve`, beside
the time to read its bytes; and how long an ordinary query waits while two such requests run.

    python benchmarks/filter_refusal.py --data-dir DIR [--tries 10] [--port 8768]
        [--out benchmarks/results/filter_refusal.json]

The filter is issue 68's: an `and` of 1,000 `in` lists of 1,000 values (7.9 MB of JSON), past
`DOCSIM_API__MAX_FILTER_VALUES`. Starts `docsim serve` on DIR (no job worker), then times,
`--tries` times each: reading the body in this process (`json.loads`: the baseline, what a
request refused for its size should cost, the transfer aside); the refused request (a 422
naming the limit); an ordinary query alone (a short posted document, `top_k` 10); and the
same query sent while two clients each send the refused request. Before the filter was counted
as it was read, the refusal took about 3 s (parsed, then validated whole) and an ordinary
query beside two of them 2.9 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from record import save
from served import docsim_server  # benchmarks/served.py: scripts run as `python benchmarks/X.py`

ORDINARY = {
    "document": {"text": "Coffee beans are roasted. Water boils at sea level."},
    "top_k": 10,
}


def oversized_body() -> bytes:
    clause = {"field": "topic", "in": [f"v{i}" for i in range(1_000)]}
    return json.dumps(
        {"document": ORDINARY["document"], "filter": {"and": [clause] * 1_000}}
    ).encode()


def timed(call: Any, tries: int) -> dict[str, float]:
    """The median and the largest of `tries` timings of `call()`, in milliseconds."""
    times = []
    for _ in range(tries):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1)}


def measure(url: str, tries: int) -> dict[str, Any]:
    body = oversized_body()
    headers = {"content-type": "application/json"}
    with httpx.Client(base_url=url, timeout=120) as http:

        def refused() -> None:
            answer = http.post("/similar", content=body, headers=headers)
            assert answer.status_code == 422 and "MAX_FILTER" in answer.text, answer.text[:300]

        def ordinary() -> None:
            assert http.post("/similar", json=ORDINARY).status_code == 200

        ordinary()  # the encoder's first batch, out of the timings
        figures = {
            "body_bytes": len(body),
            "read_in_process": timed(lambda: json.loads(body), tries),
            "refused": timed(refused, tries),
            "ordinary_alone": timed(ordinary, tries),
        }
        stop = threading.Event()

        def abuse() -> None:
            with httpx.Client(base_url=url, timeout=120) as own:
                while not stop.is_set():
                    own.post("/similar", content=body, headers=headers)

        abusers = [threading.Thread(target=abuse) for _ in range(2)]
        for thread in abusers:
            thread.start()
        time.sleep(1.0)  # both of them sending
        try:
            figures["ordinary_beside_two_refused"] = timed(ordinary, tries)
        finally:
            stop.set()
            for thread in abusers:
                thread.join()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument("--port", type=int, default=8768)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/filter_refusal.json"))
    args = parser.parse_args()
    env = {
        **os.environ,
        "DOCSIM_DATA_DIR": str(args.data_dir),
        "DOCSIM_JOBS__EMBEDDED_WORKER": "false",
    }
    log = args.out.with_suffix(".log")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with docsim_server(env, args.port, log):
        figures = measure(f"http://127.0.0.1:{args.port}", args.tries)
    log.unlink(missing_ok=True)
    print(json.dumps(figures, indent=2))
    save(args.out, figures)


if __name__ == "__main__":
    main()
