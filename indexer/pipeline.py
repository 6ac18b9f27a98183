"""`docsim index`: the staged build of one index version.

Stages (each writes only what its docstring says):
1. `plan`: read the corpus (or the stored documents of a version) and split every document.
2. `encode_and_store`: in blocks of documents, chunk and encode every level, write the block's
   vectors to `<tmp>/blocks/`, then insert its SQL rows (status `building`, invisible to
   readers) and record the block as done, in one transaction.
3. `write_vector_indexes`: `<tmp>/<level>.faiss`, `<level>.f16.npy` (vectors, float16) and
   `<level>.ids.npy` (int64 ids, row-aligned) for every level.
4. `write_manifest`: `<tmp>/manifest.json`.
5. `publish`: rename `<version>.tmp/` to `<version>/`, then one SQL transaction marks the
   version ready and makes it active.
Any failure or interruption removes the temporary directory and the version's rows, and
leaves the active version as it was. A killed build is cleaned up by the next one, unless a
job suspended it to resume: a resumed build checks that its plan is the same (fingerprint)
and continues after the last committed block.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
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
from indexer.documents import LEVELS, Document, SourceDocument
from indexer.engines import EncodeEngine, LocalEngine
from indexer.sentences import SentenceSplitter
from indexer.split import EmptyDocumentError, split_document
from indexer.store import (
    UnitCounter,
    abandoned_versions,
    count_units,
    create_version,
    fail_version,
    insert_documents,
    mark_building,
    publish_version,
    set_build_state,
    suspend_version,
    suspended_versions,
    version_row,
)
from indexer.vector_index import METRIC, FaissIndex, choose_factory, gpu_count
from models.encoder import Encoder

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1


class IndexBuildError(RuntimeError):
    """The build cannot start or cannot finish; nothing was published."""


class BuildBusyError(IndexBuildError):
    """Another build (or document update) holds the data directory's lock."""


@dataclass
class BuildHooks:
    """How a caller (a job) follows and steers a build.

    Attributes:
        on_version: called with the new version's id once it exists.
        on_progress: called with (sentences done, sentences in total) after each committed
            block; it may raise to stop the build (cancellation), which then cleans up.
        resume_version: a suspended build of the same plan to continue instead of starting over.
        keep_on_failure: given the error, whether to leave the version's rows and blocks for a
            later resume (a job that may be retried); otherwise everything is removed.
    """

    on_version: Callable[[int], None] | None = None
    on_progress: Callable[[int, int], None] | None = None
    resume_version: int | None = None
    keep_on_failure: Callable[[BaseException], bool] | None = None


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


def discard_version(engine: Engine, indexes_dir: Path, version_id: int, reason: str) -> None:
    """Remove an unpublished version's files and rows (a suspended build that cannot resume)."""
    name = version_dir_name(version_id)
    shutil.rmtree(indexes_dir / f"{name}.tmp", ignore_errors=True)
    fail_version(engine, version_id, reason)


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
            raise BuildBusyError(
                f"another build is running on {str(indexes_dir.parent)!r}; wait for it to finish"
            ) from error
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def recover_abandoned(engine: Engine, indexes_dir: Path, keep: int | None = None) -> list[int]:
    """Clean up builds whose process died (call only while holding the build lock). Suspended
    builds (kept by a failed job to resume) and `keep` are left alone."""
    recovered = []
    kept = {f"{version_dir_name(v)}.tmp" for v in suspended_versions(engine)}
    if keep is not None:
        kept.add(f"{version_dir_name(keep)}.tmp")
    for row in abandoned_versions(engine):
        if row.version_id == keep:
            continue
        name = version_dir_name(row.version_id)
        for leftover in (indexes_dir / f"{name}.tmp", indexes_dir / name):
            shutil.rmtree(leftover, ignore_errors=True)
        fail_version(
            engine, row.version_id, "abandoned: the build process stopped before publishing"
        )
        recovered.append(row.version_id)
        logger.warning("Cleaned up abandoned build of version %d", row.version_id)
    for stray in indexes_dir.glob("*.tmp"):
        if stray.name not in kept:
            shutil.rmtree(stray, ignore_errors=True)
    return recovered


def plan(
    source: Iterable[SourceDocument | Skipped],
    splitter: SentenceSplitter,
    *,
    show_progress: bool,
) -> tuple[list[Document], list[Skipped]]:
    """Stage 1: split every document of `source` (a corpus reader, or stored documents).
    Writes nothing."""
    docs: list[Document] = []
    skipped: list[Skipped] = []
    for item in tqdm(source, desc="split", unit="doc", disable=not show_progress):
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


def plan_fingerprint(docs: Sequence[Document], encoder: Encoder, capacity: int, block: int) -> str:
    """What must not change for a build to resume: the documents, their split, the encoder,
    the chunk size and the block size."""
    digest = hashlib.sha256()
    identity = encoder.identity()
    digest.update(json.dumps([identity.get("config_hash"), capacity, block]).encode())
    for doc in docs:
        digest.update(doc.doc_id.encode() + b"\0" + doc.text.encode() + b"\0")
        for sentence in doc.sentences():
            digest.update(b"%d:%d," % (sentence.start, sentence.end))
    return digest.hexdigest()


def _block_file(folder: Path, block: int) -> Path:
    return folder / "blocks" / f"{block:06d}.npz"


def encode_and_store(
    engine: Engine,
    version_id: int,
    docs: Sequence[Document],
    encoder: Encoder,
    *,
    folder: Path,
    capacity: int,
    block_documents: int,
    fingerprint: str,
    blocks_done: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
    show_progress: bool,
    encode_engine: EncodeEngine | None = None,
) -> int:
    """Stage 2: chunk, encode and insert the SQL rows of every document, block by block.

    The vectors come from `encode_engine` (default: this process, `LocalEngine`).

    Each block's vectors go to `<folder>/blocks/<n>.npz` first; its rows and the new count of
    committed blocks then go to SQL in one transaction, so that SQL always says which blocks
    a resumed build can skip. Returns the number of blocks.
    """
    (folder / "blocks").mkdir(exist_ok=True)
    counter = UnitCounter(version_id)
    counter.next.update(count_units(engine, version_id))  # after the blocks already committed
    total = sum(doc.counts()["sentence"] for doc in docs)
    starts = list(range(0, len(docs), block_documents))
    done = sum(d.counts()["sentence"] for d in docs[: blocks_done * block_documents])
    pending = (
        add_chunks(docs[start : start + block_documents], encoder, capacity)
        for start in starts[blocks_done:]
    )
    # closing(): an engine's resources (a local Ray) go as soon as the loop ends or fails
    with (
        tqdm(
            total=total, initial=done, desc="encode", unit="sent", disable=not show_progress
        ) as bar,
        contextlib.closing(
            (encode_engine or LocalEngine(encoder)).encode_blocks(pending)
        ) as encoded,
    ):
        for b, (block, vectors) in enumerate(encoded, start=blocks_done):
            arrays = {"document": np.stack([v.document.numpy() for v in vectors])}
            for level, attr in (
                ("section", "sections"),
                ("paragraph", "paragraphs"),
                ("sentence", "sentences"),
                ("chunk", "chunks"),
            ):
                arrays[level] = np.concatenate([getattr(v, attr).numpy() for v in vectors])
            with engine.begin() as conn:
                ids = insert_documents(conn, version_id, block, counter)
                target = _block_file(folder, b)
                partial = target.with_suffix(".partial.npz")
                np.savez(
                    partial,
                    **{f"{lv}_vectors": arrays[lv] for lv in LEVELS},
                    **{f"{lv}_ids": np.asarray(ids[lv], np.int64) for lv in LEVELS},
                )
                os.replace(partial, target)
                set_build_state(
                    conn, version_id, {"fingerprint": fingerprint, "blocks_done": b + 1}
                )
            n = sum(len(v.sentences) for v in vectors)
            done += n
            bar.update(n)
            if on_progress is not None:
                on_progress(done, total)
    return len(starts)


def load_blocks(folder: Path, n_blocks: int, dim: int) -> LevelVectors:
    """Every level's vectors and ids from the block files, in block order."""
    out = LevelVectors()
    for b in range(n_blocks):
        with np.load(_block_file(folder, b)) as block:
            for level in LEVELS:
                out.vectors[level].append(block[f"{level}_vectors"].reshape(-1, dim))
                out.ids[level].extend(block[f"{level}_ids"].tolist())
    return out


def write_vector_indexes(
    folder: Path, vectors: LevelVectors, dim: int, settings: Settings
) -> dict[str, dict[str, Any]]:
    """Stage 3: one FAISS index plus float16 vectors and ids per level."""
    use_gpu = settings.index.use_gpu == "auto" and gpu_count() > 0
    levels: dict[str, dict[str, Any]] = {}
    for level in LEVELS:
        matrix, ids = vectors.stacked(level, dim)
        # FAISS holds the vectors as they are stored and served (float16-rounded), so that unit
        # search, SDR scoring and documents added later all score with the same numbers
        matrix = matrix.astype(np.float16).astype(np.float32)  # (n, d)
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


def _resumable(engine: Engine, version_id: int, fingerprint: str, tmp: Path) -> int:
    """How many committed blocks a suspended build of the same plan has (0: start over)."""
    row = version_row(engine, version_id)
    state = (row.build_state or {}) if row is not None else {}
    if (
        row is None
        or row.status not in ("suspended", "building")
        or state.get("fingerprint") != fingerprint
        or not tmp.is_dir()
    ):
        return 0
    return int(state.get("blocks_done", 0))


def build_index(
    corpus: Path | None,
    *,
    settings: Settings,
    engine: Engine,
    encoder: Encoder,
    splitter: SentenceSplitter,
    fmt: CorpusFormat | str = CorpusFormat.auto,
    documents: Iterable[SourceDocument | Skipped] | None = None,
    source_label: str | None = None,
    hooks: BuildHooks | None = None,
    show_progress: bool = True,
    encode_engine: EncodeEngine | None = None,
) -> BuildResult:
    """Build, and atomically publish, a new index version of `corpus` (or of `documents`,
    e.g. the stored documents of a version, described by `source_label`).

    Raises:
        BuildBusyError: another build holds the lock.
        IndexBuildError: nothing to index, or a bad setting; nothing was published.
    """
    hooks = hooks or BuildHooks()
    indexes_dir = prepare_data_dir(settings.data_dir)
    capacity = settings.index.chunk_tokens or encoder.chunk_capacity
    if capacity > encoder.chunk_capacity:
        raise IndexBuildError(
            f"chunk_tokens={capacity} exceeds what the encoder takes ({encoder.chunk_capacity})"
        )
    block_documents = settings.index.block_documents
    with build_lock(indexes_dir):
        recover_abandoned(engine, indexes_dir, keep=hooks.resume_version)
        started = time.perf_counter()
        fmt = CorpusFormat(fmt)
        if documents is None:
            if corpus is None:
                raise IndexBuildError("give a corpus path or documents to index")
            if fmt is CorpusFormat.auto:
                fmt = detect_format(corpus)  # recorded in the manifest as detected
            documents = read_corpus(corpus, fmt)
        label = source_label or str(corpus)
        docs, skipped = plan(documents, splitter, show_progress=show_progress)
        if not docs:
            raise IndexBuildError(
                f"no indexable documents in {label!r} ({len(skipped)} skipped); "
                "nothing was published"
            )
        fingerprint = plan_fingerprint(docs, encoder, capacity, block_documents)
        blocks_done = 0
        if hooks.resume_version is not None:
            version_id = hooks.resume_version
            tmp = indexes_dir / f"{version_dir_name(version_id)}.tmp"
            blocks_done = _resumable(engine, version_id, fingerprint, tmp)
            if blocks_done:
                mark_building(engine, version_id)
                logger.info(
                    "Resuming version %d after %d committed blocks", version_id, blocks_done
                )
            else:
                logger.info("Version %d cannot be resumed; starting a new build", version_id)
                discard_version(engine, indexes_dir, version_id, "superseded by a fresh build")
        if not blocks_done:
            version_id = create_version(engine, encoder_name=encoder.name, path="")
        if hooks.on_version is not None:
            hooks.on_version(version_id)
        tmp = indexes_dir / f"{version_dir_name(version_id)}.tmp"
        final = indexes_dir / version_dir_name(version_id)
        published = False
        try:
            tmp.mkdir(exist_ok=bool(blocks_done))
            encode_started = time.perf_counter()
            n_blocks = encode_and_store(
                engine,
                version_id,
                docs,
                encoder,
                folder=tmp,
                capacity=capacity,
                block_documents=block_documents,
                fingerprint=fingerprint,
                blocks_done=blocks_done,
                on_progress=hooks.on_progress,
                show_progress=show_progress,
                encode_engine=encode_engine,
            )
            encode_seconds = time.perf_counter() - encode_started
            vectors = load_blocks(tmp, n_blocks, encoder.dim)
            levels = write_vector_indexes(tmp, vectors, encoder.dim, settings)
            shutil.rmtree(tmp / "blocks")
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
                    "path": label,
                    "format": fmt.value,
                    "documents": len(docs),
                    "skipped": len(skipped),
                    "skipped_examples": [{"ref": s.ref, "reason": s.reason} for s in skipped[:20]],
                },
                "counts": {level: info["count"] for level, info in levels.items()},
                "levels": levels,
                "build": {
                    "resumed_after_blocks": blocks_done,
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
            keep = hooks.keep_on_failure is not None and hooks.keep_on_failure(error)
            if not published and keep and tmp.is_dir():
                suspend_version(engine, version_id, reason)
                logger.info("Kept the committed blocks of version %d to resume", version_id)
                raise
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
