"""`docsim index`: the staged build of one index version, published atomically.

Stages 1-3 (`indexer.builder.stages`): split, encode and store in blocks, write the vector
files into `<version>.tmp/`. Then `manifest.json` (`indexer.store.manifest`), and publish:
rename `<version>.tmp/` to `<version>/`, then one SQL transaction marks the version ready and
makes it active. Any failure or interruption removes the temporary directory and the
version's rows, and leaves the active version as it was. A killed build is cleaned up by the
next one, unless a job suspended it to resume: a resumed build checks that its plan is the
same (fingerprint) and continues after the last committed block.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from indexer.builder.backend import BackendError, install_backend, prepare_backend
from indexer.builder.engines import EncodeEngine
from indexer.builder.stages import (
    encode_and_store,
    load_blocks,
    plan,
    plan_fingerprint,
    write_vector_indexes,
)
from indexer.config import Settings
from indexer.store.data_lock import DataDirBusyError, hold_data_dir
from indexer.store.manifest import SCHEMA_VERSION, Manifest, write_manifest
from indexer.store.tables import VersionStatus
from indexer.store.vector_index import METRIC
from indexer.store.versions import (
    create_version,
    discard_version,
    fail_version,
    mark_building,
    publish_version,
    recover_abandoned,
    suspend_version,
    version_dir_name,
    version_row,
)
from indexer.text.corpus import CorpusFormat, FileLimits, Skipped, detect_format, read_corpus
from indexer.text.documents import SourceDocument
from indexer.text.sentences import SentenceSplitter
from models.encoder import Encoder

logger = logging.getLogger(__name__)


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


def prepare_data_dir(data_dir: Path) -> Path:
    """Create `<data_dir>/indexes` and check that it is writable; returns it. Callers in
    parallel each write a probe of their own (a unique temporary file)."""
    indexes = data_dir / "indexes"
    try:
        indexes.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=indexes, prefix=".write-probe-"):
            pass
    except OSError as error:
        raise IndexBuildError(
            f"data directory {str(data_dir)!r} is not writable: {error.strerror or error}"
        ) from error
    return indexes


BUILD_WAITS_FOR_CHANGES_SECONDS = 60.0


def disk_full(error: BaseException | None) -> bool:
    """Whether `error`, or an error it was raised from, is a full disk (ENOSPC)."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(error):  # FAISS and SQLite say it in words
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


@contextlib.contextmanager
def build_lock(indexes_dir: Path) -> Iterator[None]:
    """One build at a time per data directory, and no document change during it
    (`indexer.store.data_lock`); a build waits for the changes running to end.

    Raises:
        BuildBusyError: another build is running, or changes held on for a minute.
    """
    try:
        with hold_data_dir(indexes_dir, "build", BUILD_WAITS_FOR_CHANGES_SECONDS):
            yield
    except DataDirBusyError as error:
        raise BuildBusyError(str(error)) from error


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
        or row.status not in (VersionStatus.suspended, VersionStatus.building)
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
            documents = read_corpus(corpus, fmt, FileLimits(**settings.files.model_dump()))
        label = source_label or str(corpus)
        docs, skipped = plan(documents, splitter, show_progress=show_progress)
        if not docs:
            raise IndexBuildError(
                f"no indexable documents in {label!r} ({len(skipped)} skipped); "
                "nothing was published"
            )
        try:
            backend = prepare_backend(
                settings, encoder, docs, capacity=capacity, corpus_label=label
            )
        except BackendError as error:
            raise IndexBuildError(str(error)) from error
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
            backend_dir = install_backend(encoder, tmp)
            if backend_dir is not None:
                backend["dir"] = backend_dir
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
            manifest: Manifest = {
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
                "backend": backend,
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
            # a full disk keeps nothing: the space goes back to the served version and the OS
            keep = (
                hooks.keep_on_failure is not None
                and hooks.keep_on_failure(error)
                and not disk_full(error)
            )
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
