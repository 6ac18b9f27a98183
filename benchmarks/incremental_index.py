"""What a second `docsim index` of a grown or edited corpus costs against a full build: wall
time, encode time and sentences encoded when the active version's vectors of unchanged
documents are reused, and how far the result is from a full re-encode.

    python -m benchmarks incremental_index --corpus AILA_CASEDOCS --work-dir SCRATCH \\
        [--out benchmarks/results/incremental_index.json]

The corpus's files are copied to `SCRATCH/corpus`; a seeded 11% are held out of the first
build. Each step then runs `docsim index` (the product's command, a process of its own) on the
same data directory after changing the corpus:

1. `full`: the first build, of 89% of the documents (nothing to reuse);
2. `unchanged`: the same corpus again;
3. `plus_1pct`: 1% of the documents (of the whole corpus) added;
4. `plus_10pct`: the other 10% added (the whole corpus);
5. `edited_1pct`: 1% of the documents given one more sentence;
6. `reencode`: `docsim index --reencode` of the same corpus: a full build of the whole corpus,
   the reference the reused version is compared with (every level's vectors, by document
   and position: largest absolute difference, least cosine).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from record import save

from docsim.indexer.store.stored_rows import float16_rows, open_stored

logger = logging.getLogger("benchmarks.incremental_index")
HELD_OUT = 0.11  # of the documents, out of the first build
ADDED_FIRST = 0.01  # then added in `plus_1pct`; the rest in `plus_10pct`
EDITED = 0.01
EDIT = "\n\nThis judgment was reported again with one more sentence at its end.\n"
SEED = 0


def run_index(data_dir: Path, corpus: Path, *extra: str) -> dict[str, Any]:
    """`docsim index CORPUS` on `data_dir`, timed; its manifest's build record and counts."""
    docsim = Path(sys.executable).with_name("docsim")
    env = {**os.environ, "DOCSIM_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [str(docsim), "index", str(corpus), "--no-progress", *extra],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"docsim index failed ({done.returncode}):\n{done.stderr[-3000:]}")
    printed = json.loads(done.stdout)
    manifest = json.loads((Path(printed["path"]) / "manifest.json").read_text())
    build = manifest["build"]
    reused = build.get("reused") or {}
    counts = manifest["counts"]
    return {
        "version": printed["version_id"],
        "wall_s": round(wall, 1),
        "build_s": build["seconds"],
        "encode_s": build["encode_seconds"],
        "documents": counts["document"],
        "sentences": counts["sentence"],
        "encoded_sentences": reused.get("encoded_sentences", counts["sentence"]),
        "reused_documents": reused.get("documents", 0),
        "reused_sentences": reused.get("sentences", 0),
        "path": printed["path"],
    }


def unit_vectors(data_dir: Path, version: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every level's vectors of a version, ordered by (external id, position in document)."""
    import sqlite3

    folder = Path(version["path"])
    manifest = json.loads((folder / "manifest.json").read_text())
    out = {}
    with sqlite3.connect(data_dir / "docsim.sqlite3") as db:
        for level, table, key in (
            ("document", "documents", "doc_id"),
            ("section", "sections", "section_id"),
            ("paragraph", "paragraphs", "paragraph_id"),
            ("sentence", "sentences", "sentence_id"),
            ("chunk", "chunks", "chunk_id"),
        ):
            joined = "" if table == "documents" else "JOIN documents d ON d.doc_id = t.doc_id"
            name = "t.external_id" if table == "documents" else "d.external_id"
            rows = db.execute(
                f"SELECT t.{key} FROM {table} t {joined} WHERE t.version_id = ? "
                f"ORDER BY {name}, t.{key}",
                (version["version"],),
            ).fetchall()
            entry = manifest["levels"][level]
            ids = np.load(folder / entry["ids_file"])
            vectors = open_stored(folder / entry["vectors_file"])  # either row format
            wanted = np.array([r[0] for r in rows], np.int64)
            out[level] = float16_rows(vectors[np.searchsorted(ids, wanted)]).astype(np.float32)
    return out


def agreement(data_dir: Path, reused: dict[str, Any], full: dict[str, Any]) -> dict[str, Any]:
    got, want = unit_vectors(data_dir, reused), unit_vectors(data_dir, full)
    out = {}
    for level in got:
        cosines = np.sum(got[level] * want[level], axis=1) / (
            np.linalg.norm(got[level], axis=1) * np.linalg.norm(want[level], axis=1)
        )
        out[level] = {
            "units": len(got[level]),
            "max_abs_difference": float(np.abs(got[level] - want[level]).max()),
            "least_cosine": round(float(cosines.min()), 6),
            "identical_rows": int(np.all(got[level] == want[level], axis=1).sum()),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "incremental_index.json"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    files = sorted(p for p in args.corpus.iterdir() if p.is_file())
    rng = random.Random(SEED)
    held = rng.sample(files, round(HELD_OUT * len(files)))
    first_added = held[: round(ADDED_FIRST * len(files))]
    kept = [f for f in files if f not in set(held)]
    edited = rng.sample(kept, round(EDITED * len(files)))
    corpus = args.work_dir / "corpus"
    data_dir = args.work_dir / "data"
    shutil.rmtree(args.work_dir, ignore_errors=True)
    corpus.mkdir(parents=True)
    for file in kept:
        shutil.copy2(file, corpus / file.name)

    steps: dict[str, dict[str, Any]] = {}

    def step(name: str, *extra: str) -> None:
        steps[name] = run_index(data_dir, corpus, *extra)
        logger.info("%s: %s", name, steps[name])

    step("full")
    step("unchanged")
    for file in first_added:
        shutil.copy2(file, corpus / file.name)
    step("plus_1pct")
    for file in held[len(first_added) :]:
        shutil.copy2(file, corpus / file.name)
    step("plus_10pct")
    for file in edited:
        with (corpus / file.name).open("a", encoding="utf-8") as handle:
            handle.write(EDIT)
    step("edited_1pct")
    step("reencode", "--reencode")
    base = steps["full"]
    per_sentence = base["encode_s"] / base["sentences"]
    for figures in steps.values():
        figures["wall_vs_full"] = round(figures["wall_s"] / base["wall_s"], 3)
        figures["encode_vs_full"] = round(figures["encode_s"] / base["encode_s"], 3)
        figures["encode_s_at_full_rate"] = round(figures["encoded_sentences"] * per_sentence, 1)
    result = {
        "corpus_documents": len(files),
        "steps": {name: {k: v for k, v in f.items() if k != "path"} for name, f in steps.items()},
        "edited_1pct_vs_reencode": agreement(data_dir, steps["edited_1pct"], steps["reencode"]),
    }
    print(json.dumps(result, indent=2))
    save(args.out, result)


if __name__ == "__main__":
    main()
