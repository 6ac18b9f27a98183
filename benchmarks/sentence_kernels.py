"""SDR's sentence pass in three storage formats, against the memory-bandwidth limit.

    python benchmarks/sentence_kernels.py --data-dir DIR [--queries 8] [--threads 2]
        [--out benchmarks/results/sentence_kernels.json]

The pass is stage one of SDR (`models.kernels.scoring.paragraph_similarity`): every query sentence
against every collection sentence, the best per collection paragraph, averaged per query
paragraph. It reads each stored sentence once, so its floor is the bytes of the level divided by
the memory bandwidth. This measures, on the version's real sentence vectors:

- **bandwidth**: one read of the level in each format (`amax` over the tensor), in GB/s;
- **today**: `paragraph_similarity` on the float32 level (what the service runs);
- **float32 / bfloat16 / int8** passes written the same way (blocks of whole paragraphs,
  products, segment max, paragraph average), the int8 one with a scale per row and per query
  sentence and int32 accumulation (`torch._int_mm`), and int8 through oneDNN's dynamically
  quantised linear layer (`int8-onednn`: u8 x s8 on VNNI, the rows prepacked per block);

each as p50 milliseconds per query over real indexed documents as queries, its ratio to today,
how far it is from its format's read floor, the products' share of it (and their GFLOP/s at
the median query's size), and its largest absolute error in `P` against today's float32
result. With n query sentences the pass does 2 n d flops per byte-row read, so for a long
query it is bound by arithmetic, not by memory. Run it alone on the machine.

`maxsim_pass` measures the default method's sentence pass the same way (the best match in
each document, no paragraphs): float32 against the compressed level of issue 28.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from record import save

from docsim.indexer.store.db import make_engine
from docsim.indexer.store.versions import active_version
from docsim.models.kernels.alignment import sentence_best
from docsim.models.kernels.scan import approximate_best, compress, fit_basis, project
from docsim.models.kernels.scoring import RaggedCollection, averaging_matrix, paragraph_similarity
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.served.sentence_scan import padding_group
from docsim.search.settings import QuerySettings, SearchSettings

BLOCK_SENTENCES = 65536
Sims = Callable[[int, int, torch.Tensor], torch.Tensor]  # (r0, r1, query) -> (r, n) float32


def quantise_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per row: `rows ~ codes * scale[:, None]`; `(m, d)` -> codes, `(m,)`."""
    scale = rows.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    codes = torch.round(rows / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return codes, scale


def paragraph_blocks(lengths: torch.Tensor) -> list[tuple[int, int, int, int]]:
    """`(j0, j1, r0, r1)`: the blocks of whole paragraphs the passes walk, about
    `BLOCK_SENTENCES` sentences each."""
    ends = torch.cumsum(lengths, 0)
    blocks, j0 = [], 0
    while j0 < len(lengths):
        r0 = int(ends[j0 - 1]) if j0 else 0
        j1 = max(int(torch.searchsorted(ends, r0 + BLOCK_SENTENCES, right=True)), j0 + 1)
        blocks.append((j0, j1, r0, int(ends[j1 - 1])))
        j0 = j1
    return blocks


def onednn_int8(sentences: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, Sims]:
    """int8 rows prepacked per block for oneDNN's dynamically quantised linear layer (the
    query quantised to uint8 on the fly, u8 x s8 products on VNNI). torch marks its quantised
    tensor API deprecated: measured here as a candidate, not a dependency."""
    import warnings

    torch.backends.quantized.engine = "onednn"
    layers = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _, _, r0, r1 in paragraph_blocks(lengths):
            rows = sentences[r0:r1]
            scale = rows.abs().amax(dim=1).clamp(min=1e-12) / 127.0
            zero = torch.zeros(len(rows), dtype=torch.long)
            layer = torch.ao.nn.quantized.dynamic.Linear(
                rows.shape[1], len(rows), bias_=False, dtype=torch.qint8
            )
            layer.set_weight_bias(
                torch.quantize_per_channel(rows, scale, zero, 0, torch.qint8), None
            )
            layers[(r0, r1)] = layer
    codes = quantise_rows(sentences)[0]  # what the prepacked layers hold, for the byte count

    def int8(r0: int, r1: int, query: torch.Tensor) -> torch.Tensor:
        return layers[(r0, r1)](query).T  # (r, n)

    return codes, int8


def formats(sentences: torch.Tensor, lengths: torch.Tensor) -> dict[str, tuple[torch.Tensor, Sims]]:
    """Each format's stored level and its block product."""
    as_bf16 = sentences.to(torch.bfloat16)
    codes, scale = quantise_rows(sentences)

    def fp32(r0: int, r1: int, query: torch.Tensor) -> torch.Tensor:
        return sentences[r0:r1] @ query.T

    def bf16(r0: int, r1: int, query: torch.Tensor) -> torch.Tensor:
        return (as_bf16[r0:r1] @ query.to(torch.bfloat16).T).float()

    def int8(r0: int, r1: int, query: torch.Tensor) -> torch.Tensor:
        q_codes, q_scale = quantise_rows(query)
        n = len(query)
        padded = -(-n // 8) * 8  # _int_mm wants a multiple of 8 columns
        if padded != n:
            q_codes = torch.cat([q_codes, q_codes.new_zeros(padded - n, q_codes.shape[1])])
        products = torch._int_mm(codes[r0:r1], q_codes.T.contiguous())[:, :n]  # (r, n) int32
        return products.float() * scale[r0:r1, None] * q_scale[None, :]

    return {
        "float32": (sentences, fp32),
        "bfloat16": (as_bf16, bf16),
        "int8": (codes, int8),
        "int8-onednn": onednn_int8(sentences, lengths),
    }


def blocked_pass(
    sims: Sims, query: torch.Tensor, query_lengths: torch.Tensor, lengths: torch.Tensor
) -> torch.Tensor:
    """`P` `(I, J)` as `paragraph_similarity` computes it, with `sims` for the products."""
    average = averaging_matrix(query_lengths, torch.float32)  # (I, n)
    out = torch.empty(average.shape[0], len(lengths))
    for j0, j1, r0, r1 in paragraph_blocks(lengths):
        best = torch.segment_reduce(sims(r0, r1, query), "max", lengths=lengths[j0:j1], axis=0)
        out[:, j0:j1] = average @ best.T
    return out


def products_only(sims: Sims, query: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The products of every block and nothing else (their part of the pass's time)."""
    last = query.new_empty(0)
    for _, _, r0, r1 in paragraph_blocks(lengths):
        last = sims(r0, r1, query)
    return last


def read_seconds(stored: torch.Tensor, repeats: int = 5) -> float:
    """The best time of one full read of `stored`."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        stored.amax()
        times.append(time.perf_counter() - started)
    return min(times)


def maxsim_pass(
    sentences: torch.Tensor,
    document_lengths: torch.Tensor,
    queries: list[torch.Tensor],
    peak_gb_s: float,
    timed: Callable,
) -> dict:
    """The default method's sentence pass (each query sentence's best match in each
    document): float32 `sentence_best` (before issue 28) against the compressed level's
    `approximate_best` (`models.kernels.scan`, with the service's default settings), each against
    its read floor; the compressed pass's mean and largest absolute error in `B`."""
    search = SearchSettings()
    collection = RaggedCollection(
        sentences, document_lengths, torch.ones(len(document_lengths), dtype=torch.long)
    )
    sample = sentences[:: max(1, len(sentences) // 65536)]
    basis = fit_basis(sample, search.scan.dimensions)
    group = search.scan.group or padding_group(document_lengths.numpy())
    scan = compress(project(sentences, basis), document_lengths, basis, group)
    float32_ms, exact = timed(lambda q, ql: sentence_best(q, collection))
    scan_ms, approximate = timed(lambda q, ql: approximate_best(q, scan))
    products_ms, _ = timed(
        lambda q, ql: [scan.rows[r0:r1] @ project(q, basis).T for *_, r0, r1 in scan.blocks()]
    )
    errors = [(a - e).abs() for a, e in zip(approximate, exact, strict=True)]
    out = {"dimensions": int(basis.shape[1]), "group": group}
    for name, level_bytes, ms in (
        ("float32", sentences.numel() * 4, float32_ms),
        ("compressed", scan.rows.numel() * scan.rows.element_size(), scan_ms),
    ):
        floor_ms = 1000 * level_bytes / (peak_gb_s * 1e9)
        out[name] = {
            "bytes_per_sentence": level_bytes / len(sentences),
            "p50_ms": ms,
            "read_floor_ms": floor_ms,
            "times_floor": ms / floor_ms,
        }
    out["compressed"] |= {
        "vs_float32": scan_ms / float32_ms,
        "products_only_p50_ms": products_ms,
        "mean_abs_error_in_B": float(torch.cat([e.flatten() for e in errors]).mean()),
        "max_abs_error_in_B": max(float(e.max()) for e in errors),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=8, help="Indexed documents as queries.")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/sentence_kernels.json")
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    settings = QuerySettings(data_dir=args.data_dir)
    engine = make_engine(settings.database_url)
    index = LoadedIndex.load(engine, active_version(engine))
    collection = index.collection
    sentences = collection.sentences.float().contiguous()  # (N, d) what the service holds
    lengths = collection.paragraph_lengths
    reference = RaggedCollection(sentences, lengths, collection.document_lengths)
    p_start, s_start = index.doc_paragraph_start, index.doc_unit_start["sentence"]
    rng = np.random.default_rng(0)
    queries = []
    for d in rng.choice(index.n_documents, size=args.queries, replace=False).tolist():
        rows = sentences[int(s_start[d]) : int(s_start[d + 1])]
        query_lengths = lengths[int(p_start[d]) : int(p_start[d + 1])]
        queries.append((rows, query_lengths))

    stored = formats(sentences, lengths)
    bandwidth = {name: level.numel() * level.element_size() / read_seconds(level) / 1e9
                 for name, (level, _) in stored.items()}  # fmt: skip
    peak = max(bandwidth.values())

    def timed(run: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> tuple[float, list]:
        times, results = [], []
        for rows, query_lengths in queries:
            started = time.perf_counter()
            results.append(run(rows, query_lengths))
            times.append(time.perf_counter() - started)
        return 1000 * statistics.median(times), results

    today_ms, today = timed(lambda q, ql: paragraph_similarity(q, ql, reference))
    report = {
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": args.threads},
        "sentences": int(len(sentences)),
        "dim": int(sentences.shape[1]),
        "paragraphs": int(len(lengths)),
        "queries": args.queries,
        "query_sentences_median": int(statistics.median(len(q) for q, _ in queries)),
        "bandwidth_gb_s": bandwidth,
        "today_float32_p50_ms": today_ms,
        "formats": {},
    }
    for name, (level, sims) in stored.items():
        ms, found = timed(lambda q, ql, sims=sims: blocked_pass(sims, q, ql, lengths))
        level_bytes = level.numel() * level.element_size()
        floor_ms = 1000 * level_bytes / (peak * 1e9)
        error = max(float((f - t).abs().max()) for f, t in zip(found, today, strict=True))
        products_ms, _ = timed(lambda q, ql, sims=sims: products_only(sims, q, lengths))
        flops = 2 * len(sentences) * report["query_sentences_median"] * sentences.shape[1]
        report["formats"][name] = {
            "bytes_per_sentence": level_bytes / len(sentences),
            "p50_ms": ms,
            "vs_today": ms / today_ms,
            "read_floor_ms": floor_ms,
            "times_floor": ms / floor_ms,
            "products_only_p50_ms": products_ms,
            "products_gflop_s": flops / (products_ms / 1000) / 1e9,
            "max_abs_error_in_P": error,
        }
    report["maxsim_pass"] = maxsim_pass(
        sentences, torch.from_numpy(np.diff(s_start)), [q for q, _ in queries], peak, timed
    )
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, report)


if __name__ == "__main__":
    main()
