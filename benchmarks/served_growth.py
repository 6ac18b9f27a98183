"""The whole service as the collection grows: `POST /similar` latency, throughput, CPU and
resident memory from 1x to 100x AILA, the float32 sentence level (the code before issue 28)
against the compressed one where it fits, in one table.

    python benchmarks/served_growth.py --dir 1=AILA_DIR --dir 10=AILA_10X_DIR
        --dir 30=AILA_30X_DIR --dir 100=AILA_100X_DIR [--stores float32 compressed]
        [--float32-up-to 10] [--by-id 20] [--repeats 1] [--no-exhaustive]
        [--load-clients 16] [--load-seconds 60] [--out benchmarks/results/served_growth.json]

Each grown data directory is a published version written by `benchmarks/grown_version.py`
(real texts, real SQL rows and vector files; the base's vectors, perturbed for copies). For
each factor and store, `benchmarks/query_latency.py` runs in a process of its own, so that its
peak resident set is its own: an in-process service (ASGI, query encoding included) answers
the AILA development queries posted, `--by-id` indexed documents as queries, `maxsim` and
exhaustive `sdr`. The table gives p50 and p95 of each, CPU per request, the peak RSS and the
sentence level's bytes per sentence held, the service's startup (load and warm-up), and the
data directory's bytes on disk and build time (a grown version's `grown.json`); per factor,
the compressed store's p50 ratios to float32 and the top-10 overlap of their rankings (same
queries, same collection). `--float32-up-to F` measures the float32 store only up to factor F
(it holds 1.5 KB a sentence in memory). `--load-clients N` adds `benchmarks/load.py` per
factor: N concurrent clients against a real `docsim serve` (compressed) for
`--load-seconds`, its queries a second, latency and errors.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from record import figures as recorded_figures
from record import save

logger = logging.getLogger("benchmarks.served_growth")
QUERY_SETS = ("default_method", "default_by_id", "maxsim", "sdr_exhaustive")


def measure(
    data_dir: Path, store: str, by_id: int, repeats: int, work: Path, exhaustive: bool = True
) -> tuple[dict, dict]:
    """`query_latency.py`'s figures and rankings for one store, in a process of its own."""
    out, rankings = work / f"{store}.json", work / f"{store}.rankings.json"
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("query_latency.py")),
            "--data-dir",
            str(data_dir),
            "--stores",
            store,
            "--by-id",
            str(by_id),
            "--repeats",
            str(repeats),
            "--out",
            str(out),
            "--rankings",
            str(rankings),
            *([] if exhaustive else ["--no-exhaustive"]),
        ],
        check=True,
    )
    return recorded_figures(out)[store], json.loads(rankings.read_text())[store]


def throughput(data_dir: Path, clients: int, seconds: float, work: Path) -> dict:
    """`load.py`'s figures: `clients` concurrent clients against `docsim serve` (the
    compressed store) for `seconds`, in a process of its own."""
    out = work / "load.json"
    out.unlink(missing_ok=True)
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("load.py")),
            "--data-dir",
            str(data_dir),
            "--clients",
            str(clients),
            "--seconds",
            str(seconds),
            "--sentence-store",
            "compressed",
            "--ready-seconds",
            "3600",  # a first start at a hundred times AILA fits cells and BM25: half an hour
            "--out",
            str(out),
        ],
        check=True,
    )
    found = recorded_figures(out)[-1]
    keep = ("clients", "seconds", "queries", "queries_per_second", "posted", "by_id", "errors")
    return {k: found[k] for k in keep} | {
        "server_rss_max_gib": found["server_rss_max_bytes"] / 2**30
    }


def data_dir_facts(data_dir: Path) -> dict:
    """The data directory's bytes on disk (every file: SQL, vectors, encoder export, cells)
    and, where `grown_version.py` wrote its facts, the build's seconds."""
    files = [f for f in data_dir.rglob("*") if f.is_file()]
    facts: dict = {"bytes_on_disk": sum(f.stat().st_blocks * 512 for f in files)}
    grown = data_dir / "grown.json"
    if grown.is_file():
        facts["build_seconds"] = json.loads(grown.read_text())["build_seconds"]
    return facts


def overlap(a: list[list[str]], b: list[list[str]]) -> dict:
    found = [len(set(x) & set(y)) / max(1, len(x)) for x, y in zip(a, b, strict=True)]
    return {"mean": sum(found) / len(found), "min": min(found)}


def table(result: dict) -> str:
    lines = [
        "| factor | sentences | store | posted p50 / p95 ms | by id p50 / p95 ms | maxsim p50 "
        "| sdr p50 | CPU ms / posted | peak RSS GiB | after: anonymous / file GiB "
        "| bytes / sentence | disk GB (B / sentence) | build min | startup s "
        "| queries / s (clients) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- |",
    ]
    for factor, stores in result["factors"].items():
        disk = stores.get("data_dir", {})
        load = stores.get("load", {})
        for store, f in stores.items():
            if store in ("compressed_vs_float32", "data_dir", "load"):
                continue
            served = (
                f"{load['queries_per_second']:.2f} ({load['clients']})"
                if load and store == "compressed"
                else "-"
            )
            after = f.get("after_queries_gib", {})  # older reports have none
            sdr = f.get("sdr_exhaustive", {}).get("p50_ms", math.nan)
            maxsim = f.get("maxsim", {}).get("p50_ms", math.nan)
            on_disk = disk.get("bytes_on_disk", math.nan)
            per_sentence = on_disk / f["index"]["sentences"]
            lines.append(
                f"| {factor}x | {f['index']['sentences']:,} | {store} "
                f"| {f['default_method']['p50_ms']:.0f} / {f['default_method']['p95_ms']:.0f} "
                f"| {f['default_by_id']['p50_ms']:.0f} / {f['default_by_id']['p95_ms']:.0f} "
                f"| {maxsim:.0f} | {sdr:.0f} "
                f"| {f['default_method']['cpu_ms_per_request']:.0f} | {f['rss_gib']:.2f} "
                f"| {after.get('anonymous', math.nan):.2f} / {after.get('file', math.nan):.2f} "
                f"| {f['sentence_level_bytes_per_sentence']:.0f} "
                f"| {on_disk / 1e9:.1f} ({per_sentence:.0f}) "
                f"| {disk.get('build_seconds', math.nan) / 60:.0f} "
                f"| {f.get('startup_seconds', math.nan):.0f} | {served} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dir", action="append", required=True, help="FACTOR=DATA_DIR, once per factor"
    )
    parser.add_argument(
        "--stores", nargs="+", choices=("float32", "compressed"), default=["float32", "compressed"]
    )
    parser.add_argument("--by-id", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--no-exhaustive", action="store_true", help="leave out exhaustive `sdr` (100x: minutes)"
    )
    parser.add_argument(
        "--float32-up-to",
        type=int,
        default=None,
        help="measure the float32 store only at factors up to this one (it holds 1.5 KB a "
        "sentence: 30x AILA would not fit in 24 GiB)",
    )
    parser.add_argument(
        "--load-clients", type=int, default=0, help="also `load.py` with this many clients"
    )
    parser.add_argument("--load-seconds", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/served_growth.json"))
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    dirs = {int(f): Path(d) for f, d in (item.split("=", 1) for item in args.dir)}
    result: dict = {"stores": args.stores, "by_id": args.by_id, "repeats": args.repeats}
    result["factors"] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for factor, data_dir in sorted(dirs.items()):
            figures, rankings = {}, {}
            stores = [
                store
                for store in args.stores
                if store != "float32" or args.float32_up_to is None or factor <= args.float32_up_to
            ]
            for store in stores:
                logger.info("%dx (%s): %s", factor, data_dir, store)
                figures[store], rankings[store] = measure(
                    data_dir, store, args.by_id, args.repeats, Path(tmp), not args.no_exhaustive
                )
            figures["data_dir"] = data_dir_facts(data_dir)
            if args.load_clients:
                logger.info("%dx: %d clients", factor, args.load_clients)
                figures["load"] = throughput(
                    data_dir, args.load_clients, args.load_seconds, Path(tmp)
                )
            if len(rankings) == 2:
                figures["compressed_vs_float32"] = {
                    "top10_overlap": {
                        name: overlap(rankings["float32"][name], rankings["compressed"][name])
                        for name in rankings["float32"]
                    },
                    **{
                        f"{name}_p50_ratio": figures["compressed"][name]["p50_ms"]
                        / figures["float32"][name]["p50_ms"]
                        for name in QUERY_SETS
                        if name in figures["float32"] and name in figures["compressed"]
                    },
                }
            result["factors"][str(factor)] = figures
            args.out.parent.mkdir(parents=True, exist_ok=True)
            save(args.out, result)  # each factor as it ends
    result["table"] = table(result)
    print(result["table"])
    print(json.dumps({k: v for k, v in result.items() if k != "table"}, indent=2))
    save(args.out, result)


if __name__ == "__main__":
    main()
