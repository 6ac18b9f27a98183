"""`docsim index`: the staged build of one index version.

Stages (each writes only what its docstring says):
1. `plan`: read the corpus and split every document (nothing written).
2. `encode_and_store`: in blocks of documents, chunk, encode every level, insert the SQL rows
   of the version (status `building`, invisible to readers) and keep the vectors.
3. `write_vector_indexes`: `<tmp>/<level>.faiss`, `<level>.f16.npy` (vectors, float16) and
   `<level>.ids.npy` (int64 ids, row-aligned) for every level.
4. `write_manifest`: `<tmp>/manifest.json`.
5. `publish`: rename `<version>.tmp/` to `<version>/`, then one SQL transaction marks the
   version ready and makes it active.
Any failure or interruption removes the temporary directory and the version's rows, and
leaves the active version as it was. A killed build is cleaned up by the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine
from tqdm import tqdm

from indexer.chunking import chunk_document
from indexer.config import Settings
from indexer.corpus import CorpusFormat, Skipped, detect_format, read_corpus
from indexer.documents import LEVELS, Document
from indexer.sentences import SentenceSplitter
from indexer.split import EmptyDocumentError, split_document
from indexer.store import (
    UnitCounter,
    abandoned_versions,
    create_version,
    fail_version,
    insert_documents,
    publish_version,
)
from indexer.vector_index import METRIC, FaissIndex, choose_factory, gpu_count
from models.encoder import Encoder

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1


class IndexBuildError(RuntimeError):
    """The build cannot start or cannot finish; nothing was published."""


@dataclass
class BuildResult:
    version_id: int
    path: Path
    manifest: dict[str, Any]
    skipped: list[Skipped] = field(default_factory=list)


@dataclass
class LevelVectors:
    """Vectors and ids of every level, in insertion order."""

    vectors: dict[str, list[np.ndarray]] = field(default_factory=lambda: {lv: [] for lv in LEVELS})
    ids: dict[str, list[int]] = field(default_factory=lambda: {lv: [] for lv in LEVELS})

    def stacked(self, level: str, dim: int) -> tuple[np.ndarray, np.ndarray]:
        parts = self.vectors[level]
        vectors = np.concatenate(parts) if parts else np.empty((0, dim), np.float32)
        return vectors, np.asarray(self.ids[level], dtype=np.int64)


def version_dir_name(version_id: int) -> str:
    return f"{version_id:06d}"


def prepare_data_dir(data_dir: Path) -> Path:
    """Create `<data_dir>/indexes` and check that it is writable; returns it."""
    indexes = data_dir / "indexes"
    try:
        indexes.mkdir(parents=True, exist_ok=True)
        probe = indexes / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise IndexBuildError(
            f"data directory {str(data_dir)!r} is not writable: {error.strerror or error}"
        ) from error
    return indexes


@contextlib.contextmanager
def build_lock(indexes_dir: Path) -> Iterator[None]:
    """One build at a time per data directory (an OS lock, released even on SIGKILL)."""
    with (indexes_dir / ".build.lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            raise IndexBuildError(
                f"another build is running on {str(indexes_dir.parent)!r}; wait for it to finish"
            ) from error
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def recover_abandoned(engine: Engine, indexes_dir: Path) -> list[int]:
    """Clean up builds whose process died (call only while holding the build lock)."""
    recovered = []
    for row in abandoned_versions(engine):
        name = version_dir_name(row.version_id)
        for leftover in (indexes_dir / f"{name}.tmp", indexes_dir / name):
            shutil.rmtree(leftover, ignore_errors=True)
        fail_version(
            engine, row.version_id, "abandoned: the build process stopped before publishing"
        )
        recovered.append(row.version_id)
        logger.warning("Cleaned up abandoned build of version %d", row.version_id)
    for stray in indexes_dir.glob("*.tmp"):
        shutil.rmtree(stray, ignore_errors=True)
    return recovered


def plan(
    corpus: Path, fmt: CorpusFormat | str, splitter: SentenceSplitter, *, show_progress: bool
) -> tuple[list[Document], list[Skipped]]:
    """Stage 1: read and split every document. Writes nothing."""
    docs: list[Document] = []
    skipped: list[Skipped] = []
    for item in tqdm(read_corpus(corpus, fmt), desc="split", unit="doc", disable=not show_progress):
        if isinstance(item, Skipped):
            skipped.append(item)
            continue
        try:
            docs.append(split_document(item, splitter))
        except EmptyDocumentError:
            skipped.append(Skipped(str(item.metadata.get("source", item.doc_id)), "no sentences"))
    for skip in skipped:
        logger.warning("Skipped %s: %s", skip.ref, skip.reason)
    return docs, skipped


def add_chunks(docs: Sequence[Document], encoder: Encoder, capacity: int) -> list[Document]:
    """Fill in each document's token chunks (one tokenizer call for the whole block)."""
    texts = [doc.text[s.start : s.end] for doc in docs for s in doc.sentences()]
    offsets = encoder.token_offsets(texts)
    result, at = [], 0
    for doc in docs:
        n = doc.counts()["sentence"]
        result.append(chunk_document(doc, offsets[at : at + n], capacity))
        at += n
    return result


def encode_and_store(
    engine: Engine,
    version_id: int,
    docs: Sequence[Document],
    encoder: Encoder,
    *,
    capacity: int,
    block_documents: int,
    show_progress: bool,
) -> LevelVectors:
    """Stage 2: chunk, encode and insert the SQL rows of every document, block by block."""
    out = LevelVectors()
    counter = UnitCounter(version_id)
    total = sum(doc.counts()["sentence"] for doc in docs)
    with tqdm(total=total, desc="encode", unit="sent", disable=not show_progress) as bar:
        for start in range(0, len(docs), block_documents):
            block = add_chunks(docs[start : start + block_documents], encoder, capacity)
            vectors = encoder.encode_documents([doc.encoder_input() for doc in block])
            with engine.begin() as conn:
                ids = insert_documents(conn, version_id, block, counter)
            for level in LEVELS:
                out.ids[level].extend(ids[level])
            out.vectors["document"].append(np.stack([v.document.numpy() for v in vectors]))
            for level, attr in (
                ("section", "sections"),
                ("paragraph", "paragraphs"),
                ("sentence", "sentences"),
                ("chunk", "chunks"),
            ):
                out.vectors[level].extend(getattr(v, attr).numpy() for v in vectors)
            bar.update(sum(len(v.sentences) for v in vectors))
    return out


def write_vector_indexes(
    folder: Path, vectors: LevelVectors, dim: int, settings: Settings
) -> dict[str, dict[str, Any]]:
    """Stage 3: one FAISS index plus float16 vectors and ids per level."""
    use_gpu = settings.index.use_gpu == "auto" and gpu_count() > 0
    levels: dict[str, dict[str, Any]] = {}
    for level in LEVELS:
        matrix, ids = vectors.stacked(level, dim)
        factory = choose_factory(
            len(ids), settings.index.flat_max_vectors, settings.index.large_factory
        )
        index = FaissIndex.build(
            matrix, ids, factory, nprobe=settings.index.nprobe, use_gpu=use_gpu
        )
        files = {
            "index_file": f"{level}.faiss",
            "vectors_file": f"{level}.f16.npy",
            "ids_file": f"{level}.ids.npy",
        }
        index.save(folder / files["index_file"])
        np.save(folder / files["vectors_file"], matrix.astype(np.float16))
        np.save(folder / files["ids_file"], ids)
        levels[level] = {
            "count": int(len(ids)),
            "factory": factory,
            **files,
            "bytes": sum((folder / name).stat().st_size for name in files.values()),
        }
    return levels


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Stage 4: `manifest.json`, fsynced."""
    path = folder / "manifest.json"
    with path.open("w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def build_index(
    corpus: Path,
    *,
    settings: Settings,
    engine: Engine,
    encoder: Encoder,
    splitter: SentenceSplitter,
    fmt: CorpusFormat | str = CorpusFormat.auto,
    show_progress: bool = True,
) -> BuildResult:
    """Build, and atomically publish, a new index version of `corpus`."""
    indexes_dir = prepare_data_dir(settings.data_dir)
    capacity = settings.index.chunk_tokens or encoder.chunk_capacity
    if capacity > encoder.chunk_capacity:
        raise IndexBuildError(
            f"chunk_tokens={capacity} exceeds what the encoder takes ({encoder.chunk_capacity})"
        )
    with build_lock(indexes_dir):
        recover_abandoned(engine, indexes_dir)
        started = time.perf_counter()
        fmt = CorpusFormat(fmt)
        if fmt is CorpusFormat.auto:
            fmt = detect_format(corpus)  # recorded in the manifest as detected
        docs, skipped = plan(corpus, fmt, splitter, show_progress=show_progress)
        if not docs:
            raise IndexBuildError(
                f"no indexable documents in {str(corpus)!r} ({len(skipped)} skipped); "
                "nothing was published"
            )
        version_id = create_version(engine, encoder_name=encoder.name, path="")
        tmp = indexes_dir / f"{version_dir_name(version_id)}.tmp"
        final = indexes_dir / version_dir_name(version_id)
        published = False
        try:
            tmp.mkdir()
            encode_started = time.perf_counter()
            vectors = encode_and_store(
                engine,
                version_id,
                docs,
                encoder,
                capacity=capacity,
                block_documents=settings.index.block_documents,
                show_progress=show_progress,
            )
            encode_seconds = time.perf_counter() - encode_started
            levels = write_vector_indexes(tmp, vectors, encoder.dim, settings)
            n_sentences = levels["sentence"]["count"]
            manifest = {
                "schema_version": SCHEMA_VERSION,
                "version_id": version_id,
                "created_at": datetime.now(timezone.utc).isoformat(),
                "encoder": encoder.identity(),
                "dim": encoder.dim,
                "metric": METRIC,
                "vector_storage": "float16",
                "splitter": splitter.identity(),
                "chunk_tokens": capacity,
                "corpus": {
                    "path": str(corpus),
                    "format": fmt.value,
                    "documents": len(docs),
                    "skipped": len(skipped),
                    "skipped_examples": [{"ref": s.ref, "reason": s.reason} for s in skipped[:20]],
                },
                "counts": {level: info["count"] for level, info in levels.items()},
                "levels": levels,
                "build": {
                    "seconds": round(time.perf_counter() - started, 3),
                    "encode_seconds": round(encode_seconds, 3),
                    "sentences_per_second": round(n_sentences / max(encode_seconds, 1e-9), 1),
                },
            }
            write_manifest(tmp, manifest)
            os.rename(tmp, final)
            _fsync_dir(indexes_dir)
            publish_version(engine, version_id, path=str(final.resolve()), manifest=manifest)
            published = True
        except BaseException as error:
            reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            logger.error(
                "Build of version %d failed (%s); the active version is unchanged",
                version_id,
                reason,
            )
            shutil.rmtree(tmp, ignore_errors=True)
            if not published:
                shutil.rmtree(final, ignore_errors=True)
                fail_version(engine, version_id, reason)
            raise
    logger.info(
        "Published version %d: %s; encoded %d sentences in %.1f s (%.0f sentences/s)",
        version_id,
        ", ".join(f"{lv}={n}" for lv, n in manifest["counts"].items()),
        n_sentences,
        encode_seconds,
        manifest["build"]["sentences_per_second"],
    )
    return BuildResult(version_id=version_id, path=final, manifest=manifest, skipped=skipped)
