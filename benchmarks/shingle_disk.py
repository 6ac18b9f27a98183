"""The shingle postings' build time, memory and disk at 1x, 10x and 100x a published
version's collection (AILA: 2,914 judgments), per sentence and per posting.

    python benchmarks/shingle_disk.py --data-dir AILA_DATA_DIR [--copies 1 10 100] [--n 2]
        [--work DIR] [--out benchmarks/results/shingle_disk.json]

The texts are tokenised and shingled once (`text_shingles`, timed: the part of a build that
grows with the words); K copies are then written with `write_shingles`, the service's own
writer (bucket files, each sorted in turn), into `--work` (a temporary folder by default),
each copy's hashes xor-ed with a constant of its own, so that the copies share no shingle:
the keys grow as K times the collection's, an upper bound (a real collection of K times as
many judgments repeats many shingles). For each K: the write's seconds, the process's peak
resident memory after it (`ru_maxrss`; the runs go from small to large, so each peak is its
own), each file's bytes, and bytes per sentence (the version's sentences times K) and per
posting. The index written is read back and a few queries are scored on it against an
index built in memory from the same copy (1x only).
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from record import save

from docsim.indexer.store.db import make_engine
from docsim.indexer.store.reader import stored_documents
from docsim.indexer.store.versions import active_version
from docsim.search.lexical.shingles import ShingleIndex, text_shingles
from docsim.search.lexical.shingles_file import bucket_count, load_shingles, write_shingles
from docsim.search.settings import QuerySettings

logger = logging.getLogger("benchmarks.shingle_disk")
SALT = np.uint64(0x9E3779B97F4A7C15)


def copies_of(shingles: list[np.ndarray], copies: int, batch: int = 1024):
    """Batches of the documents' shingle hashes, `copies` times, copy c xor-ed with c * SALT."""
    for c in range(copies):
        with np.errstate(over="ignore"):
            salt = np.uint64(c) * SALT
        for s in range(0, len(shingles), batch):
            yield [found ^ salt for found in shingles[s : s + batch]]


def folder_bytes(path: Path) -> dict[str, int]:
    return {f.name: f.stat().st_size for f in sorted(path.iterdir())}


def checked(path: Path, texts: list[str], n: int) -> int:
    """Scores of a few texts on the written 1x index equal the in-memory index's; how many."""
    doc_ids = np.arange(len(texts), dtype=np.int64)
    read = load_shingles(path, doc_ids, None)
    built = ShingleIndex.build_sorted(doc_ids, [texts], n)
    assert read is not None
    for text in texts[:: max(1, len(texts) // 5)]:
        query = " ".join(text.split()[:2000])
        np.testing.assert_allclose(read.scores(query), built.scores(query), rtol=1e-12)
    return 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/shingle_disk.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    engine = make_engine(QuerySettings(data_dir=args.data_dir).database_url)
    try:
        version = active_version(engine)
        texts = [doc.text for doc in stored_documents(engine, version.version_id)]
        sentences = int((version.manifest or {})["counts"]["sentence"])
    finally:
        engine.dispose()
    started = time.perf_counter()
    shingles = [s for b in range(0, len(texts), 1024)
                for s in text_shingles(texts[b : b + 1024], args.n, None)]  # fmt: skip
    tokenise_seconds = time.perf_counter() - started
    work = Path(tempfile.mkdtemp(dir=args.work))
    figures: dict = {
        "documents": len(texts),
        "sentences": sentences,
        "words": sum(len(t.split()) for t in texts),
        "shingle_words": args.n,
        "tokenise_seconds": round(tokenise_seconds, 1),
        "runs": {},
    }
    try:
        for copies in sorted(args.copies):
            path = work / f"shingles-{copies}x"
            started = time.perf_counter()
            write_shingles(path, copies_of(shingles, copies), copies * len(texts), args.n)
            seconds = time.perf_counter() - started
            files = folder_bytes(path)
            total = sum(files.values())
            sizes = json.loads((path / "meta.json").read_text())["sizes"]
            postings, keys = int(sizes["rows"]), int(sizes["keys"])
            run = {
                "documents": copies * len(texts),
                "buckets": bucket_count(copies * len(texts)),
                "write_seconds": round(seconds, 1),
                "build_seconds_estimate": round(seconds + copies * tokenise_seconds, 1),
                "peak_rss_gib": round(
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2
                ),
                "files": files,
                "bytes": total,
                "postings": postings,
                "keys": keys,
                "bytes_per_sentence": round(total / (copies * sentences), 1),
                "bytes_per_posting": round(total / max(postings, 1), 2),
            }
            if copies == 1:
                run["queries_checked"] = checked(path, texts, args.n)
            figures["runs"][str(copies)] = run
            logger.info("%dx: %s", copies, run)
            shutil.rmtree(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(save(args.out, figures))


if __name__ == "__main__":
    main()
