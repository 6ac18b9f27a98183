"""The sentence-vector part of the default ranking as the collection grows: the float32 level
in memory (the code before issue 28) against the compressed level and against candidate
mode's cells, at 1x, 3x and 10x AILA.

    python benchmarks/growth.py --data-dir DIR [--factors 1 3 10] [--noise 0.35]
        [--queries FILE] [--by-id 20] [--stores float32 compressed centroids]
        [--out benchmarks/results/growth.json]

The collection is the version's real sentence vectors (AILA's), then `factor - 1` perturbed
copies of every document, with the same lengths: a copy of a sentence x is
`normalise(x + noise * g / sqrt(d))` with g standard normal, so that cos(x, copy) is about
`1 / sqrt(1 + noise^2)` (0.94 at 0.35). The grown level is written once per factor as a
float16 `.npy`, as a version stores it.

Two sets of queries: `posted`, the AILA development queries (or `--queries` CSFCube's JSONL:
each query's facet text), encoded once by the version's encoder; and `by_id`, `--by-id`
documents of the collection drawn at random (seed 0), each ranked against the others with its
own sentences as the query (its copies stay in the collection: near-duplicates, as real
archives hold). Each store and factor runs in a process of its own (so that its resident
memory is its own): it holds the level as the service does (`float32`: all of it as a tensor;
`compressed`: the projected bfloat16 rows in memory, the float16 file memory-mapped), then
scores `maxsim` over every document for each query (`compressed`: the approximate pass, then
the service's `rescore_depth` documents exactly from the file, as `SentenceSets` does;
`centroids`: candidate mode's cells, fitted as the service fits them, give
`candidates.max_documents` documents by centroid interaction and residual codes, scored
exactly from the file). Reported per query set: p50 and p95, and each ranking's top-10
overlap with the float32 one; per store: the resident set after loading and its peak, the
bytes per sentence held (the cells' postings and codes for `centroids`) and the cells'
fitting time.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import torch
from record import save

from docsim.indexer.store.db import make_engine
from docsim.indexer.text.corpus import json_document
from docsim.models.kernels.alignment import maxsim_scores, sentence_best
from docsim.models.kernels.scan import approximate_best, compress, fit_basis, project
from docsim.models.kernels.scoring import RaggedCollection
from docsim.search.candidates.centroids import CentroidCandidates, fit_cells, searched
from docsim.search.served.mapped_rows import MappedRows
from docsim.search.served.sentence_scan import fit_sample, padding_group
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings, SearchSettings

logger = logging.getLogger("benchmarks.growth")
AILA_QUERIES = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019" / "queries_dev.txt"
)
BLOCK = 65536
STORES = ("float32", "compressed", "centroids")


def grow(
    data_dir: Path, queries_file: Path, factors: list[int], noise: float, by_id: int, work: Path
) -> dict:
    """Writes `grown_{f}.npy` (float16), `lengths_{f}.npy`, `queries.pt` and `by_id.npy` (the
    documents that are queries); returns facts."""
    settings = QuerySettings(data_dir=data_dir, search=SearchSettings(sentence_store="float32"))
    searcher = open_searcher(settings, make_engine(settings.database_url))
    index = searcher.index
    texts = query_texts(queries_file)
    queries = [
        searcher.query_from_source(json_document({"id": f"q{i}", "text": t})).sentence_vectors
        for i, t in enumerate(texts)
    ]
    torch.save(queries, work / "queries.pt")
    base = index.vectors["sentence"].numpy().astype(np.float16)  # (R, d) the file's values
    lengths = np.diff(index.doc_unit_start["sentence"])  # (D,)
    drawn = np.random.default_rng(0).choice(len(lengths), min(by_id, len(lengths)), replace=False)
    np.save(work / "by_id.npy", np.sort(drawn))
    d = base.shape[1]
    for factor in factors:
        rng = np.random.default_rng(factor)
        out = np.lib.format.open_memmap(
            work / f"grown_{factor}.npy", mode="w+", dtype=np.float16, shape=(len(base) * factor, d)
        )
        out[: len(base)] = base
        for copy in range(1, factor):
            for r0 in range(0, len(base), BLOCK):
                x = base[r0 : r0 + BLOCK].astype(np.float32)
                x += noise * rng.standard_normal(x.shape, dtype=np.float32) / np.sqrt(d)
                x /= np.linalg.norm(x, axis=1, keepdims=True)
                out[copy * len(base) + r0 : copy * len(base) + r0 + len(x)] = x
        out.flush()
        del out
        np.save(work / f"lengths_{factor}.npy", np.tile(lengths, factor))
    return {
        "sentences": len(base),
        "documents": len(lengths),
        "queries": {"posted": len(queries), "by_id": len(drawn)},
    }


def query_texts(path: Path) -> list[str]:
    """AILA's `id||text` lines, or a JSONL file's `facet_text` (CSFCube's query facet) or
    `text` per line."""
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [row.get("facet_text") or row["text"] for row in rows]
    return [line.split("||", 1)[1] for line in path.read_text().splitlines() if "||" in line]


def rss() -> int:
    return int(psutil.Process().memory_info().rss)


def status_bytes(field: str) -> int:
    """A field of /proc/self/status in bytes (Linux): `RssAnon`, `RssFile` or `VmHWM` (the
    peak resident set of this process since it started, unlike `ru_maxrss`, which a child
    inherits from the process that forked it)."""
    text = Path("/proc/self/status").read_text()
    return int(text.split(f"{field}:")[1].split()[0]) * 1024


Rank = Callable[[torch.Tensor, int | None], np.ndarray]  # (query, excluded) -> (D,) scores


@dataclass(frozen=True)
class GrownLevel:
    """The grown sentence level as served: its float16 rows mapped from the file, and where
    each document's rows are."""

    mapped: MappedRows  # (R, d) float16
    lengths: torch.Tensor  # (D,) sentences per document
    starts: np.ndarray  # (D + 1,) each document's first row, then R

    def exactly(self, query: torch.Tensor, best: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """`scores` with documents `best` scored exactly from the file, the rest below them."""
        starts, lengths = self.starts, self.lengths
        rows = np.concatenate([np.arange(starts[b], starts[b + 1]) for b in best])
        exact_rows = self.mapped[torch.from_numpy(rows)]  # float16, cast per block as served
        sub = RaggedCollection(exact_rows, lengths[best], torch.ones(len(best), dtype=torch.long))
        exact = maxsim_scores(sentence_best(query, sub)).numpy()
        scores = np.minimum(scores, np.nextafter(exact.min(), -np.inf))
        scores[best] = exact
        return scores


def float32_ranking(level: GrownLevel) -> tuple[Rank, int]:
    """`maxsim` over every document with the whole level read in as float32 (as a version's
    Flat index holds it), and the bytes it holds."""
    mapped, lengths = level.mapped, level.lengths
    ones = torch.ones(len(lengths), dtype=torch.long)
    rows = torch.cat(
        [mapped[r : r + BLOCK].float() for r in range(0, len(mapped), BLOCK)]
    )  # (R, d) read in, as a version's Flat index holds it
    collection = RaggedCollection(rows, lengths, ones)  # one paragraph per document

    def rank(query: torch.Tensor, excluded: int | None) -> np.ndarray:
        scores = maxsim_scores(sentence_best(query, collection)).numpy().astype(np.float64)
        if excluded is not None:
            scores[excluded] = -np.inf
        return scores

    return rank, rows.element_size() * rows.numel()


def centroids_ranking(level: GrownLevel, search: SearchSettings) -> tuple[Rank, int, float]:
    """Candidate mode's cells, fitted as the service fits them, giving the documents scored
    exactly from the file; the bytes the cells hold and the seconds their fit took."""
    every = np.arange(len(level.lengths))
    started = time.perf_counter()
    cells = CentroidCandidates(
        fit_cells(level.mapped, level.starts, dimensions=search.scan.dimensions, seed=search.seed),
        level.starts,
    )
    fit_seconds = time.perf_counter() - started

    def rank(query: torch.Tensor, excluded: int | None) -> np.ndarray:
        allowed = every if excluded is None else every[every != excluded]
        best = searched(cells, query, allowed, search)
        return level.exactly(query, best, np.full(len(level.lengths), -np.inf))

    return rank, cells.memory_bytes(), fit_seconds


def compressed_ranking(level: GrownLevel, search: SearchSettings) -> tuple[Rank, int]:
    """The compressed level's approximate `maxsim`, then the service's `rescore_depth`
    documents scored exactly from the file (as `SentenceSets` does); the bytes it holds."""
    mapped, lengths = level.mapped, level.lengths
    basis = fit_basis(fit_sample(mapped, search.seed), search.scan.dimensions)
    projected = torch.cat(
        [project(mapped[r : r + BLOCK], basis) for r in range(0, len(mapped), BLOCK)]
    )
    group = search.scan.group or padding_group(lengths.numpy())
    scan = compress(projected, lengths, basis, group)
    del projected

    def rank(query: torch.Tensor, excluded: int | None) -> np.ndarray:
        scores = maxsim_scores(approximate_best(query, scan)).numpy().astype(np.float64)
        ranked = len(lengths)
        if excluded is not None:
            scores[excluded], ranked = -np.inf, ranked - 1
        depth = search.scan.depth(ranked)
        best = np.sort(np.argsort(-scores, kind="stable")[:depth])
        scores = level.exactly(query, best, scores)
        if excluded is not None:
            scores[excluded] = -np.inf
        return scores

    return rank, scan.memory_bytes()


def timed_queries(rank: Rank, queries: list[tuple[torch.Tensor, int | None]]) -> dict:
    """p50, p95 and mean milliseconds of `rank` over `queries`, and each query's top 10."""
    latencies, tops = [], []
    for query, excluded in queries:
        started = time.perf_counter()
        scores = rank(query, excluded)
        latencies.append((time.perf_counter() - started) * 1000)
        tops.append(np.argsort(-scores, kind="stable")[:10].tolist())
    return {
        "p50_ms": float(np.percentile(latencies, 50)),
        "p95_ms": float(np.percentile(latencies, 95)),
        "mean_ms": statistics.mean(latencies),
        "tops": tops,
    }


def run_store(work: Path, factor: int, store: str, search: SearchSettings) -> dict:
    """One store at one factor, in this process (see the module docstring)."""
    torch.set_num_threads(2)
    lengths = torch.from_numpy(np.load(work / f"lengths_{factor}.npy"))
    starts = np.concatenate([[0], np.cumsum(lengths.numpy())])
    before = rss()
    mapped = MappedRows.of_file(work / f"grown_{factor}.npy")  # (R, d) float16, as served
    level = GrownLevel(mapped, lengths, starts)
    if store == "float32":
        rank, held = float32_ranking(level)
    elif store == "centroids":
        rank, held, fit_seconds = centroids_ranking(level, search)
    else:
        rank, held = compressed_ranking(level, search)
    loaded = rss()
    posted = [(query, None) for query in torch.load(work / "queries.pt")]
    by_id = [
        (mapped[int(starts[d]) : int(starts[d + 1])].float(), int(d))
        for d in np.load(work / "by_id.npy")
    ]
    rank(*posted[0])  # warm-up
    out = {
        name: timed_queries(rank, queries)
        for name, queries in (("posted", posted), ("by_id", by_id))
    }
    return {
        **out,
        "held_bytes_per_sentence": held / len(mapped),
        "rss_loaded_gib": loaded / 2**30,
        "rss_growth_gib": (loaded - before) / 2**30,
        "anonymous_after_queries_gib": status_bytes("RssAnon") / 2**30,
        "file_pages_after_queries_gib": status_bytes("RssFile") / 2**30,
        "rss_after_queries_gib": rss() / 2**30,
        "peak_rss_gib": status_bytes("VmHWM") / 2**30,
        **({"fit_seconds": fit_seconds} if store == "centroids" else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 3, 10])
    parser.add_argument("--noise", type=float, default=0.35)
    parser.add_argument("--queries", type=Path, default=AILA_QUERIES)
    parser.add_argument("--by-id", type=int, default=20, help="documents drawn as queries")
    parser.add_argument(
        "--stores", nargs="+", default=list(STORES), choices=STORES, help="float32 always runs"
    )
    parser.add_argument("--work", type=Path, default=None, help="where the grown files go")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/growth.json"))
    parser.add_argument("--child", nargs=2, metavar=("FACTOR", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    search = SearchSettings()
    if args.child:
        print(json.dumps(run_store(args.work, int(args.child[0]), args.child[1], search)))
        return
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        work = Path(scratch)
        result: dict = {
            "collection": grow(
                args.data_dir, args.queries, args.factors, args.noise, args.by_id, work
            ),
            "noise": args.noise,
            "scan_dimensions": search.scan.dimensions,
            "scan_rescore": search.scan.rescore,
            "scan_rescore_share": search.scan.rescore_share,
            "candidate_max_documents": search.candidates.max_documents,
            "factors": {},
        }
        for factor in args.factors:
            row = {}
            stores = ["float32", *(s for s in args.stores if s != "float32")]
            for store in stores:
                logger.info("factor %d, %s", factor, store)
                child = [sys.executable, __file__, "--child", str(factor), store]
                child += ["--work", str(work), "--data-dir", str(args.data_dir)]
                found = subprocess.run(child, capture_output=True, text=True)
                if found.returncode:
                    raise RuntimeError(f"{' '.join(child)} failed:\n{found.stderr[-3000:]}")
                row[store] = json.loads(found.stdout.strip().splitlines()[-1])
            for kind in ("posted", "by_id"):
                exact = row["float32"][kind].pop("tops")
                for store in stores[1:]:
                    found = row[store][kind]
                    overlaps = [
                        len(set(a) & set(b)) / 10
                        for a, b in zip(exact, found.pop("tops"), strict=True)
                    ]
                    found["top10_overlap"] = {
                        "mean": statistics.mean(overlaps),
                        "min": min(overlaps),
                    }
                    found["p50_ratio"] = found["p50_ms"] / row["float32"][kind]["p50_ms"]
            result["factors"][str(factor)] = row
            logger.info("factor %d: %s", factor, json.dumps(row))
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, result)


if __name__ == "__main__":
    main()
