"""The JSON of `/similar` (every method, every granularity, indexed and posted queries) and of
`/explain` over a published data directory, with what varies between identical calls (timings,
ids of posted queries) removed: two code versions that answer the same write the same file.

    docsim index --data-dir DIR                # the shipped sample corpus
    python benchmarks/api_snapshot.py --data-dir DIR --out snapshot.json
    diff before.json after.json                # refactorings must leave it unchanged
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.settings import JobSettings

METHODS = [
    "sdr", "sdr-window", "document", "maxsim", "best-sentence", "ot", "bm25", "bm25-reduced",
    "bm25-rm3", "bm25-paragraph", "hybrid", "fused",
]  # fmt: skip
VOLATILE = {"took_ms", "query_id", "elapsed_ms", "seconds"}
POSTED = (
    "Lighthouses and their keepers\n\nA lighthouse keeper trimmed the wick every night and "
    "logged the weather. Fog signals sounded when the light could not be seen.\n\nThe first "
    "telescopes showed craters on the moon. Astronomers mapped them by hand."
)


def stable(value: Any) -> Any:
    """`value` without the keys that differ between two identical calls."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def snapshot(client: TestClient) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def similar(name: str, body: dict[str, Any]) -> None:
        response = client.post("/similar", json=body)
        out[f"similar {name}"] = [response.status_code, stable(response.json())]

    for method in METHODS:
        similar(f"{method} indexed", {"document_id": "astronomy-01", "method": method})
        similar(f"{method} posted", {"document": {"text": POSTED}, "method": method})
        pool = ["astronomy-02", "lighthouses-01", "coffee-03", "oceans-04", "medieval-05"]
        similar(f"{method} pool", {"document_id": "astronomy-01", "method": method,
                                   "candidates": pool})  # fmt: skip
    similar("default", {"document_id": "lighthouses-02"})
    similar("sdr raw", {"document_id": "lighthouses-02", "method": "sdr", "normalize": False})
    for method in ("sdr", "sdr-window", "hybrid", "fused"):
        for mode in ("exhaustive", "candidate"):
            similar(f"{method} {mode}", {"document_id": "coffee-01", "method": method,
                                         "mode": mode})  # fmt: skip
    for granularity in ("section", "paragraph", "sentence"):
        for method in ("sdr", "document"):
            similar(
                f"{granularity} {method}",
                {"document_id": "baking-01", "method": method, "granularity": granularity},
            )
    for source, target in (("astronomy-01", "astronomy-02"), ("coffee-01", "running-03")):
        response = client.get("/explain", params={"source": source, "target": target})
        out[f"explain {source} {target}"] = [response.status_code, stable(response.json())]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    settings = ServiceSettings(data_dir=args.data_dir, jobs=JobSettings(embedded_worker=False))
    with TestClient(create_app(settings)) as client:
        result = snapshot(client)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"{len(result)} responses written to {args.out}")


if __name__ == "__main__":
    main()
