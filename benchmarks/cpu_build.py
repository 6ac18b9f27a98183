"""`docsim index` on this CPU, as it is or capped to AVX2, against a bare float32 forward pass
over the same sentences in the same run (issue 68: indexing must pay on AVX2-only CPUs too).

    python benchmarks/cpu_build.py --corpus DIR --work DIR [--documents 120]
        [--out benchmarks/results/cpu_build.json]
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
        python benchmarks/cpu_build.py ...   # an AVX2-only CPU, emulated

Under these caps torch's and OpenVINO's oneDNN, torch's own kernels and MKL's matrix products
(the bare pass's) run AVX2 code only, and docsim follows (no bf16 anywhere, no int8 export:
`models.inference.precision`): the closest emulation of an AVX2-only CPU on an AVX-512 one. A few of
OpenVINO's own kernels outside oneDNN are not capped; the record says which CPU flags the
machine has and the caps in force.

1. The corpus's first `--documents` documents, linked into `WORK/corpus`, read and split as
   a build splits them.
2. The bare float32 forward pass (torch) over every sentence alone, pre-tokenised and
   length-sorted: the reference, without tokenising, pooling or copies.
3. The same float32 module's forward over the sentences through docsim's two OpenVINO paths
   (`encode`: tokenising and pooling included), each exported first (timed apart): int8,
   calibrated on other sentences of the corpus, and float32.
4. `docsim index WORK/corpus` into a fresh data directory, a child process with the default
   settings (the backend `auto` picks on this CPU, late chunking): the backend, wall seconds,
   the export's and the encode stage's seconds (from its log); then again on the other
   OpenVINO backend.
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
from docsim.models.encoders.loading import load_encoder
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.inference.openvino_export import export_openvino
from docsim.models.inference.precision import (
    bf16_supported,
    cpu_flags,
    int8_native,
    openvino_precision,
)

logger = logging.getLogger("benchmarks.cpu_build")
CAPS = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8", "amx_bf16", "avx_vnni")


def cpu_facts() -> dict:
    """The CPU's flags that decide the kernels, the caps in force, and what docsim reads."""
    import torch

    flags = cpu_flags()
    return {
        "flags": {flag: flag in flags for flag in FLAGS},
        "caps": {name: os.environ.get(name) for name in CAPS},
        "bf16_native": bf16_supported(torch.device("cpu")),
        "int8_native": int8_native(),
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


def openvino_pass(
    encoder: TransformerEncoder, sentences: list[str], calibration: list[str], *, int8: bool
) -> dict:
    """docsim's OpenVINO path over `sentences`, after an export (int8: calibrated on
    `calibration`, other sentences of the corpus)."""
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        batches = list(encoder.plan_batches(encoder.tokenize(calibration)))
        export_openvino(encoder.model, batches, Path(folder) / "export", int8=int8)
        export = time.perf_counter() - started
        encoder.use_openvino(Path(folder) / "export")
        encoder.encode(sentences[:64])  # warm-up
        started = time.perf_counter()
        encoder.encode(sentences)
        seconds = time.perf_counter() - started
    return {"export_seconds": round(export, 1), "seconds": round(seconds, 3)}


def build(corpus: Path, data_dir: Path, backend: str = "auto") -> dict:
    """`docsim index` with the default settings but `backend` in a child process (the caps
    inherited)."""
    command = [sys.executable, "-c", "from docsim.app.cli import main; main()", "index"]
    command += [str(corpus), "--data-dir", str(data_dir), "--no-progress"]
    command += ["--backend", backend]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    (data_dir.parent / f"{data_dir.name}.log").write_text(done.stderr)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    export = re.search(r"Exported \S+ in ([\d.]+) s", done.stderr)
    backend = re.search(r"Exporting \S+ to (\S+?)[,\s]", done.stderr)
    encode = re.search(r"encode stage: ([\d.]+) s", done.stderr)
    return {
        "backend": backend.group(1) if backend else None,
        "wall_seconds": round(wall, 1),
        "export_seconds": float(export.group(1)) if export else 0.0,
        "encode_stage_seconds": float(encode.group(1)) if encode else None,
        "counts": json.loads(done.stdout[done.stdout.index("{") :])["counts"],
    }


def ratios(bare_seconds: float, result: dict) -> dict:
    found = {
        "openvino_int8_encode": round(bare_seconds / result["openvino_int8"]["seconds"], 3),
        "openvino_fp32_encode": round(bare_seconds / result["openvino_fp32"]["seconds"], 3),
    }
    for name in ("build", "build_other_backend"):
        built = result[name]
        found[f"{name}_wall"] = round(bare_seconds / built["wall_seconds"], 3)
        found[f"{name}_without_export"] = round(
            bare_seconds / (built["wall_seconds"] - built["export_seconds"]), 3
        )
    return found


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
    for name, int8 in (("openvino_int8", True), ("openvino_fp32", False)):
        result[name] = openvino_pass(encoder, texts, calibration, int8=int8)
        logger.info("%s: %s", name, result[name])
    result["build"] = build(corpus, args.work / "build")  # the backend `auto` picks
    other = "openvino-fp32" if result["build"]["backend"] == "openvino-int8" else "openvino-int8"
    result["build_other_backend"] = build(corpus, args.work / "build-other", other)
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
