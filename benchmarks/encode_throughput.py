"""Sentences/s of the indexer's encode path against (a) the bare model forward pass on the
same pre-tokenised batches and (b) sentence-transformers' `encode`, same sentences, same
precision, in one run; and how far its vectors are from torch fp32's (the reference for every
faster path): cosine (mean, 1st percentile, minimum) and overlap@10 of each sentence's nearest
neighbours among the others.

    python benchmarks/encode_throughput.py [--sentences 8000] [--precision auto] [--out FILE]

Sentences come from AILA 2019 (../shared/data) when present, else from the sample corpus.
Each method runs `--repeats` times, interleaved; the best time of each is reported.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
from pathlib import Path

import torch

from indexer.text.corpus import SAMPLE_CORPUS, Skipped, read_corpus
from indexer.text.sentences import load_splitter
from indexer.text.split import split_document
from models.loading import load_encoder, resolve_encoder_path
from models.transformer import TransformerEncoder

logger = logging.getLogger("benchmarks.encode_throughput")
AILA = Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "casedocs"


def load_sentences(n: int) -> tuple[list[str], str]:
    corpus = AILA if AILA.exists() else SAMPLE_CORPUS
    splitter = load_splitter()
    sentences: list[str] = []
    for source in read_corpus(corpus):
        if isinstance(source, Skipped):
            continue
        doc = split_document(source, splitter)
        sentences.extend(doc.text[s.start : s.end] for s in doc.sentences())
        if len(sentences) >= n:
            break
    return sentences[:n], str(corpus)


def bare_forward(encoder: TransformerEncoder, token_ids: list[list[int]]) -> None:
    batches = list(encoder.plan_batches(token_ids))  # prepared outside the timed region
    start = time.perf_counter()
    with torch.inference_mode(), encoder._autocast():
        for batch in batches:
            encoder.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    return time.perf_counter() - start


def agreement(vectors: torch.Tensor, reference: torch.Tensor, k: int = 10) -> dict:
    """Cosine of each vector to its reference `(n,)` (mean, 1st percentile, minimum), and the
    mean overlap@k of each sentence's k nearest other sentences under both."""
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sentences", type=int, default=8000)
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--st-batch-sizes", type=int, nargs="+", default=[32, 128])
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/encode_throughput.json")
    )
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    from sentence_transformers import SentenceTransformer

    sentences, source = load_sentences(args.sentences)
    encoder: TransformerEncoder = load_encoder("minilm", precision=args.precision)  # type: ignore[assignment]
    amp = encoder.amp_dtype
    st = SentenceTransformer(
        str(resolve_encoder_path("minilm")[1]), device="cpu", local_files_only=True
    )
    st.max_seq_length = encoder.max_length
    logger.info(
        "%d sentences from %s; precision %s; %d threads",
        len(sentences),
        source,
        amp or "fp32",
        torch.get_num_threads(),
    )

    def st_encode(batch_size: int) -> torch.Tensor:
        context = torch.autocast("cpu", dtype=amp) if amp is not None else torch.inference_mode()
        with context, torch.inference_mode():
            return st.encode(
                sentences, batch_size=batch_size, convert_to_tensor=True, normalize_embeddings=True
            ).float()

    # warm up every path (oneDNN kernel selection, allocator)
    encoder.encode(sentences[:256])
    st.encode(sentences[:256], batch_size=32)

    reference: TransformerEncoder = load_encoder("minilm", precision="fp32")  # type: ignore[assignment]
    reference.encode(sentences[:256])

    times: dict[str, list[float]] = {"docsim": [], "bare_forward": [], "docsim_fp32": []}
    times.update({f"sentence_transformers_bs{b}": [] for b in args.st_batch_sizes})
    outputs: dict[str, torch.Tensor] = {}
    for repeat in range(args.repeats):
        token_ids = encoder.tokenize(sentences)
        times["bare_forward"].append(bare_forward(encoder, token_ids))
        start = time.perf_counter()
        outputs["docsim"] = encoder.encode(sentences)  # tokenisation included
        times["docsim"].append(time.perf_counter() - start)
        start = time.perf_counter()
        outputs["fp32"] = reference.encode(sentences)
        times["docsim_fp32"].append(time.perf_counter() - start)
        for b in args.st_batch_sizes:
            start = time.perf_counter()
            outputs["st"] = st_encode(b)
            times[f"sentence_transformers_bs{b}"].append(time.perf_counter() - start)
        logger.info("repeat %d: %s", repeat + 1, {k: round(v[-1], 2) for k, v in times.items()})

    rate = {k: len(sentences) / min(v) for k, v in times.items()}
    best_st = max(v for k, v in rate.items() if k.startswith("sentence_transformers"))
    cosine = (outputs["docsim"] * outputs["st"]).sum(dim=1)
    result = {
        "sentences": len(sentences),
        "source": source,
        "precision": str(amp or "fp32"),
        "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "batch_tokens": encoder.batch_tokens,
        "sentences_per_second": {k: round(v, 1) for k, v in rate.items()},
        "ratio_vs_bare_forward": round(rate["docsim"] / rate["bare_forward"], 3),
        "ratio_vs_sentence_transformers_best": round(rate["docsim"] / best_st, 3),
        "min_cosine_vs_sentence_transformers": round(float(cosine.min()), 5),
        "vs_torch_fp32": agreement(outputs["docsim"], outputs["fp32"]),
        "ratio_vs_torch_fp32": round(rate["docsim"] / rate["docsim_fp32"], 3),
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    logger.info("saved %s", args.out)


if __name__ == "__main__":
    main()
