"""`docsim index`: the staged build of one index version, published atomically.

`build_index` runs the stages in order, each a function below that says what it reads and
writes:

1. `open_source`, `split_source`: read the corpus (or the stored documents of a version) and
   split every document into a scratch folder, a block per file
   (`indexer.builder.split_plan`): no stage holds the whole corpus in memory.
2. `choose_backend`, `open_version`: put the encoder on its backend (the active version's
   own export when its vectors can be reused: `indexer.builder.reuse`); create the version's
   `building` row, or take up a suspended one.
3. `encode_version`: encode and store in blocks (`<version>.tmp/blocks/`, SQL rows); the
   documents the active version holds unchanged keep their vectors instead.
4. `index_version`: write the vector files into `<version>.tmp/`.
5. `build_manifest` (`indexer.builder.manifest`), then `publish`: write `manifest.json`,
   rename `<version>.tmp/` to `<version>/`, then one SQL transaction marks the version ready
   and makes it active.

Any failure or interruption (`abandon`) removes the temporary directory and the version's
rows, and leaves the active version as it was. A killed build is cleaned up by the next one,
unless a job suspended it to resume: a resumed build checks that its plan is the same
(fingerprint) and continues after the last committed block.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine

from docsim.indexer.builder.backend import install_backend, prepare_backend, resolve_backend
from docsim.indexer.builder.engines import EncodeEngine
from docsim.indexer.builder.field_checks import BuildFieldTypes
from docsim.indexer.builder.lifecycle import VersionTarget, abandon, open_version, publish
from docsim.indexer.builder.manifest import build_entry, build_manifest, corpus_entry
from docsim.indexer.builder.reuse import Reuse, previous_backend, previous_version, reusing
from docsim.indexer.builder.source import Source, open_source, split_source
from docsim.indexer.builder.split_plan import SplitPlan
from docsim.indexer.builder.stages import encode_and_store, plan_fingerprint, write_vector_indexes
from docsim.indexer.choices import CorpusFormat
from docsim.indexer.errors import (
    AlreadyPublishedError,
    BackendError,
    BuildBusyError,
    DataDirBusyError,
    IndexBuildError,
    NoActiveIndexError,
)
from docsim.indexer.settings import Settings
from docsim.indexer.store.data_lock import Kind, hold_data_dir
from docsim.indexer.store.manifest import BackendEntry, LevelEntry, Manifest
from docsim.indexer.store.versions import VersionRow, active_version, recover_abandoned
from docsim.indexer.text.corpus import Skipped
from docsim.indexer.text.documents import Document, SourceDocument
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.models.encoders.encoder import Encoder

logger = logging.getLogger(__name__)


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
    manifest: Manifest
    skipped: list[Skipped] = field(default_factory=list)


def prepare_data_dir(indexes: Path) -> Path:
    """Create a collection's folder of versions (`Settings.indexes_dir`) and check that it is
    writable; returns it. Callers in parallel each write a probe of their own (a unique
    temporary file)."""
    try:
        indexes.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=indexes, prefix=".write-probe-"):
            pass
    except OSError as error:
        raise IndexBuildError(
            f"data directory {str(indexes)!r} is not writable: {error.strerror or error}"
        ) from error
    return indexes


BUILD_WAITS_FOR_CHANGES_SECONDS = 60.0


@contextlib.contextmanager
def build_lock(indexes_dir: Path, kind: Kind = "build") -> Iterator[None]:
    """One build at a time per data directory, and no document change during it
    (`indexer.store.data_lock`); a build waits for the changes running to end. A first
    version built from a collection's first change holds it as a change (`kind`), so that
    the changes after it wait their turn instead of being refused as during a build.

    Raises:
        BuildBusyError: another build is running, or changes held on for a minute.
    """
    try:
        with hold_data_dir(indexes_dir, kind, BUILD_WAITS_FOR_CHANGES_SECONDS):
            yield
    except DataDirBusyError as error:
        raise BuildBusyError(str(error)) from error


@dataclass(frozen=True)
class BuildContext:
    """What every stage of one build reads: the database and data directory it writes to,
    the encoder and its chunk size, and how the caller follows the build."""

    settings: Settings
    engine: Engine
    encoder: Encoder
    indexes_dir: Path
    capacity: int  # tokens per chunk
    hooks: BuildHooks
    show_progress: bool
    encode_engine: EncodeEngine | None


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
    first_version: bool = False,
) -> BuildResult:
    """Build, and atomically publish, a new index version of `corpus` (or of `documents`,
    e.g. the stored documents of a version, described by `source_label`). `first_version`:
    only while the collection has published none (checked once the lock is held).

    Raises:
        BuildBusyError: another build holds the lock.
        AlreadyPublishedError: `first_version`, and the collection has a version.
        IndexBuildError: nothing to index, or a bad setting; nothing was published.
    """
    hooks = hooks or BuildHooks()
    indexes_dir = prepare_data_dir(settings.indexes_dir)
    capacity = chunk_capacity(settings, encoder)
    ctx = BuildContext(
        settings, engine, encoder, indexes_dir, capacity, hooks, show_progress, encode_engine
    )
    with build_lock(indexes_dir, "change" if first_version else "build"):
        if first_version and _has_active_version(engine, settings.collection):
            raise AlreadyPublishedError(f"the collection {settings.collection!r} has a version")
        recover_abandoned(
            engine, indexes_dir, keep=hooks.resume_version, collection=settings.collection
        )
        SplitPlan.remove_stale(indexes_dir)
        started = time.perf_counter()
        source = open_source(corpus, documents, fmt, source_label, settings)
        types = BuildFieldTypes.of_collection(engine, settings.collection)
        source = Source(types.checked(source.documents), source.fmt, source.label)
        plan = split_source(source, splitter, indexes_dir, settings, show_progress=show_progress)
        try:
            manifest, target = _encode_and_publish(ctx, source, plan, splitter, started, types)
        finally:
            plan.remove()
    _log_published(manifest)
    return BuildResult(
        version_id=target.version_id, path=target.final, manifest=manifest, skipped=plan.skipped
    )


def _encode_and_publish(
    ctx: BuildContext,
    source: Source,
    plan: SplitPlan,
    splitter: SentenceSplitter,
    started: float,
    types: BuildFieldTypes,
) -> tuple[Manifest, VersionTarget]:
    """Stages 2 to 5 of `build_index`, on the split `plan`: on the active version's export
    and with its vectors where they can be reused (`indexer.builder.reuse`)."""
    engine, encoder = ctx.engine, ctx.encoder
    previous = previous_version(ctx.settings, engine, encoder, ctx.capacity)
    backend = choose_backend(ctx, plan, source.label, previous)
    with reusing(engine, encoder, previous, ctx.settings.index.stored_rows) as reuse:
        hooks = ctx.hooks
        fingerprint = plan_fingerprint(plan, encoder, ctx.capacity, plan.block_documents)
        target = open_version(
            engine,
            ctx.indexes_dir,
            encoder.name,
            fingerprint,
            hooks.resume_version,
            collection=ctx.settings.collection,
        )
        if hooks.on_version is not None:
            hooks.on_version(target.version_id)
        published = False  # once live, a late interrupt must not mark the version failed
        try:
            n_blocks, encode_seconds = encode_version(
                ctx, target, plan, fingerprint, backend, reuse
            )
            levels = index_version(ctx, target, n_blocks)
            manifest = build_manifest(
                target.version_id,
                encoder=encoder,
                splitter=splitter,
                capacity=ctx.capacity,
                corpus=corpus_entry(source.label, source.fmt, len(plan), plan.skipped),
                levels=levels,
                build=build_entry(target.blocks_done, started, encode_seconds, levels, reuse),
                backend=backend,
            )
            publish(engine, ctx.indexes_dir, target, manifest, types.stored())
            published = True
        except BaseException as error:
            abandon(engine, target, error, keep=hooks.keep_on_failure, published=published)
            raise
        return manifest, target


def _has_active_version(engine: Engine, collection: str) -> bool:
    try:
        active_version(engine, collection)
    except NoActiveIndexError:
        return False
    return True


def chunk_capacity(settings: Settings, encoder: Encoder) -> int:
    """The tokens per chunk: `index.chunk_tokens`, or all that the encoder takes.

    Raises:
        IndexBuildError: `index.chunk_tokens` exceeds what the encoder takes.
    """
    capacity = settings.index.chunk_tokens or encoder.chunk_capacity
    if capacity > encoder.chunk_capacity:
        raise IndexBuildError(
            f"chunk_tokens={capacity} exceeds what the encoder takes ({encoder.chunk_capacity})"
        )
    return capacity


def choose_backend(
    ctx: BuildContext, docs: Sequence[Document], label: str, previous: VersionRow | None = None
) -> BackendEntry:
    """Put the encoder on the configured backend: the export of the `previous` version whose
    vectors the build reuses (`reuse.previous_backend`), else `prepare_backend`'s (an int8
    export is made, calibrated on `docs`, or taken from the cache); the manifest's `backend`
    record.

    Raises:
        IndexBuildError: the backend cannot run this encoder here, or its export failed.
    """
    try:
        if previous is not None:
            name = resolve_backend(ctx.settings, ctx.encoder)
            entry = previous_backend(ctx.settings, ctx.encoder, previous, name)
            if entry is not None:
                return entry
        return prepare_backend(
            ctx.settings, ctx.encoder, docs, capacity=ctx.capacity, corpus_label=label
        )
    except BackendError as error:
        raise IndexBuildError(str(error)) from error


def encode_version(
    ctx: BuildContext,
    target: VersionTarget,
    plan: SplitPlan,
    fingerprint: str,
    backend: BackendEntry,
    reuse: Reuse | None = None,
) -> tuple[int, float]:
    """Stage 2 (`encode_and_store`): create `<version>.tmp/` (kept when resuming), copy the
    backend's export into it (its folder goes in `backend["dir"]`), then encode and store
    the blocks after those committed before: `<version>.tmp/blocks/` and the SQL rows.
    Returns the number of blocks and the seconds spent encoding."""
    target.tmp.mkdir(exist_ok=bool(target.blocks_done))
    backend_dir = install_backend(ctx.encoder, target.tmp)
    if backend_dir is not None:
        backend["dir"] = backend_dir
    started = time.perf_counter()
    n_blocks = encode_and_store(
        ctx.engine,
        target.version_id,
        plan,
        ctx.encoder,
        folder=target.tmp,
        capacity=ctx.capacity,
        fingerprint=fingerprint,
        blocks_done=target.blocks_done,
        on_progress=ctx.hooks.on_progress,
        show_progress=ctx.show_progress,
        encode_engine=ctx.encode_engine,
        reuse=reuse,
        rows=ctx.settings.index.stored_rows,
    )
    return n_blocks, time.perf_counter() - started


def index_version(ctx: BuildContext, target: VersionTarget, n_blocks: int) -> dict[str, LevelEntry]:
    """Stage 3 (`write_vector_indexes`): from the `n_blocks` block files, write every
    level's FAISS index, float16 vectors and ids into `<version>.tmp/`, then remove
    `<version>.tmp/blocks/`. Returns the manifest's `levels`."""
    levels = write_vector_indexes(target.tmp, n_blocks, ctx.encoder.dim, ctx.settings)
    shutil.rmtree(target.tmp / "blocks")
    return levels


def _log_published(manifest: Manifest) -> None:
    build = manifest["build"]
    reused = build.get("reused")
    logger.info(
        "Published version %d: %s; encoded %d sentences in %.1f s (%.0f sentences/s)%s",
        manifest["version_id"],
        ", ".join(f"{lv}={n}" for lv, n in manifest["counts"].items()),
        reused["encoded_sentences"] if reused else manifest["levels"]["sentence"]["count"],
        build["encode_seconds"],
        build["sentences_per_second"],
        f"; reused {reused['documents']} documents ({reused['sentences']} sentences) of "
        f"version {reused['from_version']}"
        if reused
        else "",
    )
