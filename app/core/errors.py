"""Domain errors raised inside docsim, mapped to HTTP status codes in one place."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from indexer.builder.pipeline import BuildBusyError
from indexer.jobs.queue import JobNotFoundError, JobStateError
from indexer.jobs.updates import IndexChangedError
from indexer.search.explain import PairTooLargeError
from indexer.search.shards import ShardUnavailableError
from indexer.search.types import DocumentNotFoundError, QueryError
from indexer.store.versions import NoActiveIndexError
from indexer.text.split import EmptyDocumentError


class IndexNotReadyError(RuntimeError):
    """No index version is loaded."""


class DocumentTooLargeError(ValueError):
    """A posted document exceeds the configured limits."""


class UnreadableFileError(ValueError):
    """An uploaded file docsim cannot read (encrypted, scanned, corrupt, of no known format)."""


class PathNotAllowedError(PermissionError):
    """A corpus path outside the allowed roots."""


class ApiKeyError(PermissionError):
    """A mutating request without the configured API key."""


class InvalidTextError(ValueError):
    """Text the service cannot take (a NUL character)."""


class SourceNotFoundError(LookupError):
    """An /explain source that is neither a live query_id nor an indexed document."""


RETRY_AFTER_SECONDS = 5  # what a 503 (nothing served yet or now) asks clients to wait

STATUS = {
    ApiKeyError: 401,
    PathNotAllowedError: 403,
    FileNotFoundError: 422,
    JobNotFoundError: 404,
    JobStateError: 409,
    BuildBusyError: 409,
    IndexChangedError: 409,
    DocumentNotFoundError: 404,
    DocumentTooLargeError: 413,
    PairTooLargeError: 413,
    SourceNotFoundError: 404,
    EmptyDocumentError: 422,
    UnreadableFileError: 422,
    QueryError: 422,
    InvalidTextError: 422,
    IndexNotReadyError: 503,
    ShardUnavailableError: 503,
    NoActiveIndexError: 503,
}


def register_error_handlers(app: FastAPI) -> None:
    for error_type, status in STATUS.items():

        async def handler(
            _request: Request, error: Exception, status: int = status
        ) -> JSONResponse:
            detail = error.args[0] if error.args else type(error).__name__
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
            return JSONResponse(status_code=status, content={"detail": detail}, headers=headers)

        app.add_exception_handler(error_type, handler)
