"""POST /similar latency on a real index with the float32 sentence level (the code before issue
28) and with the compressed one, in one run, and how far their rankings agree.

    python benchmarks/query_latency.py --data-dir DIR [--queries FILE] [--by-id 40]
        [--repeats 2] [--scale-sentences N] [--filter JSON] [--stores float32 compressed]
        [--no-exhaustive] [--default-only]
        [--out benchmarks/results/query_latency.json] [--rankings FILE]

(default queries: the AILA 2019 development queries in ../shared/data)

For each store (`DOCSIM_SEARCH__SENTENCE_STORE` `float32`, then `compressed`), an in-process
service (ASGI, query encoding included) answers: the posted queries with the default method,
`--by-id` indexed documents (a seeded choice) as queries with the default method, the posted
queries with `maxsim`, with exhaustive `sdr` and with each component of the default fusion
alone. Reported per store: p50/p95 of each and its CPU time per request (all threads), the
encoding alone, the sentence level's bytes per sentence held in memory, the peak RSS, and the
anonymous and file-backed resident memory after the queries; then the compressed store's p50
ratios and the top-10 overlap of its rankings with float32's.
`--filter JSON` also times the default method under a metadata filter, posted and by id, as
ratios against the same queries unfiltered (the filter's share of the collection reported).
`--rankings FILE` saves each store's top-10 document ids per query set (JSON), for comparisons
across runs (`benchmarks/served_growth.py` runs one store a process).
`--scale-sentences N` adds the older synthetic run (random vectors, candidate mode;
`synthetic_scale.py`): `benchmarks/growth.py` measures growth on real vectors.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from fastapi.testclient import TestClient
from record import save
from synthetic_scale import synthetic_scale  # benchmarks/synthetic_scale.py

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app, served_state
from docsim.models.kernels.scoring import sdr_scores
from docsim.search.filters import parse_filter
from docsim.search.searcher import Searcher
from docsim.search.settings import SearchSettings

logger = logging.getLogger("benchmarks.query_latency")
AILA_QUERIES = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "queries_dev.txt"
)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def timed_requests(client: TestClient, bodies: list[dict], repeats: int = 1) -> tuple[dict, list]:
    """p50/p95 of POST /similar with each of `bodies`, `repeats` times, the p50 of each round
    apart (the first sees each query's postings and cells for the first time; a repeat finds
    them in memory), the process's CPU time per request (every thread: a request's parallel
    work counts), and the last round's top document ids per body."""
    latencies, rankings, round_p50 = [], [], []
    cpu_started = _cpu_seconds()
    for _ in range(repeats):
        rankings, round_latencies = [], []
        for body in bodies:
            started = time.perf_counter()
            response = client.post("/similar", json=body)
            round_latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            rankings.append([r["document_id"] for r in response.json()["results"]])
        latencies += round_latencies
        round_p50.append(percentile(round_latencies, 50))
    return {
        "p50_ms": percentile(latencies, 50),
        "round_p50_ms": round_p50,
        "p95_ms": percentile(latencies, 95),
        "mean_ms": statistics.mean(latencies),
        "cpu_ms_per_request": (_cpu_seconds() - cpu_started) * 1000 / len(latencies),
        "requests": len(latencies),
    }, rankings


def _cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def api_latency(
    client: TestClient, texts: list[str], mode: str, repeats: int, method: str | None
) -> tuple[dict, list]:
    """Posted `texts` with `method` (None: the service's default), in `mode`."""
    body = {"top_k": 10, "mode": mode} | ({"method": method} if method else {})
    return timed_requests(client, [{"document": {"text": t}, **body} for t in texts], repeats)


def scoring_vs_matmul(searcher: Searcher, texts: list[str]) -> dict:
    ratios, score_ms, matmul_ms = [], [], []
    collection = searcher.index.collection
    for text in texts:
        from docsim.indexer.text.corpus import json_document

        query = searcher.query_from_source(json_document({"id": "q", "text": text}))
        source = query.sentence_vectors
        for _ in range(2):  # the second run is timed
            t0 = time.perf_counter()
            sdr_scores(source, query.paragraph_lengths, collection)
            t1 = time.perf_counter()
            _ = collection.sentences @ source.T  # (R, n): the bare product of the same shapes
            t2 = time.perf_counter()
        score_ms.append((t1 - t0) * 1000)
        matmul_ms.append((t2 - t1) * 1000)
        ratios.append((t1 - t0) / (t2 - t1))
    return {
        "scoring_p50_ms": percentile(score_ms, 50),
        "matmul_p50_ms": percentile(matmul_ms, 50),
        "ratio_p50": percentile(ratios, 50),
        "ratio_max": max(ratios),
    }


def indexed_latency(client: TestClient, ids: list[str], method: str | None) -> tuple[dict, list]:
    """Indexed documents as queries (`document_id`)."""
    body = {"top_k": 10} | ({"method": method} if method else {})
    return timed_requests(client, [{"document_id": d, **body} for d in ids])


def encoding_latency(searcher: Searcher, texts: list[str]) -> dict:
    """p50 of encoding a posted query as the default method needs it: its sentences, and its
    chunks for the document vector."""
    from docsim.indexer.text.corpus import json_document

    latencies = []
    for i, text in enumerate(texts):
        started = time.perf_counter()
        query = searcher.query_from_source(json_document({"id": f"q{i}", "text": text}))
        searcher.level_vectors(query, "document")
        latencies.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95)}


def status_gib(field: str) -> float:
    """A field of /proc/self/status (Linux), in GiB: `RssAnon` or `RssFile`."""
    text = Path("/proc/self/status").read_text()
    return int(text.split(f"{field}:")[1].split()[0]) / 2**20


def overlap(a: list[list[str]], b: list[list[str]]) -> dict:
    found = [len(set(x) & set(y)) / max(1, len(x)) for x, y in zip(a, b, strict=True)]
    return {"mean": statistics.mean(found), "min": min(found)}


def filtered_latency(  # noqa: ANN201
    client: TestClient, texts: list[str], ids: list[str], repeats: int, filter: dict
):
    """The default method with `filter`, posted and by id: p50/p95, and the share of the
    collection it keeps."""
    searcher: Searcher = served_state(client.app).searcher  # type: ignore[attr-defined]
    kept = float(searcher.filter_mask(parse_filter(filter)).mean())
    body = {"top_k": 10, "filter": filter}
    posted, _ = timed_requests(client, [{"document": {"text": t}, **body} for t in texts], repeats)
    by_id, _ = timed_requests(client, [{"document_id": d, **body} for d in ids])
    return {"kept_share": kept, "posted": posted, "by_id": by_id}


def measure_store(  # noqa: ANN201
    data_dir: Path,
    store: str,
    texts: list[str],
    by_id: int,
    repeats: int,
    filter: dict | None = None,
    exhaustive: bool = True,
    extras: bool = True,
):
    """One sentence store's figures, and its rankings (compared across stores); `by_id`
    indexed documents (a seeded choice) as queries too; with `filter`, the default method's
    posted and by-id latency under it; without `exhaustive`, no exhaustive `sdr`; without
    `extras`, only the default method (posted and by id)."""
    settings = ServiceSettings(data_dir=data_dir, search=SearchSettings(sentence_store=store))
    app = create_app(settings)
    out: dict = {}
    rankings: dict = {}
    started = time.perf_counter()
    with TestClient(app) as client:
        out["startup_seconds"] = time.perf_counter() - started  # loaded and warmed
        searcher: Searcher = served_state(app).searcher
        out["index"] = {
            "documents": searcher.index.n_documents,
            "sentences": len(searcher.index.ids["sentence"]),
        }
        every = searcher.index.external_ids
        chosen = np.random.default_rng(0).choice(len(every), min(by_id, len(every)), replace=False)
        ids = [every[i] for i in sorted(chosen.tolist())]
        scan = searcher.context.scan
        held = searcher.index.vector_sizes()["sentence"][1]
        if scan is not None:
            held = scan.memory_bytes()
        out["sentence_level_bytes_per_sentence"] = held / out["index"]["sentences"]
        for method in ("sdr", None):  # warm-up (the first default request builds BM25)
            api_latency(client, texts[:1], "auto", 1, method)
        encoding_latency(searcher, texts)  # warm: the encoder compiles each new shape once
        out["encoding"] = encoding_latency(searcher, texts)
        out["default_method"], rankings["default"] = api_latency(
            client, texts, "auto", repeats, None
        )
        out["default_method"]["method"] = searcher.settings.default_method.value
        out["default_by_id"], rankings["default_by_id"] = indexed_latency(client, ids, None)
        logger.info("%s, the default method: %s", store, json.dumps(out))  # kept if cut short
        if extras:
            out["maxsim"], rankings["maxsim"] = api_latency(
                client, texts, "auto", repeats, "maxsim"
            )
        if exhaustive:
            out["sdr_exhaustive"], rankings["sdr"] = api_latency(
                client, texts, "exhaustive", 1, "sdr"
            )
        out["fused_components"] = {  # each part of the default fusion alone, posted
            method.value: api_latency(client, texts, "auto", 1, method.value)[0]
            for method, _ in (searcher.settings.fusion_weights if extras else ())
        }
        if filter is not None:
            filtered_latency(client, texts[:1], ids[:1], 1, filter)  # warm: builds the columns
            out["filtered"] = filtered_latency(client, texts, ids, repeats, filter)
            out["filtered"]["posted_p50_ratio"] = (
                out["filtered"]["posted"]["p50_ms"] / out["default_method"]["p50_ms"]
            )
            out["filtered"]["by_id_p50_ratio"] = (
                out["filtered"]["by_id"]["p50_ms"] / out["default_by_id"]["p50_ms"]
            )
        out["rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        out["after_queries_gib"] = {  # file: pages of the mapped vector files, reclaimable
            "anonymous": status_gib("RssAnon"),
            "file": status_gib("RssFile"),
        }
    return out, rankings


def compare_stores(result: dict, rankings: dict) -> dict:
    """The compressed store's top-10 overlap with float32's rankings, and its p50 ratios."""
    return {
        "top10_overlap": {
            name: overlap(rankings["float32"][name], rankings["compressed"][name])
            for name in rankings["float32"]
        },
        **{
            f"{name}_p50_ratio": result["compressed"][name]["p50_ms"]
            / result["float32"][name]["p50_ms"]
            for name in ("default_method", "default_by_id", "maxsim", "sdr_exhaustive")
            if name in result["float32"] and name in result["compressed"]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--by-id", type=int, default=40, help="indexed documents as queries")
    parser.add_argument("--scale-sentences", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/query_latency.json"))
    parser.add_argument("--rankings", type=Path, default=None, help="save the top-10 ids here")
    parser.add_argument(
        "--stores",
        nargs="+",
        choices=("float32", "compressed"),
        default=["float32", "compressed"],
        help="the sentence stores measured (a GPU service holds float32 on the device)",
    )
    parser.add_argument(
        "--filter",
        type=json.loads,
        default=None,
        help="a metadata filter (JSON): also time the default method under it, posted and by "
        "id, against the same queries unfiltered",
    )
    parser.add_argument(
        "--no-exhaustive",
        action="store_true",
        help="leave out exhaustive `sdr` (minutes a query at a hundred times AILA)",
    )
    parser.add_argument(
        "--default-only",
        action="store_true",
        help="time only the default method, posted and by id (no maxsim, no fusion parts)",
    )
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    texts = [
        line.split("||", 1)[1] for line in args.queries.read_text().splitlines() if "||" in line
    ]
    result: dict = {
        "queries": len(texts),
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
    }
    rankings = {}
    for store in args.stores:  # float32: the sentence level before issue 28
        result[store], rankings[store] = measure_store(
            args.data_dir,
            store,
            texts,
            args.by_id,
            args.repeats,
            args.filter,
            not args.no_exhaustive,
            not args.default_only,
        )
        logger.info("%s: %s", store, json.dumps(result[store]))
    if len(rankings) == 2:
        result["compressed_vs_float32"] = compare_stores(result, rankings)
    if args.scale_sentences:
        result["synthetic_scale"] = synthetic_scale(args.scale_sentences, 384)
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)
    if args.rankings is not None:
        args.rankings.write_text(json.dumps(rankings))


if __name__ == "__main__":
    main()
