"""Gathering documents' rows from a version's vectors file (`MappedRows[rows]`, what the exact
stage reads): every row through the map (the code before) against `MappedRows.read_rows`,
which reads each run of consecutive rows with `pread`.

    python benchmarks/mapped_gather.py --file AILA-10X/indexes/000001/sentence.f16.npy
        [--documents 291] [--rows 117] [--rounds 30] [--out benchmarks/results/mapped_gather.json]

Each round draws `--documents` distinct runs of `--rows` consecutive rows at random (what the
exact stage of `maxsim` reads: at 10x AILA it rescores 1% of 29,140 judgments, of median 117
sentences), then gathers them both ways, in alternating order. Reported: each way's p50 and
mean time per gather, and the growth of this process's file-backed resident memory (`RssFile`)
over all rounds: the pages a way leaves mapped into the process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from record import save

from docsim.search.served.mapped_rows import MappedRows, as_float16


def rss_file_gib() -> float:
    text = Path("/proc/self/status").read_text()
    return int(text.split("RssFile:")[1].split()[0]) / 2**20


def through_map(mapped: MappedRows, rows: np.ndarray) -> np.ndarray:
    """`MappedRows[rows]` as it was before `read_rows`: every row through the map."""
    flat = mapped.place[rows]
    out = np.empty((len(flat), mapped.shape[1]), dtype=np.float16)
    in_file = flat >= 0
    out[in_file] = as_float16(mapped.file[flat[in_file]])
    out[~in_file] = mapped.added[-1 - flat[~in_file]]
    return out


def read(mapped: MappedRows, rows: np.ndarray) -> np.ndarray:
    """`MappedRows[rows]` as it is."""
    return mapped[torch.from_numpy(rows)].numpy()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--file", type=Path, required=True)
    parser.add_argument("--documents", type=int, default=291)
    parser.add_argument("--rows", type=int, default=117)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/mapped_gather.json"))
    args = parser.parse_args()
    mapped = MappedRows.of_file(args.file)
    n = len(mapped)
    rng = np.random.default_rng(0)
    ways = {"map": lambda rows: through_map(mapped, rows), "pread": lambda rows: read(mapped, rows)}
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    file_growth = dict.fromkeys(ways, 0.0)
    for r in range(args.rounds):
        slots = rng.choice(n // args.rows, args.documents, replace=False)  # distinct documents
        starts = np.sort(slots) * args.rows
        rows = (starts[:, None] + np.arange(args.rows)).reshape(-1)  # (documents * rows,)
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        results = []
        for way in order:
            before = rss_file_gib()
            started = time.perf_counter()
            results.append(ways[way](rows))
            seconds[way].append(time.perf_counter() - started)
            file_growth[way] += rss_file_gib() - before
        assert np.array_equal(results[0], results[1])
    report = {
        "file": str(args.file),
        "rows_in_file": n,
        "documents": args.documents,
        "rows_per_document": args.rows,
        "rounds": args.rounds,
        **{
            way: {
                "p50_ms": statistics.median(s) * 1000,
                "mean_ms": statistics.mean(s) * 1000,
                "rss_file_growth_gib": file_growth[way],
            }
            for way, s in seconds.items()
        },
    }
    report["pread_p50_ratio"] = report["pread"]["p50_ms"] / report["map"]["p50_ms"]
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, report)


if __name__ == "__main__":
    main()
