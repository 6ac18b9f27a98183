"""The sentence pass of SDR and `maxsim` on a device (a GPU, or the CPU) at 1x and 10x a real
collection: float32 rows against float16 rows (the tensor cores' path, `block_cosines`), with
the floor set by reading the rows once at the device's measured copy bandwidth.

    python benchmarks/device_scoring.py --data-dir DIR [--device cuda] [--factors 1 10]
        [--noise 0.35] [--queries FILE] [--block-sentences 65536 1048576]
        [--out benchmarks/results/device_scoring.json]

The collection is the active version's real sentence vectors (AILA's for the figures), then
`factor - 1` perturbed copies of every document made on the device, with the same paragraph
and document lengths: a copy of x is `normalise(x + noise * g / sqrt(d))`, g standard normal
(as `growth.py` grows it). The queries are the AILA development queries (or a JSONL file's
`facet_text`/`text`), encoded once by the version's encoder.

Per factor, dtype and block size: p50/p95 of `sdr_scores` (normalised, exhaustive: the
default method's sentence pass) and of `maxsim`, each query synchronised; the device memory
the rows take; and the top-10 overlap of each ranking with float32's at the same factor
(float32 on the device against the CPU's float32 at 1x as well).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from device_build import save  # benchmarks/device_build.py: written after every step
from growth import query_texts  # benchmarks/growth.py: scripts run as `python benchmarks/X.py`

from docsim.indexer.store.db import make_engine
from docsim.indexer.text.corpus import json_document
from docsim.models.kernels.alignment import maxsim_scores, sentence_best
from docsim.models.kernels.scoring import RaggedCollection, sdr_scores
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings

logger = logging.getLogger("benchmarks.device_scoring")
AILA_QUERIES = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "queries_dev.txt"
)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def grown(
    base: RaggedCollection, factor: int, noise: float, device: torch.device
) -> RaggedCollection:
    """`base` and `factor - 1` perturbed copies of it, as float16 rows on `device`."""
    n, d = base.sentences.shape
    rows = torch.empty(n * factor, d, dtype=torch.float16, device=device)  # (n * factor, d)
    generator = torch.Generator(device=device).manual_seed(factor)
    step = 1 << 18
    for copy in range(factor):
        for r0 in range(0, n, step):
            x = base.sentences[r0 : r0 + step].to(device)  # (r, d) float32
            if copy:
                g = torch.randn(x.shape, generator=generator, device=device)
                x = torch.nn.functional.normalize(x + noise * g / d**0.5, dim=1)
            rows[copy * n + r0 : copy * n + r0 + len(x)] = x.half()
    return RaggedCollection(
        rows, base.paragraph_lengths.repeat(factor), base.document_lengths.repeat(factor)
    )


def copy_bandwidth(rows: torch.Tensor) -> float:
    """Bytes per second of reading and writing `rows` once (the best of three clones)."""
    best = float("inf")
    for _ in range(3):
        synchronize(rows.device)
        started = time.perf_counter()
        rows.clone()
        synchronize(rows.device)
        best = min(best, time.perf_counter() - started)
    return 2 * rows.element_size() * rows.numel() / best


def timed(
    rank: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    queries: list[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
) -> tuple[dict, list[list[int]]]:
    """p50/p95 of `rank` over the queries (one warm-up), and each query's top 10."""
    rank(*queries[0])
    latencies, tops = [], []
    for source, lengths in queries:
        synchronize(device)
        started = time.perf_counter()
        scores = rank(source, lengths)
        synchronize(device)
        latencies.append((time.perf_counter() - started) * 1000)
        tops.append(torch.topk(scores.float().cpu(), 10).indices.tolist())
    return {
        "p50_ms": round(float(np.percentile(latencies, 50)), 2),
        "p95_ms": round(float(np.percentile(latencies, 95)), 2),
        "mean_ms": round(statistics.mean(latencies), 2),
    }, tops


def overlap(a: list[list[int]], b: list[list[int]]) -> dict:
    found = [len(set(x) & set(y)) / 10 for x, y in zip(a, b, strict=True)]
    return {"mean": round(statistics.mean(found), 4), "min": min(found)}


def rankers(
    collection: RaggedCollection, block: int
) -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    def sdr(source: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return sdr_scores(source, lengths, collection, block_sentences=block)[0]

    def maxsim(source: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return maxsim_scores(sentence_best(source, collection, block_sentences=block))

    return {"sdr": sdr, "maxsim": maxsim}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--noise", type=float, default=0.35)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--block-sentences", type=int, nargs="+", default=[65536, 1 << 20])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/device_scoring.json"))
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    device = torch.device(args.device)
    settings = QuerySettings(
        data_dir=args.data_dir, search=SearchSettings(sentence_store="float32")
    )
    searcher = open_searcher(settings, make_engine(settings.database_url))
    encoded = [
        searcher.query_from_source(json_document({"id": f"q{i}", "text": t}))
        for i, t in enumerate(query_texts(args.queries))
    ]
    queries = [(q.sentence_vectors.to(device), q.paragraph_lengths) for q in encoded]
    cpu_queries = [(q.sentence_vectors.cpu(), q.paragraph_lengths) for q in encoded]
    base = searcher.index.collection
    base = RaggedCollection(
        base.sentences.float().cpu(), base.paragraph_lengths, base.document_lengths
    )
    result: dict = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "sentences": int(base.sentences.shape[0]),
        "documents": base.n_documents,
        "queries": len(queries),
        "query_sentences_mean": statistics.mean(len(q[0]) for q in queries),
        "noise": args.noise,
        "factors": {},
    }
    cpu_tops = {
        name: timed(rank, cpu_queries, torch.device("cpu"))[1]
        for name, rank in rankers(base, 65536).items()
    }
    del searcher
    for factor in args.factors:
        half = grown(base, factor, args.noise, device)
        full = RaggedCollection(
            half.sentences.float(), half.paragraph_lengths, half.document_lengths
        )
        bandwidth = copy_bandwidth(half.sentences)
        row: dict = {
            "sentences": int(half.sentences.shape[0]),
            "copy_bandwidth_gb_s": round(bandwidth / 1e9, 1),
            "read_floor_ms": {
                "float32": round(4 * full.sentences.numel() / (bandwidth / 2) * 1000, 3),
                "float16": round(2 * half.sentences.numel() / (bandwidth / 2) * 1000, 3),
            },
            "runs": [],
        }
        reference: dict[str, list[list[int]]] = {}
        for dtype, collection in (("float32", full), ("float16", half)):
            for block in args.block_sentences:
                for name, rank in rankers(collection, block).items():
                    figures, tops = timed(rank, queries, device)
                    reference.setdefault(name, tops)
                    figures |= {"method": name, "dtype": dtype, "block_sentences": block}
                    figures["top10_overlap_float32"] = overlap(tops, reference[name])
                    if factor == 1:
                        figures["top10_overlap_cpu_float32"] = overlap(tops, cpu_tops[name])
                    row["runs"].append(figures)
                    logger.info("factor %d: %s", factor, figures)
        if device.type == "cuda":
            row["max_memory_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        result["factors"][str(factor)] = row
        save(result, args.out)  # after every factor, so that a run stopped early keeps it
        del half, full
        if device.type == "cuda":
            torch.cuda.empty_cache()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
