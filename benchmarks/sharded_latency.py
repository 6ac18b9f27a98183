"""Exhaustive SDR over a synthetic collection as 1, 2 and 4 Ray shard actors, against a bare
matrix product of the same shapes in one process.

    python benchmarks/sharded_latency.py [--sentences 4000000] [--shards 1 2 4] [--queries 8]
        [--device cpu|cuda] [--work-dir DIR]
        [--out benchmarks/results/sharded_latency.json]

The collection: `--sentences` random unit vectors (d = 384, float16 in one `.npy`, as a
version stores them) in documents of 20 paragraphs of 5 sentences. Queries: random documents
of 10 paragraphs of 5 sentences. For each shard count: p50/p95 of a two-round exhaustive SDR
ranking (`ShardedSdr` over `RayShards` on a local Ray with as many CPUs as the machine has),
the resident (RSS) and unique (USS: not the shared page cache) memory of every shard process
and of the coordinator; and the same queries' bare `(R, d) @ (d, n)` float32 product in this
process (the collection held as float32), whose ratio is the cost of sharding and of SDR's
hierarchy on top of the product. A projection for 1,000,000,000 sentences on GPU shards
follows from the measured per-sentence cost (see `project`).

With `--device cuda` the shard actors share the machine's GPUs (each asks Ray for
`GPUs / shards` of them) and hold their ranges there as float16; the bare products run on the
GPU too, as float32 (the shards' arithmetic) and as float16 on the tensor cores (the
hardware's floor), timed after a synchronisation.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import torch
from record import save

from docsim.search.shards.actors import LevelRows, ShardSpec
from docsim.search.shards.coordinator import ShardedSdr
from docsim.search.shards.cuts import shard_ranges
from docsim.search.shards.ray_shards import RayShards
from docsim.search.shards.shard import ShardQuery

logger = logging.getLogger("benchmarks.sharded_latency")
DIM, SENTENCES_PER_PARAGRAPH, PARAGRAPHS_PER_DOCUMENT = 384, 5, 20
QUERY_PARAGRAPHS = 10


def write_collection(path: Path, sentences: int, seed: int = 0) -> None:
    """`sentences` random unit vectors as float16, written in blocks (never all in memory)."""
    if path.exists() and np.load(path, mmap_mode="r").shape == (sentences, DIM):
        logger.info("Reusing %s", path)
        return
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(sentences, DIM))
    block = 500_000
    for start in range(0, sentences, block):
        x = rng.standard_normal((min(block, sentences - start), DIM), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[start : start + len(x)] = x.astype(np.float16)
    out.flush()
    del out
    logger.info("Wrote %d sentence vectors to %s", sentences, path)


def specs(path: Path, sentences: int, n: int, tiebreak: np.ndarray) -> list[ShardSpec]:
    per_document = SENTENCES_PER_PARAGRAPH * PARAGRAPHS_PER_DOCUMENT
    documents = sentences // per_document
    cuts = shard_ranges(np.full(documents, per_document), n)
    return [
        ShardSpec(
            levels={
                "sentence": LevelRows(
                    vectors_file=str(path),
                    file_rows=np.array([d0 * per_document, d1 * per_document]),
                    added=np.empty((0, DIM), dtype=np.float16),
                    first_row=d0 * per_document,
                )
            },
            paragraph_lengths=np.full((d1 - d0) * PARAGRAPHS_PER_DOCUMENT, SENTENCES_PER_PARAGRAPH),
            document_lengths=np.full(d1 - d0, PARAGRAPHS_PER_DOCUMENT),
            first=d0,
            tiebreak=tiebreak[d0:d1],
        )
        for d0, d1 in zip(cuts[:-1], cuts[1:], strict=True)
    ]


def queries(count: int, seed: int = 1) -> list[ShardQuery]:
    generator = torch.Generator().manual_seed(seed)
    out = []
    for q in range(count):
        x = torch.randn(QUERY_PARAGRAPHS * SENTENCES_PER_PARAGRAPH, DIM, generator=generator)
        out.append(
            ShardQuery(
                key=f"q{q}",
                sentences=x / x.norm(dim=1, keepdim=True),
                paragraph_lengths=torch.full((QUERY_PARAGRAPHS,), SENTENCES_PER_PARAGRAPH),
            )
        )
    return out


def percentiles(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(float(np.percentile(values, 50)) * 1000, 1),
        "p95_ms": round(float(np.percentile(values, 95)) * 1000, 1),
        "mean_ms": round(statistics.mean(values) * 1000, 1),
    }


def timed_products(
    collection: torch.Tensor, asked: list[ShardQuery], dtype: torch.dtype
) -> list[float]:
    """Seconds of each query's `(R, d) @ (d, n)` product, on the collection's device."""
    cuda = collection.device.type == "cuda"
    times = []
    for query in [asked[0], *asked]:  # the first one warms up (kernels chosen, pages mapped)
        source = query.sentences.to(collection.device, dtype)  # (n, d)
        if cuda:
            torch.cuda.synchronize()
        started = time.perf_counter()
        product = collection @ source.T  # (R, n)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
        del product
    return times[1:]


def bare_product(path: Path, asked: list[ShardQuery], device: str) -> dict:
    """The same products in this process: on the CPU the collection as float32 in memory; on
    a GPU as float32 and as float16 there."""
    stored = torch.from_numpy(np.load(path))  # (R, d) float16
    if device == "cpu":
        collection = stored.float()
        times = timed_products(collection, asked, torch.float32)
        rss = psutil.Process().memory_info().rss
        del collection
        return percentiles(times) | {"rss_bytes": rss}
    half = stored.to(device)
    out = {"float16": percentiles(timed_products(half, asked, torch.float16))}
    single = half.float()
    del half
    out |= percentiles(timed_products(single, asked, torch.float32))  # the shards' arithmetic
    del single
    torch.cuda.empty_cache()
    return out | {"rss_bytes": psutil.Process().memory_info().rss}


def sharded(path: Path, sentences: int, n: int, asked: list[ShardQuery], device: str) -> dict:
    import ray

    documents = sentences // (SENTENCES_PER_PARAGRAPH * PARAGRAPHS_PER_DOCUMENT)
    tiebreak = np.random.default_rng(0).permutation(documents)
    gpus = torch.cuda.device_count() / n if device == "cuda" else 0.0
    started = time.perf_counter()
    shards = RayShards(
        specs(path, sentences, n, tiebreak),
        num_cpus=os.cpu_count() / n,
        num_gpus=gpus,
        wait_for_room=60.0,  # the previous run's actors are being released
    )
    load_seconds = time.perf_counter() - started
    try:
        devices = ray.get([a.device.remote() for a in shards.actors])
        ranking = ShardedSdr(shards.call, n, tiebreak)
        ranking.rank(asked[0], 10, True)  # warm: pages mapped in, threads started
        times, tops = [], []
        for query in asked:
            started = time.perf_counter()
            hits, _, scored = ranking.rank(query, 10, True)
            times.append(time.perf_counter() - started)
            tops.append(hits.positions.tolist())
            assert scored == documents
        memory = ray.get([a.memory.remote() for a in shards.actors])
    finally:
        shards.close()
    return percentiles(times) | {
        "shards": n,
        "devices": devices,
        "load_seconds": round(load_seconds, 1),
        "shard_memory_bytes": memory,
        "coordinator_rss_bytes": psutil.Process().memory_info().rss,
        "top10": tops,
    }


def project(per_sentence_seconds: float, query_sentences: int, device: str) -> dict:
    """1,000,000,000 sentences on GPU shards (80 GB each holding the float16 vectors with 25%
    spare: the rest is the product blocks' room). On the CPU: what this machine's measured
    cost per collection sentence implies, and the H100 arithmetic (float16 tensor-core
    products at a conservative 300 TFLOP/s achieved). On a GPU: the measured cost per
    sentence of one GPU shard, times the sentences each GPU would hold (linear: the
    per-query overheads measured here are counted in full at every size, so it errs long)."""
    sentences = 1_000_000_000
    bytes_per_gpu = 80e9 * 0.75
    gpus = int(np.ceil(sentences * DIM * 2 / bytes_per_gpu))
    flops = 2 * sentences * DIM * query_sentences
    out = {"sentences": sentences, "gpu_shards_needed": gpus}
    if device == "cpu":
        return out | {
            "cpu_seconds_per_query_one_process": round(per_sentence_seconds * sentences, 1),
            "gpu_product_ms_per_query": round(flops / gpus / 300e12 * 1000, 2),
            "note": "the GPU figures are arithmetic, not a measurement: no GPU in this run",
        }
    return out | {
        "sentences_per_gpu": sentences // gpus,
        "gpu_ms_per_query_measured_rate": round(per_sentence_seconds * sentences / gpus * 1000, 1),
        "note": "one GPU shard's measured p50 per sentence, scaled to a GPU's share; the "
        "shards answer in parallel, and the coordinator's merge adds k hits per shard",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=4_000_000)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--queries", type=int, default=8)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "docsim-sharded",
        help="where the synthetic collection is written (default: the system's temporary folder)",
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/sharded_latency.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args.work_dir.mkdir(parents=True, exist_ok=True)
    path = args.work_dir / "sentences.npy"
    write_collection(path, args.sentences)
    asked = queries(args.queries)

    from docsim.indexer.ray_session import private_cluster_environment

    private_cluster_environment()
    import ray

    ray.init(
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        _temp_dir=str(args.work_dir / "ray"),
        configure_logging=False,
        log_to_driver=False,
    )
    results: dict = {"sentences": args.sentences, "dim": DIM, "cpus": os.cpu_count()}
    results["device"] = (
        torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor() or "cpu"
    )
    results["query_sentences"] = QUERY_PARAGRAPHS * SENTENCES_PER_PARAGRAPH
    try:
        results["sharded"] = [
            sharded(path, args.sentences, n, asked, args.device) for n in args.shards
        ]
    finally:
        ray.shutdown()
    results["bare_product"] = bare_product(path, asked, args.device)
    first = results["sharded"][0]["top10"]
    for run in results["sharded"]:
        run["same_top10_as_first"] = run.pop("top10") == first
        run["ratio_to_bare_product_p50"] = round(
            run["p50_ms"] / results["bare_product"]["p50_ms"], 2
        )
        logger.info(
            "%d shard(s): p50 %.0f ms, p95 %.0f ms (%.2fx the bare product), shard USS %s MiB",
            run["shards"],
            run["p50_ms"],
            run["p95_ms"],
            run["ratio_to_bare_product_p50"],
            [m["uss"] // 2**20 for m in run["shard_memory_bytes"]],
        )
    ones = [r for r in results["sharded"] if r["shards"] == 1]  # one whole GPU
    best = ones[0] if args.device == "cuda" and ones else None
    best = best or min(results["sharded"], key=lambda r: r["p50_ms"])
    results["projection"] = project(
        best["p50_ms"] / 1000 / args.sentences, results["query_sentences"], args.device
    )
    logger.info("bare product: p50 %.0f ms", results["bare_product"]["p50_ms"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, results)
    print(json.dumps({k: v for k, v in results.items() if k != "sharded"}, indent=2))


if __name__ == "__main__":
    main()
