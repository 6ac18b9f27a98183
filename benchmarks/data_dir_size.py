"""What a data directory holds on disk, per collection, level and file: the bytes of each
version's files, the SQL database, and the bytes per indexed sentence, so that two layouts (a
directory built before a change and one built after) are compared in one record.

    python benchmarks/data_dir_size.py --data-dir AFTER [--data-dir BEFORE ...] \\
        [--out benchmarks/results/data_dir_size.json]

Each directory's active versions are read from its manifests (`manifest.json` of the newest
version folder of each collection); the SQLite file counts once per directory (shared by its
collections), a PostgreSQL database is not counted.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from record import save

logger = logging.getLogger("benchmarks.data_dir_size")


def version_folders(data_dir: Path) -> dict[str, Path]:
    """`collection -> its newest version folder` (`indexes/` is the default collection's)."""
    homes = {"default": data_dir / "indexes"}
    collections = data_dir / "collections"
    if collections.is_dir():
        homes |= {p.name: p for p in sorted(collections.iterdir()) if p.is_dir()}
    found = {}
    for name, home in homes.items():
        versions = sorted(p for p in home.glob("[0-9]*") if (p / "manifest.json").is_file())
        if versions:
            found[name] = versions[-1]
    return found


def version_size(folder: Path) -> dict[str, Any]:
    """The bytes of a version's files per level, and its sentences."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    levels: dict[str, dict[str, int]] = {}
    for level in manifest["levels"]:
        files = sorted(folder.glob(f"{level}.*"))
        levels[level] = {f.name: f.stat().st_size for f in files}
    total = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return {
        "version": folder.name,
        "sentences": manifest["levels"]["sentence"]["count"],
        "levels": levels,
        "level_bytes": {lv: sum(files.values()) for lv, files in levels.items()},
        "total_bytes": total,
    }


def directory_size(data_dir: Path) -> dict[str, Any]:
    sqlite = data_dir / "docsim.sqlite3"
    sql_bytes = sqlite.stat().st_size if sqlite.is_file() else 0
    collections = {name: version_size(f) for name, f in version_folders(data_dir).items()}
    sentences = sum(c["sentences"] for c in collections.values())
    files = sum(c["total_bytes"] for c in collections.values())
    return {
        "collections": collections,
        "sqlite_bytes": sql_bytes,
        "sentences": sentences,
        "bytes_per_sentence": round((files + sql_bytes) / max(sentences, 1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, action="append", required=True)
    parser.add_argument(
        "--label", action="append", help="a name per --data-dir (default: its position)"
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/data_dir_size.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    labels = args.label or [str(i) for i in range(len(args.data_dir))]
    if len(labels) != len(args.data_dir):
        parser.error("give one --label per --data-dir")
    result = {label: directory_size(d) for label, d in zip(labels, args.data_dir, strict=True)}
    for label, found in result.items():
        logger.info("%s: %.1f bytes per sentence", label, found["bytes_per_sentence"])
    print(json.dumps(result, indent=2))
    save(args.out, result)


if __name__ == "__main__":
    main()
