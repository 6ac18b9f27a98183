"""Peak resident memory of a build's stage 3 alone (`write_vector_indexes`): the vector files
of every level written from block files: the IVF level's lists recorded as its blocks pass
(`IvfLists`, the default) against the index filled in memory and saved (`--in-memory`, the
way before).

    python benchmarks/vector_files_memory.py [--sentences 1020534] [--chunks 169848]
        [--paragraphs 300000] [--sections 30000] [--documents 8742] [--blocks 137]
        [--out benchmarks/results/vector_files_memory.json]

The defaults are about three times AILA (its sentence and chunk counts exactly; paragraphs
and sections rounded), 384-d, in 137 blocks like a build's of 64 documents. The vectors are
random unit vectors: stage 3's memory depends on the counts, not the values. Each way runs in
a fresh child process, one after the other, and reports the peak RSS (`ru_maxrss`) and the
seconds and the bytes written; the sentence level's index, as each way reads it back, is
compared byte for byte (FAISS's serialisation).
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from record import save

logger = logging.getLogger("benchmarks.vector_files_memory")
DIM = 384


def write_blocks(folder: Path, counts: dict[str, int], n_blocks: int) -> None:
    (folder / "blocks").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for b in range(n_blocks):
        arrays = {}
        for level, n in counts.items():
            size = n // n_blocks + (1 if b < n % n_blocks else 0)
            vectors = rng.standard_normal((size, DIM), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            arrays[f"{level}_vectors"] = vectors
            first = sum(n // n_blocks + (1 if c < n % n_blocks else 0) for c in range(b))
            arrays[f"{level}_ids"] = np.arange(first, first + size, dtype=np.int64)
        np.savez(folder / "blocks" / f"{b:06d}.npz", **arrays)  # type: ignore[arg-type]


def child(folder: Path, n_blocks: int, in_memory: bool) -> None:
    """Run stage 3 in this (fresh) process and print its peak RSS and seconds as JSON."""
    import hashlib

    import faiss

    from docsim.indexer.builder.stages import write_vector_indexes
    from docsim.indexer.settings import Settings
    from docsim.indexer.store import faiss_files
    from docsim.indexer.store.level_files import open_level_index

    if in_memory:
        faiss_files.IvfLists.accepts = staticmethod(lambda index: False)  # type: ignore[method-assign]
    started = time.perf_counter()
    levels = write_vector_indexes(folder, n_blocks, DIM, Settings(data_dir=folder))
    seconds = round(time.perf_counter() - started, 1)
    peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)
    sentence = open_level_index(folder, dict(levels["sentence"]))
    digest = hashlib.sha256(faiss.serialize_index(sentence.host).tobytes()).hexdigest()
    report = {
        "seconds": seconds,
        "peak_rss_gib": peak,
        "factories": {lv: e["factory"] for lv, e in levels.items()},
        "bytes": {lv: e["bytes"] for lv, e in levels.items()},
        "sentence_index_sha256": digest,
    }
    print(json.dumps(report))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=1_020_534)
    parser.add_argument("--chunks", type=int, default=169_848)
    parser.add_argument("--paragraphs", type=int, default=300_000)
    parser.add_argument("--sections", type=int, default=30_000)
    parser.add_argument("--documents", type=int, default=8_742)
    parser.add_argument("--blocks", type=int, default=137)
    root = Path(__file__).resolve().parents[1]
    parser.add_argument(
        "--out", type=Path, default=root / "benchmarks/results/vector_files_memory.json"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--in-memory", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.blocks, args.in_memory)
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    counts = {
        "document": args.documents,
        "section": args.sections,
        "paragraph": args.paragraphs,
        "sentence": args.sentences,
        "chunk": args.chunks,
    }
    result: dict[str, object] = {"counts": counts, "dim": DIM, "blocks": args.blocks}
    with tempfile.TemporaryDirectory(prefix="vector-files-", dir=root.parent) as tmp:
        for way in ("in_memory", "list_at_a_time"):
            folder = Path(tmp) / way
            write_blocks(folder, counts, args.blocks)
            logger.info("Stage 3, %s", way)
            command = [
                sys.executable,
                __file__,
                "--child",
                str(folder),
                "--blocks",
                str(args.blocks),
            ]
            if way == "in_memory":
                command.append("--in-memory")
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            result[way] = json.loads(out.strip().splitlines()[-1])  # type: ignore[assignment]
            logger.info("%s: %s", way, result[way])
        digests = {result[way]["sentence_index_sha256"] for way in ("in_memory", "list_at_a_time")}
        result["sentence_indexes_identical"] = len(digests) == 1
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
