"""Resident memory of one loaded version, per level: the vectors the searcher holds and the
FAISS index beside them, and whether they share one copy.

    python benchmarks/index_memory.py --data-dir DIR [--sharded | --compressed]
        [--out benchmarks/results/index_memory.json]

Loads the active version of `DIR` (`LoadedIndex.load`) in this process and reports the growth
of its resident set (RSS) and of its unique set (USS), and per level the bytes of the float32
vectors and whether the FAISS index holds the same memory or a copy of its own.
`--sharded` loads it as a sharded service's coordinator does: the unit levels memory-mapped
from the version's float16 files, with no FAISS index of them (the shards search them).
`--compressed` loads it as a CPU service does by default since issue 28: the sentence,
paragraph and chunk levels mapped, the sentence and paragraph levels compressed in memory
(`SentenceScan`).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
from pathlib import Path

import psutil
from record import figures, save

from docsim.indexer.store.db import make_engine
from docsim.indexer.store.versions import active_version
from docsim.search.served.loaded_index import COMPRESSED_SEARCHED, LoadedIndex
from docsim.search.served.sentence_scan import ScanShape, SentenceScan
from docsim.search.settings import QuerySettings

logger = logging.getLogger("benchmarks.index_memory")


def memory() -> tuple[int, int]:
    info = psutil.Process().memory_full_info()
    return int(info.rss), int(info.uss)


def rss_parts() -> dict[str, int]:
    """This process's resident set in parts (Linux): anonymous memory, and the pages of
    mapped files (the page cache's, shared and reclaimable)."""
    lines = Path("/proc/self/status").read_text().splitlines()
    found = {k: int(v.split()[0]) * 1024 for k, v in (x.split(":", 1) for x in lines)
             if k in ("RssAnon", "RssFile")}  # fmt: skip
    return {"anon": found.get("RssAnon", 0), "file": found.get("RssFile", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/index_memory.json"))
    parser.add_argument("--label", default="", help="what this run measures (kept in the JSON)")
    parser.add_argument("--sharded", action="store_true", help="as a sharded coordinator")
    parser.add_argument(
        "--compressed", action="store_true", help="as a compressed CPU service (issue 28)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = QuerySettings(data_dir=args.data_dir)
    engine = make_engine(settings.database_url)
    version = active_version(engine)
    gc.collect()
    rss0, uss0 = memory()
    parts0 = rss_parts()
    index = LoadedIndex.load(engine, version, sharded=args.sharded, map_sentences=args.compressed)
    scans = {}
    if args.compressed:
        search = settings.search
        shape = ScanShape(search.scan.dimensions, search.scan.group, search.seed)
        scans = {level: SentenceScan.of_index(index, shape, level) for level in COMPRESSED_SEARCHED}
    gc.collect()
    rss1, uss1 = memory()
    parts1 = rss_parts()
    levels = {}
    for level, vectors in index.vectors.items():
        levels[level] = {
            "vectors": int(vectors.shape[0]),
            "tensor_bytes": int(vectors.numel() * vectors.element_size()),
        }
        if level not in index.indices:  # mapped: no index here, the file's pages on demand
            levels[level] |= {"factory": None, "one_copy": True, "mapped": True}
            continue
        storage = index.indices[level].flat_storage()
        levels[level] |= {
            "factory": index.indices[level].factory,
            "one_copy": storage is not None and storage == vectors.data_ptr(),
        }
    for level, scan in scans.items():
        levels[level] |= {
            "compressed_bytes": scan.memory_bytes(),
            "compressed_bytes_per_row": scan.memory_bytes() / max(1, scan.count),
            "dimensions": int(scan.scan.rows.shape[1]),
            "group": scan.scan.group,
        }
    result = {
        "label": args.label,
        "data_dir": str(args.data_dir),
        "version": version.version_id,
        "rss_growth_bytes": rss1 - rss0,
        "uss_growth_bytes": uss1 - uss0,
        "anon_growth_bytes": parts1["anon"] - parts0["anon"],
        "file_growth_bytes": parts1["file"] - parts0["file"],
        "levels": levels,
    }
    logger.info(
        "Loaded version %d: RSS +%.0f MiB (anonymous +%.0f MiB), USS +%.0f MiB; one copy: %s",
        version.version_id,
        (rss1 - rss0) / 2**20,
        (parts1["anon"] - parts0["anon"]) / 2**20,
        (uss1 - uss0) / 2**20,
        {k: v["one_copy"] for k, v in levels.items()},
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    runs = figures(args.out) if args.out.exists() else []
    save(args.out, [*runs, result])
    print(json.dumps(result, indent=2))
    del index
    engine.dispose()


if __name__ == "__main__":
    main()
