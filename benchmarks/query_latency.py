"""POST /similar latency on a real index, the scoring step against a bare matrix product,
candidate-mode fidelity, and a synthetic scale run.

    python benchmarks/query_latency.py --data-dir DIR [--queries FILE] [--scale-sentences N]
        [--out benchmarks/results/query_latency.json]

(default queries: the AILA 2019 development queries in ../shared/data)

Parts (all in one run, figures printed and saved as JSON):
1. p50/p95 of POST /similar (in-process ASGI, query encoding included) over the queries: `sdr`
   in exhaustive and in candidate mode, and the service's default method (`auto` mode) with
   its ratio to exhaustive `sdr`.
2. The SDR scoring step (`models.scoring.sdr_scores`) against the bare `(R, d) @ (d, n)`
   product of the same shapes: the ratio is the cost of the hierarchy on top of the matmul.
3. Candidate-mode fidelity: overlap@10 of candidate against exhaustive rankings.
4. Synthetic scale: a ragged collection of `--scale-sentences` random unit vectors with an
   IVF sentence index; candidate-mode latency and resident memory.
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

from app.core.config import ServiceSettings
from app.main import create_app
from indexer.search.loaded_index import LoadedIndex
from indexer.search.searcher import Searcher
from indexer.search.settings import SearchSettings
from indexer.search.types import Query, ScoringMode, SearchOptions
from indexer.store.vector_index import FaissIndex, choose_factory
from models.pooling import segment_mean
from models.scoring import RaggedCollection, sdr_scores

logger = logging.getLogger("benchmarks.query_latency")
AILA_QUERIES = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "queries_dev.txt"
)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def api_latency(
    client: TestClient, texts: list[str], mode: str, repeats: int, method: str | None
) -> dict:
    """p50/p95 of POST /similar over `texts` with `method` (None: the service's default)."""
    latencies, rankings = [], []
    body = {"top_k": 10, "mode": mode} | ({"method": method} if method else {})
    for _ in range(repeats):
        rankings = []
        for text in texts:
            started = time.perf_counter()
            response = client.post("/similar", json={"document": {"text": text}, **body})
            latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            rankings.append([r["document_id"] for r in response.json()["results"]])
    return {
        "p50_ms": percentile(latencies, 50),
        "p95_ms": percentile(latencies, 95),
        "mean_ms": statistics.mean(latencies),
        "requests": len(latencies),
    }, rankings


def scoring_vs_matmul(searcher: Searcher, texts: list[str]) -> dict:
    ratios, score_ms, matmul_ms = [], [], []
    collection = searcher.index.collection
    for text in texts:
        from indexer.text.corpus import json_document

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


def synthetic_scale(n_sentences: int, dim: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    paragraph_lengths = rng.integers(1, 8, size=n_sentences // 3)
    paragraph_lengths = paragraph_lengths[np.cumsum(paragraph_lengths) <= n_sentences]
    n_sentences = int(paragraph_lengths.sum())
    document_lengths = rng.integers(10, 60, size=len(paragraph_lengths))
    document_lengths = document_lengths[np.cumsum(document_lengths) <= len(paragraph_lengths)]
    document_lengths[-1] += len(paragraph_lengths) - int(document_lengths.sum())
    vectors = rng.standard_normal((n_sentences, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    n_docs = len(document_lengths)
    doc_vectors = rng.standard_normal((n_docs, dim), dtype=np.float32)
    doc_vectors /= np.linalg.norm(doc_vectors, axis=1, keepdims=True)
    sentence_ids = np.arange(n_sentences, dtype=np.int64)
    started = time.perf_counter()
    factory = choose_factory(n_sentences, 1_000_000, "IVF{nlist},Flat")
    sentence_index = FaissIndex.build(vectors, sentence_ids, factory, nprobe=16)
    segments = torch.repeat_interleave(
        torch.arange(len(paragraph_lengths)), torch.from_numpy(paragraph_lengths)
    )
    paragraph_vectors = segment_mean(
        torch.from_numpy(vectors), segments, len(paragraph_lengths)
    ).numpy()
    paragraph_factory = choose_factory(len(paragraph_vectors), 250_000, "IVF{nlist},Flat")
    paragraph_index = FaissIndex.build(
        paragraph_vectors,
        np.arange(len(paragraph_vectors), dtype=np.int64),
        paragraph_factory,
        nprobe=16,
    )
    build_s = time.perf_counter() - started
    doc_ids = np.arange(n_docs, dtype=np.int64)
    paragraph_ids = np.arange(len(paragraph_lengths), dtype=np.int64)
    doc_paragraph_start = np.concatenate([[0], np.cumsum(document_lengths)])  # (D + 1,)
    sentence_start = np.concatenate([[0], np.cumsum(paragraph_lengths)])  # (J + 1,)
    index = LoadedIndex(
        version_id=0,
        path=Path("."),
        manifest={"chunk_tokens": 254},
        indices={
            "sentence": sentence_index,
            "paragraph": paragraph_index,
            "document": FaissIndex.build(doc_vectors, doc_ids),
        },
        vectors={"sentence": torch.from_numpy(vectors), "document": torch.from_numpy(doc_vectors)},
        ids={"sentence": sentence_ids, "document": doc_ids, "paragraph": paragraph_ids},
        collection=RaggedCollection(
            torch.from_numpy(vectors),
            torch.from_numpy(paragraph_lengths),
            torch.from_numpy(document_lengths),
        ),
        doc_ids=doc_ids,
        external_ids=[f"d{i}" for i in range(n_docs)],
        titles=[""] * n_docs,
        paragraph_ids=paragraph_ids,
        doc_paragraph_start=doc_paragraph_start,
        paragraph_sentence_start=sentence_start,
        doc_unit_start={
            "paragraph": doc_paragraph_start,
            "sentence": sentence_start[doc_paragraph_start],
        },
    )
    searcher = Searcher(index, encoder=None, splitter=None, engine=None, settings=SearchSettings())  # type: ignore[arg-type]
    latencies = []
    for q in range(20):
        n = int(rng.integers(20, 80))
        source = torch.from_numpy(vectors[rng.choice(n_sentences, n, replace=False)])
        source = torch.nn.functional.normalize(
            source + 0.3 * torch.randn(n, dim, generator=torch.Generator().manual_seed(q)), dim=-1
        )
        query = Query(
            text="",
            paragraphs=[(0, 0)] * n,
            sentence_vectors=source,
            paragraph_lengths=torch.ones(n, dtype=torch.long),
            level_vectors={"document": source.mean(0, keepdim=True)},
            level_spans={},
        )
        started = time.perf_counter()
        searcher.similar(
            query, SearchOptions(top_k=10, mode=ScoringMode.candidate, matches_per_result=0)
        )
        latencies.append((time.perf_counter() - started) * 1000)
    return {
        "sentences": n_sentences,
        "documents": n_docs,
        "sentence_factory": factory,
        "index_build_s": round(build_s, 1),
        "candidate_p50_ms": percentile(latencies, 50),
        "candidate_p95_ms": percentile(latencies, 95),
        "max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--scale-sentences", type=int, default=2_000_000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/query_latency.json"))
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    texts = [
        line.split("||", 1)[1] for line in args.queries.read_text().splitlines() if "||" in line
    ]

    result: dict = {"queries": len(texts), "threads": torch.get_num_threads()}
    app = create_app(ServiceSettings(data_dir=args.data_dir))
    with TestClient(app) as client:
        searcher: Searcher = app.state.service.searcher
        result["index"] = {
            "documents": searcher.index.n_documents,
            "sentences": len(searcher.index.ids["sentence"]),
        }
        for method in ("sdr", None):  # warm-up (the first default request builds BM25)
            api_latency(client, texts[:1], "auto", 1, method)
        result["exhaustive"], exhaustive = api_latency(
            client, texts, "exhaustive", args.repeats, "sdr"
        )
        default = api_latency(client, texts, "auto", args.repeats, None)[0]
        result["default_method"] = {
            "method": searcher.settings.default_method.value,
            **default,
            "p50_vs_sdr": default["p50_ms"] / result["exhaustive"]["p50_ms"],
            "p95_vs_sdr": default["p95_ms"] / result["exhaustive"]["p95_ms"],
        }
        result["candidate"], candidate = api_latency(
            client, texts, "candidate", args.repeats, "sdr"
        )
        overlap = [len(set(a) & set(b)) / 10 for a, b in zip(exhaustive, candidate, strict=True)]
        result["candidate_overlap_at_10"] = {"mean": statistics.mean(overlap), "min": min(overlap)}
        result["scoring_vs_matmul"] = scoring_vs_matmul(searcher, texts)
    logger.info("real index: %s", json.dumps(result))
    if args.scale_sentences:
        result["synthetic_scale"] = synthetic_scale(args.scale_sentences, 384)
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
