"""A full `docsim index` on a device against the bare forward pass of the same model over the
same corpus, measured in one run (issue 29's GPU figure; it runs on the CPU too).

    python benchmarks/device_build.py --corpus DIR --work DIR [--device cuda]
        [--encoder minilm] [--batch-tokens 2048 32768] [--no-bare | --no-build]
        [--out benchmarks/results/device_build.json]

1. The corpus is read and split as a build splits it (timed: the CPU work before encoding).
2. The bare bf16 forward pass over every sentence alone, pre-tokenised and length-sorted,
   then over every chunk (the model inputs of late chunking, the default's one pass), for each
   `--batch-tokens`: the floor of the encode stage, without tokenising, pooling or copies.
3. `docsim index CORPUS` into a fresh data directory per `--batch-tokens`, as a child process
   with `DOCSIM_ENCODER__DEVICE`, the torch backend and that batch size: wall time, sentences
   per second, the child's peak RSS, and the build's speed as a multiple of the bare sentence
   pass's (bare seconds / build seconds; issue 29 asks for 2.5x of the CPU's default). The
   build's log is kept beside its data directory (`WORK/build-N.log`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
from record import save

from docsim.indexer.builder.split_workers import default_workers, split_all
from docsim.indexer.text.chunking import add_chunks
from docsim.indexer.text.corpus import Skipped, read_corpus
from docsim.indexer.text.sentences import load_splitter
from docsim.models.encoders.loading import load_encoder
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.inference.precision import autocast

logger = logging.getLogger("benchmarks.device_build")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bare_forward(encoder: TransformerEncoder, token_ids: list[list[int]]) -> dict:
    """Seconds of the model's forward pass alone over length-sorted, padded batches (planned
    and moved to the device outside the clock), and the tokens it saw."""
    batches = [
        (b.input_ids.to(encoder.device), b.attention_mask.to(encoder.device))
        for b in encoder.plan_batches(token_ids)
    ]
    with torch.inference_mode(), autocast(encoder.device, encoder.amp_dtype):
        encoder.model(input_ids=batches[0][0], attention_mask=batches[0][1])  # warm-up
        synchronize(encoder.device)
        started = time.perf_counter()
        for ids, mask in batches:
            encoder.model(input_ids=ids, attention_mask=mask)
        synchronize(encoder.device)
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 3),
        "batches": len(batches),
        "padded_tokens": sum(int(ids.numel()) for ids, _ in batches),
        "inputs_per_second": round(len(token_ids) / seconds, 1),
    }


def build(corpus: Path, data_dir: Path, device: str, encoder: str, batch_tokens: int) -> dict:
    """`docsim index` in a child process; wall time, its peak RSS and the published counts."""
    shutil.rmtree(data_dir, ignore_errors=True)
    env = {
        **os.environ,
        "DOCSIM_ENCODER__DEVICE": device,
        "DOCSIM_ENCODER__NAME": encoder,
        "DOCSIM_ENCODER__BACKEND": "torch",
        "DOCSIM_ENCODER__BATCH_TOKENS": str(batch_tokens),
        "DOCSIM_ENCODER__MAX_BATCH_SIZE": str(max(256, batch_tokens // 8)),
    }
    command = [sys.executable, "-c", "from docsim.app.cli import main; main()", "index"]
    command += [str(corpus)]
    command += ["--data-dir", str(data_dir), "--no-progress"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    (data_dir.parent / f"{data_dir.name}.log").write_text(done.stderr)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    counts = json.loads(done.stdout[done.stdout.index("{") :])["counts"]
    return {
        "batch_tokens": batch_tokens,
        "wall_seconds": round(wall, 1),
        "sentences_per_second": round(counts["sentence"] / wall, 1),
        # ru_maxrss of children is the largest child's so far: valid when it grows
        "peak_rss_gib": round(peak / 2**20, 2) if peak > before else None,
        "counts": counts,
        "log_tail": done.stderr.strip().splitlines()[-3:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True, help="the builds' data directories")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--encoder", default="minilm", help="built-in name or model directory")
    parser.add_argument("--batch-tokens", type=int, nargs="+", default=[2048, 32768])
    parser.add_argument("--no-build", action="store_true", help="the bare passes only")
    parser.add_argument("--no-bare", action="store_true", help="the builds only")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/device_build.json"))
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    result: dict = {
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "corpus": str(args.corpus),
        "bare_forward_bf16": {},
        "builds": [],
    }
    docs = [] if args.no_bare else split_corpus(args.corpus, result)  # the builds split their own
    for batch_tokens in [] if args.no_bare else args.batch_tokens:
        encoder = load_encoder(
            args.encoder,
            device=args.device,
            precision="bf16",
            batch_tokens=batch_tokens,
            max_batch_size=max(256, batch_tokens // 8),
        )
        assert isinstance(encoder, TransformerEncoder)
        started = time.perf_counter()
        chunked = add_chunks(docs, encoder, encoder.chunk_capacity)
        inputs = [doc.encoder_input() for doc in chunked]
        sentences = encoder.tokenize([s for doc in inputs for s in doc.sentences])
        chunks = encoder.tokenize([c for doc in inputs for c in doc.chunks])
        logger.info("chunked and tokenised in %.1f s", time.perf_counter() - started)
        result["sentences"], result["chunks"] = len(sentences), len(chunks)
        result["bare_forward_bf16"][str(batch_tokens)] = {
            "sentences": bare_forward(encoder, sentences),
            "chunks": bare_forward(encoder, chunks),
        }
        logger.info("bare passes: %s", result["bare_forward_bf16"][str(batch_tokens)])
        save(args.out, result)  # after every step: a run stopped early keeps what it measured
        del encoder, chunked, inputs
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    if not args.no_build:
        for batch_tokens in args.batch_tokens:
            row = build(
                args.corpus,
                args.work / f"build-{batch_tokens}",
                args.device,
                args.encoder,
                batch_tokens,
            )
            bare = result["bare_forward_bf16"].get(str(batch_tokens))
            if bare:
                row["speed_over_bare_sentences"] = round(
                    bare["sentences"]["seconds"] / row["wall_seconds"], 3
                )
            result["builds"].append(row)
            logger.info("build: %s", row)
            save(args.out, result)
    print(json.dumps(result, indent=2))


def split_corpus(corpus: Path, result: dict) -> list:
    """The corpus's documents split as a build splits them (worker processes), timed."""
    started = time.perf_counter()
    splitter = load_splitter()
    split = split_all(read_corpus(corpus), splitter, workers=default_workers())
    docs = [doc for doc in split if not isinstance(doc, Skipped)]
    result["documents"] = len(docs)
    result["read_and_split_seconds"] = round(time.perf_counter() - started, 1)
    logger.info(
        "%d documents read and split in %.1f s", len(docs), result["read_and_split_seconds"]
    )
    return docs


if __name__ == "__main__":
    main()
