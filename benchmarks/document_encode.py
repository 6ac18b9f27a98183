"""What a build's encode stage costs per configuration, on the same judgments, in one run:
`encode_documents` (every level: sentences, chunks, paragraphs, sections, document) against
a bare bf16 forward pass over the same sentences alone.

    python benchmarks/document_encode.py [--documents 24] [--repeats 2]
        [--out benchmarks/results/document_encode.json]

Configurations:
- `torch_bf16_two_pass`: PyTorch, bf16 autocast, sentences and chunks each encoded (what
  docsim did before the int8 backend);
- `int8_two_pass`, `int8_one_pass`: the OpenVINO int8 backend, with chunk vectors encoded or
  pooled from the sentence pass (`DOCSIM_ENCODER__CHUNK_VECTORS=sentences`);
- `int8_late`: the int8 backend, one pass over the chunks, sentence vectors pooled from their
  tokens' states there (late chunking, `DOCSIM_ENCODER__CHUNK_VECTORS=late`); its agreement
  with `int8_two_pass` per level says what changes (the chunks should not);
- `colde_batched`, `colde_batched_int8`: CoLDE (built from MiniLM, untrained: the rate
  depends on the architecture, not the weights), batched per chunk count, with its backbone
  on torch and on the int8 backend. (The head run one text at a time, measured before, is
  gone from the code and from this benchmark.)

Texts: the first `--documents` AILA 2019 judgments (../shared/data) when present, else the
sample corpus; the int8 export is calibrated on the judgments after them.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from record import save

from docsim.indexer.builder.backend import calibration_texts
from docsim.indexer.settings import Settings
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.corpus import SAMPLE_CORPUS, Skipped, read_corpus
from docsim.indexer.text.documents import Document
from docsim.indexer.text.sentences import load_splitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders import colde
from docsim.models.encoders.encoder import DocumentInput, DocumentVectors
from docsim.models.encoders.loading import load_encoder, resolve_encoder_path
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.inference.openvino_export import export_openvino
from docsim.models.inference.precision import autocast

logger = logging.getLogger("benchmarks.document_encode")
AILA = Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "casedocs"


def bare_forward_seconds(encoder: TransformerEncoder, texts: list[str]) -> float:
    """The model's forward pass alone over pre-tokenised, length-sorted batches of `texts`."""
    batches = list(encoder.plan_batches(encoder.tokenize(texts)))  # outside the clock
    start = time.perf_counter()
    with torch.inference_mode(), autocast(encoder.device, encoder.amp_dtype):
        for batch in batches:
            encoder.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    return time.perf_counter() - start


def read_documents(n: int) -> tuple[list[Document], str]:
    corpus = AILA if AILA.exists() else SAMPLE_CORPUS
    splitter = load_splitter()
    docs = []
    for source in read_corpus(corpus):
        if not isinstance(source, Skipped):
            docs.append(split_document(source, splitter))
        if len(docs) >= n:
            break
    return docs, str(corpus)


def agreement(ours: list[DocumentVectors], reference: list[DocumentVectors]) -> dict:
    """Cosine of each level's vectors to the reference's: mean and minimum per level."""
    out = {}
    for level in ("sentences", "chunks", "sections", "document"):
        a = torch.cat([getattr(v, level).reshape(-1, v.sentences.shape[1]) for v in ours])
        b = torch.cat([getattr(v, level).reshape(-1, v.sentences.shape[1]) for v in reference])
        cosine = (a * b).sum(dim=1)
        out[level] = {"mean": round(float(cosine.mean()), 5), "min": round(float(cosine.min()), 5)}
    return out


def parse_args() -> argparse.Namespace:
    """The command line's options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--documents", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/document_encode.json"))
    return parser.parse_args()


def int8_encoders(
    bf16: TransformerEncoder, calibration: list[str], workdir: Path
) -> tuple[TransformerEncoder, TransformerEncoder, TransformerEncoder]:
    """The int8 backend, exported to `workdir` and calibrated on `calibration`, loaded three
    ways: chunk vectors encoded (two passes), pooled from the sentence pass (one pass), and
    late chunking."""
    batches = list(bf16.plan_batches(bf16.tokenize(calibration)))
    export_openvino(bf16.model, batches, workdir / "ov")
    two_pass: TransformerEncoder = load_encoder("minilm", backend_dir=workdir / "ov")  # type: ignore[assignment]
    one_pass: TransformerEncoder = load_encoder(  # type: ignore[assignment]
        "minilm", backend_dir=workdir / "ov", chunk_vectors="sentences"
    )
    late: TransformerEncoder = load_encoder(  # type: ignore[assignment]
        "minilm", backend_dir=workdir / "ov", chunk_vectors="late"
    )
    return two_pass, one_pass, late


def colde_encoders(
    bf16: TransformerEncoder, calibration: list[str], workdir: Path
) -> tuple[colde.ColdeEncoder, colde.ColdeEncoder]:
    """CoLDE built from MiniLM (untrained, seeded), its backbone on torch and on the int8
    backend (exported to `workdir`, calibrated on `calibration`)."""
    torch.manual_seed(0)
    colde_encoder = colde.ColdeEncoder(
        colde.from_base(resolve_encoder_path("minilm")[1]),
        name="colde",
        source_dir=workdir,
        tokenizer=bf16.tokenizer,  # the temporary directory holds no tokenizer
    )
    colde_int8 = copy.deepcopy(colde_encoder)
    colde_int8.export_openvino(calibration, workdir / "colde")
    colde_int8.use_openvino(workdir / "colde")
    return colde_encoder, colde_int8


def timed_runs(
    runs: dict[str, Callable[[], object]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[DocumentVectors]]]:
    """Each run's seconds, `repeats` times interleaved, and the vectors of its last call (for
    the runs that return vectors)."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, list[DocumentVectors]] = {}
    for repeat in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            got = run()  # the bare forward pass times itself (tokenising excluded)
            seconds[name].append(got if isinstance(got, float) else time.perf_counter() - start)
            if isinstance(got, list):
                outputs[name] = got
        logger.info("repeat %d: %s", repeat + 1, {k: round(v[-1], 2) for k, v in seconds.items()})
    return seconds, outputs


def report(
    source: str,
    measured: list[Document],
    inputs: list[DocumentInput],
    seconds: dict[str, list[float]],
    outputs: dict[str, list[DocumentVectors]],
) -> dict:
    """The figures saved: the texts measured, each configuration's rates from its best time
    and its speed against the bare forward pass and torch bf16, and the agreement of each
    configuration's vectors with its reference's."""
    sentences = sum(len(doc.sentences) for doc in inputs)
    characters = sum(len(doc.text) for doc in measured)
    best = {name: min(v) for name, v in seconds.items()}
    return {
        "source": source,
        "documents": len(measured),
        "sentences": sentences,
        "chunks": sum(len(doc.chunks) for doc in inputs),
        "characters": characters,
        "threads": torch.get_num_threads(),
        "sentences_per_second": {k: round(sentences / v, 1) for k, v in best.items()},
        "characters_per_second": {k: round(characters / v) for k, v in best.items()},
        "speed_vs_bare_forward_bf16_sentences": {
            k: round(best["bare_forward_bf16_sentences"] / v, 3) for k, v in best.items()
        },
        "speed_vs_torch_bf16_two_pass": {
            k: round(best["torch_bf16_two_pass"] / v, 3) for k, v in best.items()
        },
        "colde_int8_vs_torch": round(best["colde_batched"] / best["colde_batched_int8"], 2),
        "agreement": {
            f"{name}_vs_{reference}": agreement(outputs[name], outputs[reference])
            for name, reference in (
                ("int8_two_pass", "torch_bf16_two_pass"),
                ("int8_one_pass", "torch_bf16_two_pass"),
                ("int8_late", "int8_two_pass"),
                ("int8_late", "torch_bf16_two_pass"),
                ("colde_batched_int8", "colde_batched"),
            )
        },
        "seconds": {k: [round(x, 3) for x in v] for k, v in seconds.items()},
    }


def main() -> None:
    args = parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    bf16: TransformerEncoder = load_encoder("minilm", precision="bf16")  # type: ignore[assignment]
    docs, source = read_documents(2 * args.documents)
    docs = add_chunks(docs, bf16, bf16.chunk_capacity)
    measured, calibrating = docs[: args.documents], docs[args.documents :]
    inputs = [doc.encoder_input() for doc in measured]
    sentences = [s for doc in inputs for s in doc.sentences]

    with tempfile.TemporaryDirectory() as workdir:
        calibration = calibration_texts(calibrating, bf16, bf16.chunk_capacity, Settings())
        texts = calibration[0] + calibration[1]
        two_pass, one_pass, late = int8_encoders(bf16, texts, Path(workdir))
        colde_encoder, colde_int8 = colde_encoders(bf16, texts, Path(workdir))
        runs: dict[str, Callable[[], object]] = {
            "bare_forward_bf16_sentences": lambda: bare_forward_seconds(bf16, sentences),
            "torch_bf16_two_pass": lambda: bf16.encode_documents(inputs),
            "int8_two_pass": lambda: two_pass.encode_documents(inputs),
            "int8_one_pass": lambda: one_pass.encode_documents(inputs),
            "int8_late": lambda: late.encode_documents(inputs),
            "colde_batched": lambda: colde_encoder.encode_documents(inputs),
            "colde_batched_int8": lambda: colde_int8.encode_documents(inputs),
        }
        for encoder in (bf16, two_pass, one_pass, late, colde_encoder, colde_int8):  # warm-up
            encoder.encode_documents(inputs[:1])
        seconds, outputs = timed_runs(runs, args.repeats)

    result = report(source, measured, inputs, seconds, outputs)
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)
    logger.info("saved %s", args.out)


if __name__ == "__main__":
    main()
