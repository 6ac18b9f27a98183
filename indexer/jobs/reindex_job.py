"""What a reindex job builds: its parameters (`ReindexParameters`, stored as the job's JSON),
the settings and encoder they select, the version an earlier attempt left to resume, and the
build of its source (a corpus, or the active version's stored documents)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from docsim.indexer.builder.engines import EncodeEngine
from docsim.indexer.builder.pipeline import BuildHooks, BuildResult, build_index
from docsim.indexer.choices import CURRENT, DEFAULT_COLLECTION, CorpusFormat
from docsim.indexer.jobs.queue import JobRow
from docsim.indexer.settings import Settings, collection_settings
from docsim.indexer.store.collections import get_collection
from docsim.indexer.store.reader import stored_documents
from docsim.indexer.store.tables import VersionStatus
from docsim.indexer.store.versions import active_version, version_row
from docsim.indexer.text.sentences import load_splitter
from docsim.models.encoders.encoder import Encoder


@dataclass(frozen=True)
class ReindexParameters:
    """What a reindex job rebuilds: a corpus folder or file, or `current` (the stored
    documents of the active version), with an encoder and index options."""

    source: str
    encoder: str | None = None
    format: str = "auto"
    chunk_tokens: int | None = None
    block_documents: int | None = None
    engine: str = "local"  # where the encode stage runs: `local` or `ray`
    reencode: bool = False  # encode every document, reusing no vectors of the active version

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ReindexParameters:
        return cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__})


def job_settings(job: JobRow, settings: Settings, engine: Engine) -> Settings:
    """`settings` as the job's collection sees them (`collection_settings`). Reads SQL.

    Raises:
        CollectionNotFoundError: the collection was deleted.
    """
    return collection_settings(settings, get_collection(engine, job.collection))


def reindex_settings(settings: Settings, params: ReindexParameters) -> Settings:
    """`settings` with the job's index options (`chunk_tokens`, `block_documents`) where
    it gives them, and no reuse of vectors when it asks to `reencode`."""
    index_settings = settings.index.model_copy(
        update={
            k: v
            for k, v in (
                ("chunk_tokens", params.chunk_tokens),
                ("block_documents", params.block_documents),
            )
            if v is not None
        }
        | ({"reuse_vectors": False} if params.reencode else {})
    )
    return settings.model_copy(update={"index": index_settings})


def resumable_version(engine: Engine, job: JobRow) -> int | None:
    """The version an earlier attempt of `job` suspended (or left `building`), to resume;
    None to start a new build. Reads `index_versions`."""
    if job.version_id is None:
        return None
    row = version_row(engine, job.version_id)
    if row is not None and row.status in (VersionStatus.suspended, VersionStatus.building):
        return job.version_id
    return None


def reindex_encoder_name(
    engine: Engine, params: ReindexParameters, collection: str = DEFAULT_COLLECTION
) -> str | None:
    """The encoder the job names; for `current` naming none, the active version's own (as
    its manifest records it); else None (the collection's configured one)."""
    if params.encoder is None and params.source == CURRENT:
        recorded = active_version(engine, collection).published_manifest()["encoder"]
        return recorded.get("source") or recorded["name"]
    return params.encoder


def build_source(
    params: ReindexParameters,
    settings: Settings,
    engine: Engine,
    encoder: Encoder,
    *,
    hooks: BuildHooks,
    show_progress: bool,
    encode_engine: EncodeEngine,
) -> BuildResult:
    """Build the job's source: the corpus at `params.source`, or for `current` the stored
    documents of the active version (read when the build starts)."""
    if params.source == CURRENT:
        current = active_version(engine, settings.collection)
        return build_index(
            None,
            settings=settings,
            engine=engine,
            encoder=encoder,
            splitter=load_splitter(settings.punkt_params),
            documents=stored_documents(engine, current.version_id),
            source_label=f"current (stored documents of version {current.version_id})",
            hooks=hooks,
            show_progress=show_progress,
            encode_engine=encode_engine,
        )
    return build_index(
        Path(params.source),
        settings=settings,
        engine=engine,
        encoder=encoder,
        splitter=load_splitter(settings.punkt_params),
        fmt=CorpusFormat(params.format),
        hooks=hooks,
        show_progress=show_progress,
        encode_engine=encode_engine,
    )
