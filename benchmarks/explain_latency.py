"""GET /explain latency for pairs among the largest documents of a real index (AILA).

    python benchmarks/explain_latency.py --data-dir DIR [--largest 10]
        [--out benchmarks/results/explain_latency.json] [--samples-dir DIR]

Every ordered pair of the `--largest` documents (by sentence count) is explained in-process
through the ASGI app (TestClient), as json, png and html. The first explanation of each
source is "cold": it computes the source's normalisation statistics over the whole collection,
as the default /similar does; the others are "warm", as after a /similar of that source
(POST /similar fills the same statistics). Figures are printed and saved as JSON.

With `--samples-dir`, the first AILA development query (`--query`, from ../shared/data) is
posted to /similar and the png and html explanations of its top result are written there.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient
from record import save
from tqdm import tqdm

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app, served_state

logger = logging.getLogger("benchmarks.explain_latency")
AILA_QUERIES = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "queries_dev.txt"
)
FORMATS = ("json", "png", "html")


def summary(values: list[float]) -> dict:
    if not values:
        return {}
    array = np.asarray(values)
    return {
        "p50_ms": round(float(np.percentile(array, 50)), 1),
        "p95_ms": round(float(np.percentile(array, 95)), 1),
        "max_ms": round(float(array.max()), 1),
        "mean_ms": round(statistics.mean(values), 1),
        "requests": len(values),
    }


def write_samples(client: TestClient, args: argparse.Namespace) -> dict:
    """The png and html explanation of the top result of one AILA development query."""
    texts = dict(
        line.rstrip("\n").split("||", 1)
        for line in args.queries.read_text(encoding="utf-8").splitlines()
        if "||" in line
    )
    ranked = client.post(
        "/similar", json={"document": {"title": args.query, "text": texts[args.query]}}
    ).json()
    top = ranked["results"][0]
    args.samples_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for fmt in ("png", "html", "json"):
        response = client.get(
            "/explain",
            params={"source": ranked["query_id"], "target": top["document_id"], "format": fmt},
        )
        response.raise_for_status()
        path = args.samples_dir / f"explain_{args.query}_{top['document_id']}.{fmt}"
        path.write_bytes(response.content)
        files[fmt] = str(path)
    logger.info("samples of %s against %s: %s", args.query, top["document_id"], files)
    return {"query": args.query, "top_result": top["document_id"], "score": top["score"], **files}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--largest", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/explain_latency.json"))
    parser.add_argument("--samples-dir", type=Path, default=None)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--query", default="AILA_Q1", help="The query id for --samples-dir.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)

    settings = ServiceSettings(data_dir=args.data_dir)
    with TestClient(create_app(settings)) as client:
        searcher = served_state(client.app).searcher
        index = searcher.index
        sentence_start = index.paragraph_sentence_start[index.doc_paragraph_start]
        sentences = np.diff(sentence_start)
        paragraphs = np.diff(index.doc_paragraph_start)
        largest = np.argsort(-sentences, kind="stable")[: args.largest]
        docs = [index.external_ids[d] for d in largest]
        logger.info(
            "largest documents: %s",
            ", ".join(
                f"{index.external_ids[d]} ({sentences[d]} sentences, {paragraphs[d]} paragraphs)"
                for d in largest
            ),
        )
        cold: dict[str, list[float]] = {f: [] for f in FORMATS}
        warm: dict[str, list[float]] = {f: [] for f in FORMATS}
        sizes: dict[str, list[int]] = {f: [] for f in FORMATS}
        pairs = [(s, t) for s in docs for t in docs if s != t]
        seen_sources: set[str] = set()
        for source, target in tqdm(pairs, desc="explain", unit="pair"):
            first = source not in seen_sources
            seen_sources.add(source)
            for fmt in FORMATS:
                started = time.perf_counter()
                response = client.get(
                    "/explain", params={"source": source, "target": target, "format": fmt}
                )
                elapsed = (time.perf_counter() - started) * 1000
                response.raise_for_status()
                (cold if first and fmt == "json" else warm)[fmt].append(elapsed)
                sizes[fmt].append(len(response.content))
                first = False
        samples = write_samples(client, args) if args.samples_dir is not None else None
    result = {
        "index": {
            "documents": index.n_documents,
            "sentences": int(len(index.ids["sentence"])),
            "paragraphs": int(len(index.ids["paragraph"])),
            "encoder": index.manifest["encoder"]["name"],
        },
        "pairs": len(pairs),
        "documents": {
            index.external_ids[d]: {
                "sentences": int(sentences[d]),
                "paragraphs": int(paragraphs[d]),
            }
            for d in largest
        },
        "cold_json_first_per_source": summary(cold["json"]),
        "warm": {fmt: summary(warm[fmt]) for fmt in FORMATS},
        "all_json": summary(cold["json"] + warm["json"]),
        "response_bytes_p50": {fmt: int(np.median(sizes[fmt])) for fmt in FORMATS},
        "target_p50_ms": 1000,
        "samples": samples,
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
