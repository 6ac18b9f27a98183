"""`docsim index` on this CPU, as it is or capped to AVX2, against a bare float32 forward pass
over the same sentences in the same run (issue 68: indexing must pay on AVX2-only CPUs too).

    python benchmarks/cpu_build.py --corpus DIR --work DIR [--documents 120]
        [--out benchmarks/results/cpu_build.json]
    ONEDNN_MAX_CPU_ISA=AVX2 python benchmarks/cpu_build.py ...   # an AVX2-only CPU, emulated

Under `ONEDNN_MAX_CPU_ISA=AVX2` torch's and OpenVINO's oneDNN run AVX2 kernels only and
docsim's precision follows (no bf16 anywhere: `models.precision`): the closest emulation of an
AVX2-only CPU on an AVX-512 one. OpenVINO's own kernels outside oneDNN are not capped, so the
emulation may flatter the int8 path; the record says which CPU flags the machine has and the
cap in force.

1. The corpus's first `--documents` documents, linked into `WORK/corpus`, read and split as
   a build splits them.
2. The bare float32 forward pass (torch) over every sentence alone, pre-tokenised and
   length-sorted: the reference, without tokenising, pooling or copies.
3. The same float32 module's forward over the sentences through docsim's int8 OpenVINO path
   (`encode`: tokenising and pooling included), exported and calibrated first (timed apart).
4. `docsim index WORK/corpus` into a fresh data directory, a child process with the default
   settings (OpenVINO int8, late chunking): wall seconds, the export's and the encode stage's
   seconds (from its log).
Ratios are the bare pass's seconds over each path's: above 1 is faster than the bare pass.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from device_build import bare_forward, split_corpus
from record import save

from docsim.indexer.text.chunking import add_chunks
from docsim.models.loading import load_encoder
from docsim.models.openvino_export import export_openvino_int8
from docsim.models.precision import bf16_supported, openvino_precision
from docsim.models.transformer import TransformerEncoder

logger = logging.getLogger("benchmarks.cpu_build")
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8", "amx_bf16", "avx_vnni")


def cpu_facts() -> dict:
    """The CPU's flags that decide the kernels, the cap in force, and what docsim reads."""
    import torch

    flags: set[str] = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    return {
        "flags": {flag: flag in flags for flag in FLAGS},
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
        "bf16_native": bf16_supported(torch.device("cpu")),
        "openvino_precision": openvino_precision("auto"),
        "threads": torch.get_num_threads(),
    }


def linked_corpus(corpus: Path, work: Path, documents: int) -> Path:
    """The first `documents` files of `corpus` (by name), linked into `work/corpus`."""
    linked = work / "corpus"
    linked.mkdir(parents=True, exist_ok=True)
    for path in sorted(p for p in corpus.iterdir() if p.is_file())[:documents]:
        target = linked / path.name
        if not target.exists():
            target.symlink_to(path.resolve())
    return linked


def int8_pass(encoder: TransformerEncoder, sentences: list[str], calibration: list[str]) -> dict:
    """docsim's int8 OpenVINO path over `sentences`, after an export calibrated on
    `calibration` (other sentences of the corpus)."""
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        batches = list(encoder.plan_batches(encoder.tokenize(calibration)))
        export_openvino_int8(encoder.model, batches, Path(folder) / "int8")
        export = time.perf_counter() - started
        encoder.use_openvino(Path(folder) / "int8")
        encoder.encode(sentences[:64])  # warm-up
        started = time.perf_counter()
        encoder.encode(sentences)
        seconds = time.perf_counter() - started
    return {"export_seconds": round(export, 1), "seconds": round(seconds, 3)}


def build(corpus: Path, data_dir: Path) -> dict:
    """`docsim index` with the default settings in a child process (the cap inherited)."""
    command = [sys.executable, "-c", "from docsim.app.cli import main; main()", "index"]
    command += [str(corpus), "--data-dir", str(data_dir), "--no-progress"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    (data_dir.parent / f"{data_dir.name}.log").write_text(done.stderr)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    export = re.search(r"Exported \S+ in ([\d.]+) s", done.stderr)
    encode = re.search(r"encode stage: ([\d.]+) s", done.stderr)
    return {
        "wall_seconds": round(wall, 1),
        "export_seconds": float(export.group(1)) if export else 0.0,
        "encode_stage_seconds": float(encode.group(1)) if encode else None,
        "counts": json.loads(done.stdout[done.stdout.index("{") :])["counts"],
    }


def ratios(bare_seconds: float, result: dict) -> dict:
    built = result["build"]
    return {
        "int8_encode": round(bare_seconds / result["int8_sentences"]["seconds"], 3),
        "build_wall": round(bare_seconds / built["wall_seconds"], 3),
        "build_without_export": round(
            bare_seconds / (built["wall_seconds"] - built["export_seconds"]), 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True, help="a folder for the build")
    parser.add_argument("--documents", type=int, default=120)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu_build.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    corpus = linked_corpus(args.corpus, args.work, args.documents)
    result: dict = {"cpu": cpu_facts(), "documents": args.documents}
    docs = split_corpus(corpus, result)
    encoder = load_encoder("minilm", precision="fp32")
    assert isinstance(encoder, TransformerEncoder)
    chunked = add_chunks(docs, encoder, encoder.chunk_capacity)
    texts = [s for doc in chunked for s in doc.encoder_input().sentences]
    result["sentences"], result["characters"] = len(texts), sum(map(len, texts))
    result["bare_forward_fp32"] = bare_forward(encoder, encoder.tokenize(texts))
    logger.info("bare fp32: %s", result["bare_forward_fp32"])
    calibration = texts[-512:] if len(texts) > 1024 else texts[:512]
    result["int8_sentences"] = int8_pass(encoder, texts, calibration)
    logger.info("int8: %s", result["int8_sentences"])
    result["build"] = build(corpus, args.work / "build")
    bare_seconds = result["bare_forward_fp32"]["seconds"]
    result["speed_over_bare_fp32"] = ratios(bare_seconds, result)
    result["characters_per_second"] = {
        "bare_forward_fp32": round(result["characters"] / bare_seconds),
        "build_wall": round(result["characters"] / result["build"]["wall_seconds"]),
    }
    save(args.out, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
