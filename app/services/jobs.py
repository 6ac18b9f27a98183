"""Reindex jobs over HTTP: check the request (paths under the allowed roots), queue it, and
show jobs with their progress."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from app.core.config import ServiceSettings
from app.core.errors import PathNotAllowedError
from app.schemas.jobs import ReindexRequest
from indexer.jobs.queue import JobRow, create_job
from indexer.jobs.worker import CURRENT, ReindexParameters
from indexer.text.corpus import SAMPLE_CORPUS


def allowed_roots(settings: ServiceSettings) -> list[Path]:
    return [SAMPLE_CORPUS.resolve(), *(Path(r).resolve() for r in settings.jobs.allowed_roots)]


def checked_source(source: str, settings: ServiceSettings) -> str:
    """`current`, or the resolved path of a corpus under an allowed root.

    Raises:
        PathNotAllowedError: outside every allowed root (after resolving `..` and links).
        FileNotFoundError: inside a root but missing.
    """
    if source == CURRENT:
        return source
    if "\x00" in source:
        raise PathNotAllowedError("source path contains a NUL byte")
    path = Path(source)
    if not path.is_absolute():
        raise PathNotAllowedError(f"source path {source!r} must be absolute")
    resolved = path.resolve()  # follows symbolic links and removes `..`
    roots = allowed_roots(settings)
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise PathNotAllowedError(
            f"source path {source!r} is outside the allowed roots "
            f"({', '.join(str(r) for r in roots)}); set DOCSIM_JOBS__ALLOWED_ROOTS"
        )
    if not resolved.exists():
        raise FileNotFoundError(f"source path {source!r} does not exist")
    return str(resolved)


def submit_reindex(engine: Engine, request: ReindexRequest, settings: ServiceSettings) -> JobRow:
    params = ReindexParameters(
        source=checked_source(request.source, settings),
        encoder=request.encoder,
        format=request.format.value,
        chunk_tokens=request.chunk_tokens,
        block_documents=request.block_documents,
        engine=request.engine.value,
    )
    return create_job(engine, "reindex", vars(params))
