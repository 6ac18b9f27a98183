"""`manifest.json`: what a version holds and how it was built, written beside its files and
kept in SQL (`index_versions.manifest`). The build writes a `Manifest`; readers get the same
JSON back as a plain dict (SQL's JSON column), which these types document."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from typing_extensions import NotRequired, TypedDict

from docsim.indexer.errors import CorruptFileError

SCHEMA_VERSION = 1


class LevelEntry(TypedDict):
    count: int  # vectors (= ids) at this level
    factory: str  # FAISS index factory string
    index_file: str | None  # FAISS's file; None: built from `vectors_file` when read
    lists_file: NotRequired[str]  # an IVF-Flat level: its centroids and each vector's list
    nprobe: NotRequired[int]  # an IVF level without lists: a reader trains it (`level_files`)
    vectors_file: str  # float16 `(count, dim)` or int8 rows `(count,)` (`stored_rows`)
    row_format: NotRequired[str]  # `float16` or `int8`; absent: float16 (built before)
    ids_file: str  # int64 `(count,)`, ascending
    bytes: int
    sha256: NotRequired[dict[str, str]]  # file name -> its sha256, checked at load


class CorpusEntry(TypedDict):
    path: str
    format: str
    documents: int
    skipped: int
    skipped_examples: list[dict[str, str]]


class BuildEntry(TypedDict):
    resumed_after_blocks: int
    seconds: float
    encode_seconds: float
    sentences_per_second: float  # encoded, not reused
    # vectors kept from the active version: from_version, documents, sentences,
    # encoded_sentences (`indexer.builder.reuse.Reuse.record`)
    reused: NotRequired[dict[str, int]]


class BackendEntry(TypedDict):
    name: str  # `torch`, `openvino-int8` or `openvino-fp32`
    dir: NotRequired[str]  # the export's folder inside the version (`encoder`)
    calibration: NotRequired[dict[str, Any]]  # the text that calibrated an int8 export


class Manifest(TypedDict):
    schema_version: int
    version_id: int
    created_at: str  # ISO 8601, UTC
    encoder: dict[str, Any]  # `Encoder.identity()`: name, source, config hash, checkpoint sha256
    dim: int
    metric: str
    vector_storage: str
    splitter: dict[str, Any]  # `SentenceSplitter.identity()`
    chunk_tokens: int
    corpus: CorpusEntry
    counts: dict[str, int]
    levels: dict[str, LevelEntry]
    build: BuildEntry
    backend: NotRequired[BackendEntry]  # absent in versions built before backends: torch


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def check_files(folder: Path, level: LevelEntry, names: list[str]) -> None:
    """The files `names` of one level hold what the build wrote (versions built before
    checksums were recorded are not checked).

    Raises:
        CorruptFileError: naming the file whose sha256 differs.
    """
    recorded = level.get("sha256") or {}
    for name in names:
        want = recorded.get(name)
        if want is not None and file_sha256(folder / name) != want:
            raise CorruptFileError(
                f"{folder.name}/{name} is corrupt: its sha256 is not the one its build "
                "recorded; rebuild the version (docsim reindex current)"
            )


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """`<folder>/manifest.json`, fsynced."""
    path = folder / "manifest.json"
    with path.open("w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
