"""Encoding throughput of every inference path on the same texts, in one run, against torch
fp32 (the reference for every faster path).

    python benchmarks/encode_throughput.py [--sentences 4000] [--chunks 400] [--repeats 2]
        [--out benchmarks/results/encode_throughput.json]

Texts: the sentences and token chunks (as the indexer splits and chunks them) of AILA 2019
judgments (../shared/data) when present, else of the sample corpus. The int8 exports are
calibrated on other documents of the same corpus, as a build calibrates on its corpus.

Paths (each encodes the sentences, then the chunks; tokenisation and pooling included):
- `torch_fp32`, `torch_bf16`: docsim's encoder on PyTorch (bf16 autocast is what docsim ran
  before the int8 backend);
- `openvino_int8`: docsim's int8 backend (NNCF static quantisation, two streams);
- `onnxruntime_dynamic_int8`: the recipe of sentence-transformers' ONNX int8 backend (ONNX
  export, ONNX Runtime dynamic quantisation, int8 weights per channel), built here directly:
  sentence-transformers' own backends need `optimum`, whose releases pin transformers < 4.58
  and cannot be installed beside docsim's transformers;
- `sentence_transformers`: its default PyTorch path, bf16 autocast, batch size 32;
- `bare_forward_bf16`: the model's forward pass alone on pre-tokenised batches (the floor
  docsim's torch path is measured against).

Reported per path: sentences/s, chunks/s, characters/s, the ratio to torch fp32 and torch
bf16, and the agreement of its vectors with torch fp32's: cosine (mean, 1st percentile,
minimum) and overlap@10 of each text's nearest neighbours among the others. Each path runs
`--repeats` times, interleaved; the best time counts.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from record import save

from docsim.indexer.settings import Settings
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.corpus import SAMPLE_CORPUS, Skipped, read_corpus
from docsim.indexer.text.documents import Document
from docsim.indexer.text.sentences import load_splitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.loading import load_encoder, resolve_encoder_path
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.inference.openvino_export import LastHiddenState, export_openvino

if TYPE_CHECKING:  # annotations only: `main` imports it when the benchmark runs
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger("benchmarks.encode_throughput")
AILA = Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "casedocs"


def load_documents(encoder: TransformerEncoder, n_docs: int) -> tuple[list[Document], str]:
    corpus = AILA if AILA.exists() else SAMPLE_CORPUS
    splitter = load_splitter()
    docs: list[Document] = []
    for source in read_corpus(corpus):
        if isinstance(source, Skipped):
            continue
        docs.append(split_document(source, splitter))
        if len(docs) >= n_docs:
            break
    return add_chunks(docs, encoder, encoder.chunk_capacity), str(corpus)


def texts_of(docs: list[Document]) -> tuple[list[str], list[str]]:
    sentences = [d.text[s.start : s.end] for d in docs for s in d.sentences()]
    chunks = [d.text[c.start : c.end] for d in docs for c in d.chunks]
    return sentences, chunks


def agreement(vectors: torch.Tensor, reference: torch.Tensor, k: int = 10) -> dict:
    """Cosine of each vector to its reference (mean, 1st percentile, minimum), and the mean
    overlap@k of each text's k nearest other texts under both."""
    cosine = (vectors * reference).sum(dim=1)  # (n,) unit vectors both

    def neighbours(x: torch.Tensor) -> torch.Tensor:
        similarity = x @ x.T  # (n, n)
        similarity.fill_diagonal_(-2.0)
        return similarity.topk(k, dim=1).indices  # (n, k)

    ours, theirs = neighbours(vectors), neighbours(reference)
    shared = [len(set(a.tolist()) & set(b.tolist())) / k for a, b in zip(ours, theirs, strict=True)]
    return {
        "cosine_mean": round(float(cosine.mean()), 6),
        "cosine_p1": round(float(torch.quantile(cosine, 0.01)), 6),
        "cosine_min": round(float(cosine.min()), 6),
        f"overlap_at_{k}": round(sum(shared) / len(shared), 4),
    }


def bare_forward(encoder: TransformerEncoder) -> Callable[[list[str]], torch.Tensor | None]:
    def run(texts: list[str]) -> None:
        batches = list(encoder.plan_batches(encoder.tokenize(texts)))  # outside the clock
        start = time.perf_counter()
        with torch.inference_mode(), encoder._autocast():
            for batch in batches:
                encoder.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
        run.seconds = time.perf_counter() - start  # type: ignore[attr-defined]

    return run


def openvino_int8(calibration: list[str], workdir: Path) -> TransformerEncoder:
    encoder: TransformerEncoder = load_encoder("minilm", precision="fp32")  # type: ignore[assignment]
    batches = list(encoder.plan_batches(encoder.tokenize(calibration)))
    started = time.perf_counter()
    export_openvino(encoder.model, batches, workdir / "openvino")
    logger.info("OpenVINO int8 export: %.1f s", time.perf_counter() - started)
    encoder.use_openvino(workdir / "openvino")
    return encoder


def onnxruntime_dynamic_int8(
    encoder: TransformerEncoder, workdir: Path
) -> Callable[[list[str]], torch.Tensor] | None:
    try:
        import onnxruntime
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        logger.warning("onnxruntime is not installed: its path is left out")
        return None

    example = next(encoder.plan_batches(encoder.tokenize(["an example", "another one here"])))
    fp32_file, int8_file = workdir / "model.onnx", workdir / "model.int8.onnx"
    torch.onnx.export(
        LastHiddenState(copy.deepcopy(encoder.model).float().eval()),
        (example.input_ids, example.attention_mask),
        fp32_file,
        input_names=["input_ids", "attention_mask"],
        output_names=["last_hidden_state"],
        dynamic_axes={n: {0: "batch", 1: "tokens"} for n in ("input_ids", "attention_mask")},
        dynamo=False,
    )
    quantize_dynamic(
        fp32_file, int8_file, weight_type=QuantType.QInt8, per_channel=True,
        op_types_to_quantize=["MatMul", "Gemm"],
    )  # fmt: skip
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = onnxruntime.InferenceSession(str(int8_file), options, ["CPUExecutionProvider"])

    def run(texts: list[str]) -> torch.Tensor:
        token_ids = encoder.tokenize(texts)
        out = torch.empty((len(texts), encoder.dim))
        for batch in encoder.plan_batches(token_ids):
            (hidden,) = session.run(
                None,
                {
                    "input_ids": batch.input_ids.numpy(),
                    "attention_mask": batch.attention_mask.numpy(),
                },
            )
            out[torch.from_numpy(batch.rows)] = encoder.pooled(batch, torch.from_numpy(hidden))
        return out

    return run


def parse_args() -> argparse.Namespace:
    """The command line's options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sentences", type=int, default=4000)
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/encode_throughput.json")
    )
    return parser.parse_args()


def measured_and_calibration(
    docs: list[Document], n_sentences: int, n_chunks: int
) -> tuple[list[str], list[str], list[str]]:
    """The measured sentences and chunks, from the first documents (enough of them for
    `n_sentences`), and the calibration texts: a seeded draw of the documents after them, as
    many sentences and chunks as a build calibrates on."""
    n_docs = next(
        (i for i in range(1, len(docs) + 1) if len(texts_of(docs[:i])[0]) >= n_sentences),
        len(docs) // 2,
    )
    sentences, chunks = texts_of(docs[:n_docs])
    sentences, chunks = sentences[:n_sentences], chunks[:n_chunks]
    calibration_sentences, calibration_chunks = texts_of(docs[n_docs:])
    settings = Settings()
    rng = np.random.default_rng(0)
    calibration = [
        *rng.choice(calibration_sentences, settings.encoder.calibration_sentences).tolist(),
        *rng.choice(calibration_chunks, settings.encoder.calibration_chunks).tolist(),
    ]
    return sentences, chunks, calibration


def sentence_transformers_path(
    st: SentenceTransformer, max_length: int
) -> Callable[[list[str]], torch.Tensor]:
    """sentence-transformers' default PyTorch path over `st` (cut at `max_length` tokens):
    bf16 autocast, batch size 32, normalised vectors."""
    st.max_seq_length = max_length

    def st_encode(texts: list[str]) -> torch.Tensor:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            return st.encode(
                texts, batch_size=32, convert_to_tensor=True, normalize_embeddings=True
            ).float()

    return st_encode


def timed_paths(
    paths: dict[str, Callable[[list[str]], torch.Tensor | None]],
    sentences: list[str],
    chunks: list[str],
    repeats: int,
) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, torch.Tensor]]]:
    """Each path's seconds on the sentences and on the chunks, after one warm-up, `repeats`
    times interleaved, and the vectors of its last run (for the paths that return them)."""
    for run in paths.values():  # warm up: kernel selection, allocators
        run(sentences[:256])
        run(chunks[:16])
    seconds: dict[str, dict[str, list[float]]] = {
        name: {"sentences": [], "chunks": []} for name in paths
    }
    vectors: dict[str, dict[str, torch.Tensor]] = {name: {} for name in paths}
    for repeat in range(repeats):
        for name, run in paths.items():
            for kind, texts in (("sentences", sentences), ("chunks", chunks)):
                start = time.perf_counter()
                out = run(texts)
                took = time.perf_counter() - start
                seconds[name][kind].append(getattr(run, "seconds", took))
                if out is not None:
                    vectors[name][kind] = out
        logger.info(
            "repeat %d: %s",
            repeat + 1,
            {n: [round(v[-1], 2) for v in s.values()] for n, s in seconds.items()},
        )
    return seconds, vectors


def path_figures(
    seconds: dict[str, dict[str, list[float]]],
    vectors: dict[str, dict[str, torch.Tensor]],
    counts: dict[str, int],
    chars: dict[str, int],
) -> dict[str, dict]:
    """Per path: its rates from its best times, its seconds, the agreement of its vectors with
    torch fp32's, and its speed against torch fp32 and torch bf16."""
    paths_out: dict[str, dict] = {}
    for name, times in seconds.items():
        best = {kind: min(t) for kind, t in times.items()}
        entry: dict = {
            "sentences_per_second": round(counts["sentences"] / best["sentences"], 1),
            "chunks_per_second": round(counts["chunks"] / best["chunks"], 2),
            "characters_per_second": round(
                (chars["sentences"] + chars["chunks"]) / (best["sentences"] + best["chunks"])
            ),
            "seconds": {kind: [round(x, 3) for x in t] for kind, t in times.items()},
        }
        for kind in ("sentences", "chunks"):
            if kind in vectors[name]:
                entry[f"{kind}_vs_torch_fp32"] = agreement(
                    vectors[name][kind], vectors["torch_fp32"][kind]
                )
        paths_out[name] = entry
    for name, entry in paths_out.items():
        for base in ("torch_fp32", "torch_bf16"):
            entry[f"speed_vs_{base}"] = {
                kind: round(
                    min(seconds[base][kind]) / min(seconds[name][kind]),
                    3,
                )
                for kind in ("sentences", "chunks")
            }
    return paths_out


def main() -> None:
    args = parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from sentence_transformers import SentenceTransformer

    fp32: TransformerEncoder = load_encoder("minilm", precision="fp32")  # type: ignore[assignment]
    bf16: TransformerEncoder = load_encoder("minilm", precision="bf16")  # type: ignore[assignment]
    docs, source = load_documents(fp32, 400)
    # measured texts from the first documents, calibration from the documents after them
    sentences, chunks, calibration = measured_and_calibration(docs, args.sentences, args.chunks)
    logger.info(
        "%d sentences and %d chunks from %s; %d threads",
        len(sentences),
        len(chunks),
        source,
        torch.get_num_threads(),
    )
    st = SentenceTransformer(
        str(resolve_encoder_path("minilm")[1]), device="cpu", local_files_only=True
    )
    st_encode = sentence_transformers_path(st, fp32.max_length)

    with tempfile.TemporaryDirectory() as workdir:
        paths: dict[str, Callable[[list[str]], torch.Tensor | None]] = {
            "torch_fp32": fp32.encode,
            "torch_bf16": bf16.encode,
            "openvino_int8": openvino_int8(calibration, Path(workdir)).encode,
            "sentence_transformers": st_encode,
            "bare_forward_bf16": bare_forward(bf16),
        }
        ort = onnxruntime_dynamic_int8(fp32, Path(workdir))
        if ort is not None:
            paths["onnxruntime_dynamic_int8"] = ort
        seconds, vectors = timed_paths(paths, sentences, chunks, args.repeats)

    chars = {"sentences": sum(map(len, sentences)), "chunks": sum(map(len, chunks))}
    counts = {"sentences": len(sentences), "chunks": len(chunks)}
    result = {
        "source": source,
        "sentences": counts["sentences"],
        "chunks": counts["chunks"],
        "characters": chars,
        "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "batch_tokens": fp32.batch_tokens,
        "paths": path_figures(seconds, vectors, counts, chars),
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)
    logger.info("saved %s", args.out)


if __name__ == "__main__":
    main()
