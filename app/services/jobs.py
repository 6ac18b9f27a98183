"""Reindex jobs over HTTP: check the request (paths under the allowed roots), queue it, and
show jobs with their progress."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from app.api.schemas import JobOut, ReindexRequest
from app.core.config import ServiceSettings
from app.core.errors import PathNotAllowedError
from indexer.corpus import SAMPLE_CORPUS
from indexer.jobs import JobRow, create_job
from indexer.worker import CURRENT, ReindexParameters


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


def job_out(job: JobRow, served_version: int | None) -> JobOut:
    """The job as the API shows it; `served_version` is the version this process serves."""

    def iso(moment):  # noqa: ANN001, ANN202 - datetime or None
        return moment.isoformat() if moment is not None else None

    return JobOut(
        job_id=job.job_id,
        kind=job.kind,
        parameters=job.parameters,
        status=job.status,
        progress={
            "done": job.done,
            "total": job.total,
            "unit": job.unit,
            "rate": job.rate,
            "eta_seconds": job.eta_seconds,
            "message": job.message,
        },
        error=job.error,
        cancel_requested=job.cancel_requested,
        worker=job.worker,
        attempts=job.attempts,
        index_version=job.published_version,
        build_version=job.version_id,
        served=job.published_version is not None and job.published_version == served_version,
        created_at=job.created_at.isoformat(),
        started_at=iso(job.started_at),
        heartbeat_at=iso(job.heartbeat_at),
        finished_at=iso(job.finished_at),
    )
