"""Reindex jobs over HTTP: check the request (paths under the allowed roots), queue it, and
show jobs with their progress."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from docsim.app.core.errors import InvalidSettingError, MissingPathError, PathNotAllowedError
from docsim.app.core.settings import ServiceSettings
from docsim.app.schemas.jobs import ReindexRequest
from docsim.indexer.api import CURRENT, SAMPLE_CORPUS, JobRow, ReindexParameters, create_job
from docsim.models.encoders.registry import BUILTIN_ENCODERS


def allowed_roots(settings: ServiceSettings) -> list[Path]:
    return [SAMPLE_CORPUS.resolve(), *(Path(r).resolve() for r in settings.jobs.allowed_roots)]


def confined(value: str, what: str, settings: ServiceSettings) -> Path:
    """The resolved path `value`, which must lie under an allowed root.

    Raises:
        PathNotAllowedError: relative, or outside every allowed root (after resolving `..`
            and symbolic links).
        MissingPathError: inside a root but missing.
    """
    if "\x00" in value:
        raise PathNotAllowedError(f"the {what} path contains a NUL byte")
    path = Path(value)
    if not path.is_absolute():
        raise PathNotAllowedError(f"the {what} path {value!r} must be absolute")
    resolved = path.resolve()  # follows symbolic links and removes `..`
    if not any(
        resolved == root or resolved.is_relative_to(root) for root in allowed_roots(settings)
    ):
        raise PathNotAllowedError(
            f"the {what} path {value!r} is outside the roots this server allows jobs to read "
            "(DOCSIM_JOBS__ALLOWED_ROOTS)"
        )
    if not resolved.exists():
        raise MissingPathError(f"the {what} path {value!r} does not exist")
    return resolved


def checked_source(source: str, settings: ServiceSettings) -> str:
    """`current`, or the resolved path of a corpus under an allowed root (`confined`)."""
    if source == CURRENT:
        return source
    return str(confined(source, "source", settings))


def checked_encoder(encoder: str | None, settings: ServiceSettings) -> str | None:
    """None (the default), a built-in encoder's name, the server's configured encoder, or
    the resolved path of a model directory under an allowed root (`confined`): a client
    never makes the worker open a folder of the server's own choosing."""
    if encoder is None or encoder in BUILTIN_ENCODERS or encoder == settings.encoder.name:
        return encoder
    if not any(mark in encoder for mark in ("/", "\\", ".")):  # a name, not a path
        known = ", ".join(sorted({*BUILTIN_ENCODERS, settings.encoder.name}))
        raise InvalidSettingError(
            f"unknown encoder {encoder!r}: give a built-in encoder's name ({known}) or the "
            "absolute path of a model directory under DOCSIM_JOBS__ALLOWED_ROOTS"
        )
    resolved = confined(encoder, "encoder", settings)
    if not resolved.is_dir():
        raise MissingPathError(f"the encoder path {encoder!r} is not a model directory")
    return str(resolved)


def submit_reindex(engine: Engine, request: ReindexRequest, settings: ServiceSettings) -> JobRow:
    """Queue the job for the collection whose settings are `settings`."""
    params = ReindexParameters(
        source=checked_source(request.source, settings),
        encoder=checked_encoder(request.encoder, settings),
        format=request.format.value,
        chunk_tokens=request.chunk_tokens,
        block_documents=request.block_documents,
        engine=request.engine.value,
        reencode=request.reencode,
    )
    return create_job(engine, "reindex", vars(params), settings.collection)
