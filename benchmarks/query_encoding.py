"""Where a posted query's encoding goes, and how close the int8 encoder is to this CPU's limit.

    python benchmarks/query_encoding.py --data-dir DIR [--queries FILE] [--repeats 5]
        [--out benchmarks/results/query_encoding.json]

A posted query is split, tokenised and encoded once (late chunking: its chunks go through the
transformer and every level is pooled from their token states). This takes the 20 AILA 2019
development queries (by default; or a JSONL file's queries), records the padded batches the
served encoder runs for each, as the service cuts them (`cut`: a batch ends where padding
would exceed `max_padding`) and in one batch a query (`whole`), and measures, alternated
`--repeats` times:

- **service**: `Searcher.query_from_source`, everything included (p50 and mean ms), with
  each batching;
- **inference**: the same batches on the compiled model alone, under the service's OpenVINO
  configuration and under the others worth trying (a cache of 256 kernel entries or
  OpenVINO's default 5,000 instead of the service's; the latency hint; f32 or bf16 for the
  operations left unquantised), each compiled once;
- **profile**: OpenVINO's per-operation times (`PERF_COUNT`) under the service's
  configuration, summed by operation type, and the int8 GOP/s of the fully connected layers
  (2 x tokens x their weights);
- **ceiling**: `torch._int_mm` (u8/s8 on VNNI through oneDNN) at the fully connected layers'
  own shapes and at 4,096 cubed, as the int8 throughput this CPU reaches on a plain product.

The question it answers: can query encoding drop by a large factor on this CPU without a
smaller model? If the fully connected layers, most of the time, already run near the plain
product's rate, it cannot.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from fastapi.testclient import TestClient
from growth import AILA_QUERIES, query_texts  # benchmarks/growth.py (run as scripts)
from record import save

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app, served_state
from docsim.indexer.text.corpus import json_document
from docsim.indexer.text.documents import SourceDocument
from docsim.models.inference.backends import SHAPE_CACHE_CAPACITY
from docsim.search.searcher import Searcher

logger = logging.getLogger("benchmarks.query_encoding")
Batches = list[dict[str, np.ndarray]]
SERVICE = "service (throughput hint, 1 stream)"


def recorded_batches(searcher: Searcher, texts: list[str]) -> list[Batches]:
    """The padded batches the served encoder runs for each query, in order."""
    backend = searcher.encoder.backend  # type: ignore[attr-defined]
    original = backend.hidden_states
    seen: Batches = []

    def recording(batches: Any) -> Any:
        for batch, hidden in original(batches):
            seen.append(
                {
                    "input_ids": batch.input_ids.numpy().copy(),
                    "attention_mask": batch.attention_mask.numpy().copy(),
                }
            )
            yield batch, hidden

    out = []
    backend.hidden_states = recording
    try:
        for i, text in enumerate(texts):
            seen = []
            searcher.query_from_source(posted(i, text))
            out.append(seen)
    finally:
        del backend.hidden_states  # the instance attribute goes; the method is back
    return out


def posted(i: int, text: str) -> SourceDocument:
    document = json_document({"id": f"q{i}", "text": text})
    if not isinstance(document, SourceDocument):
        raise ValueError(f"query {i}: {document}")
    return document


def service_ms(searcher: Searcher, texts: list[str]) -> list[float]:
    times = []
    for i, text in enumerate(texts):
        started = time.perf_counter()
        searcher.query_from_source(posted(i, text))
        times.append((time.perf_counter() - started) * 1000)
    return times


def inference_ms(request: Any, queries: list[Batches]) -> list[float]:
    times = []
    for batches in queries:
        started = time.perf_counter()
        for inputs in batches:
            request.infer(inputs)
        times.append((time.perf_counter() - started) * 1000)
    return times


def fully_connected_weights(config: Any) -> int:
    """Weights of the encoder layers' fully connected products: Q, K, V, the attention
    output, and the two feed-forward layers."""
    h, i = config.hidden_size, config.intermediate_size
    return config.num_hidden_layers * (4 * h * h + 2 * h * i)


def profile(compiled: Any, queries: list[Batches]) -> dict[str, float]:
    """Milliseconds per query by OpenVINO operation type (summed over every query)."""
    request = compiled.create_infer_request()
    by_type: collections.Counter[str] = collections.Counter()
    for batches in queries:
        for inputs in batches:
            request.infer(inputs)
            for node in request.profiling_info:
                by_type[f"{node.node_type} ({node.exec_type})"] += (
                    node.real_time.total_seconds() * 1000
                )
    return {k: v / len(queries) for k, v in by_type.most_common()}


def int_mm_gops(m: int, k: int, n: int, repeats: int = 20) -> float:
    """torch._int_mm's int8 GOP/s for an `(m, k) x (k, n)` product (best of `repeats`)."""
    a = torch.randint(-128, 127, (m, k), dtype=torch.int8)
    b = torch.randint(-128, 127, (k, n), dtype=torch.int8)
    torch._int_mm(a, b)
    best = min(_timed(lambda: torch._int_mm(a, b)) for _ in range(repeats))
    return 2 * m * k * n / best / 1e9


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": float(np.percentile(values, 50)), "mean_ms": statistics.mean(values)}


def parse_args() -> argparse.Namespace:
    """The command line's options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/query_encoding.json"))
    return parser.parse_args()


def batches_by_batching(
    searcher: Searcher, texts: list[str], batchings: dict[str, float]
) -> dict[str, list[Batches]]:
    """Each batching's recorded batches per query, the encoder's `max_padding` set to each
    batching's in turn (and left at the last)."""
    encoder: Any = searcher.encoder
    queries = {}
    for name, max_padding in batchings.items():
        encoder.max_padding = max_padding
        queries[name] = recorded_batches(searcher, texts)
    return queries


def openvino_configs(threads: int) -> dict[str, dict[str, Any]]:
    """The OpenVINO configurations compared, by name: the service's, its kernel cache at 256
    entries and at OpenVINO's default, the latency hint, and f32 or bf16 for the operations
    left unquantised."""
    configs = {
        name: {
            "PERFORMANCE_HINT": "THROUGHPUT",
            "NUM_STREAMS": 1,
            "INFERENCE_NUM_THREADS": threads,
            "CPU_RUNTIME_CACHE_CAPACITY": str(cache),
        }
        for name, cache in [
            (SERVICE, SHAPE_CACHE_CAPACITY),
            ("cache 256", 256),
            ("cache 5000 (OpenVINO's default)", 5000),
        ]
    }
    configs["latency hint"] = configs[SERVICE] | {"PERFORMANCE_HINT": "LATENCY"}
    del configs["latency hint"]["NUM_STREAMS"]
    configs["f32 for unquantised operations"] = configs[SERVICE] | {
        "INFERENCE_PRECISION_HINT": "f32"
    }
    configs["bf16 for unquantised operations"] = configs[SERVICE] | {
        "INFERENCE_PRECISION_HINT": "bf16"
    }
    return configs


def alternated_times(
    searcher: Searcher,
    texts: list[str],
    batchings: dict[str, float],
    requests: dict[str, Any],
    queries: dict[str, list[Batches]],
    repeats: int,
) -> dict[str, list[float]]:
    """Milliseconds per query of the service's encoding and of each compiled configuration's
    inference, under each batching: every shape prepared once first, then every measurement
    alternated with every other, `repeats` times. Leaves `max_padding` at the last batching's."""
    encoder: Any = searcher.encoder
    for request in requests.values():  # warm: each shape prepared once
        for batches in queries.values():
            inference_ms(request, batches)
    times: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(repeats):  # every measurement alternated with every other
        for batching, max_padding in batchings.items():
            encoder.max_padding = max_padding
            times[f"service: encode_document, {batching}"] += service_ms(searcher, texts)
            for name, request in requests.items():
                times[f"inference: {name}, {batching}"] += inference_ms(request, queries[batching])
    return times


def token_figures(queries: dict[str, list[Batches]]) -> dict[str, Any]:
    """Tokens per query (real, padded and the padding's share) and batches per query, under
    each batching."""
    padded = {b: [sum(x["attention_mask"].size for x in q) for q in queries[b]] for b in queries}
    real = [sum(int(x["attention_mask"].sum()) for x in q) for q in queries["cut"]]
    return {
        "tokens_per_query": {
            "real_mean": statistics.mean(real),
            **{f"padded_mean_{b}": statistics.mean(padded[b]) for b in queries},
            **{f"padding_share_{b}": 1 - sum(real) / sum(padded[b]) for b in queries},
        },
        **{f"batches_per_query_{b}": statistics.mean(len(q) for q in queries[b]) for b in queries},
    }


def product_rates(config: Any, cut: list[Batches], profiled: dict[str, float]) -> dict[str, Any]:
    """The fully connected layers' share of the profiled time and their int8 GOP/s (on the
    service's batches `cut`), and `torch._int_mm`'s GOP/s at their shapes and at 4,096 cubed."""
    padded = [sum(x["attention_mask"].size for x in q) for q in cut]
    fc_ms = sum(v for k, v in profiled.items() if k.startswith("FullyConnected"))
    fc_ops = 2 * fully_connected_weights(config) * statistics.mean(padded)
    hidden, inner = config.hidden_size, config.intermediate_size
    tokens = int(np.percentile(padded, 50))
    return {
        "fully_connected": {
            "share_of_profiled": fc_ms / sum(profiled.values()),
            "int8_gops": fc_ops / (fc_ms / 1000) / 1e9,
        },
        "int_mm_gops": {
            f"{tokens}x{hidden}x{inner}": int_mm_gops(tokens, hidden, inner),
            f"{tokens}x{inner}x{hidden}": int_mm_gops(tokens, inner, hidden),
            "4096x4096x4096": int_mm_gops(4096, 4096, 4096, repeats=3),
        },
    }


def main() -> None:
    args = parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    texts = query_texts(args.queries)
    import openvino

    app = create_app(ServiceSettings(data_dir=args.data_dir))
    with TestClient(app):
        searcher: Searcher = served_state(app).searcher
        encoder: Any = searcher.encoder
        cut_at = encoder.max_padding
        batchings = {"cut": cut_at, "whole": 1.0}  # the service's batches, then one a query
        queries = batches_by_batching(searcher, texts, batchings)
        threads = torch.get_num_threads()
        configs = openvino_configs(threads)
        core = openvino.Core()
        model = core.read_model(encoder.backend.directory / "model.xml")
        requests = {
            name: core.compile_model(model, "CPU", config).create_infer_request()
            for name, config in configs.items()
        }
        times = alternated_times(searcher, texts, batchings, requests, queries, args.repeats)
        encoder.max_padding = cut_at
        profiled = profile(
            core.compile_model(model, "CPU", configs[SERVICE] | {"PERF_COUNT": True}),
            queries["cut"],
        )
        result = {
            "queries": len(texts),
            "threads": threads,
            "openvino": openvino.__version__,
            "max_padding": cut_at,
            "shape_cache_capacity": SHAPE_CACHE_CAPACITY,
            **token_figures(queries),
            "latency": {name: summary(values) for name, values in times.items()},
            "inference_share_of_service": statistics.mean(times[f"inference: {SERVICE}, cut"])
            / statistics.mean(times["service: encode_document, cut"]),
            "profile_ms_per_query": dict(list(profiled.items())[:12]),
            **product_rates(encoder.config, queries["cut"], profiled),
        }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
