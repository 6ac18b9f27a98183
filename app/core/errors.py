"""The service's own errors, and `STATUS`: the one table that gives every error docsim raises for
a caller (a `DocsimError` of any layer) its HTTP status; those in `SERVER_FAULTS` are left a
500. `tests/test_layers.py` checks that each error is in exactly one of them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, routing
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException
from starlette.routing import Match

import docsim.indexer.errors as indexer_errors
import docsim.models.errors as model_errors
import docsim.search.errors as search_errors
from docsim.indexer.errors import DataDirBusyError
from docsim.models.errors import DocsimError


class IndexNotReadyError(DocsimError, RuntimeError):
    """No index version is loaded."""


class CollectionEmptyError(DocsimError, RuntimeError):
    """A collection that has never published a version: nothing to search or change yet."""


class DocumentTooLargeError(DocsimError, ValueError):
    """A posted document exceeds the configured limits."""


class LimitExceededError(DocsimError, ValueError):
    """A request that asks for more than a limit allows: a count (filter clauses, `top_k`,
    examples) over its setting, named in the message (422)."""


class BodyTooLargeError(DocsimError, ValueError):
    """A request body over its byte limit, refused before it is read whole (413)."""


class UnreadableFileError(DocsimError, ValueError):
    """An uploaded file docsim cannot read (encrypted, scanned, corrupt, of no known format)."""


class MissingPathError(DocsimError, ValueError):
    """A path named in a request (a corpus, an encoder) that does not exist on the server."""


class PathNotAllowedError(DocsimError, PermissionError):
    """A corpus path outside the allowed roots."""


class ApiKeyError(DocsimError, PermissionError):
    """A mutating request without the configured API key."""


class InvalidTextError(DocsimError, ValueError):
    """Text the service cannot take (a NUL character)."""


class InvalidSettingError(DocsimError, ValueError):
    """A collection's setting that does not exist or is not valid."""


class SearchDeadlineError(DocsimError, RuntimeError):
    """A search or explanation past its deadline (503 and Retry-After)."""


class SourceNotFoundError(DocsimError, LookupError):
    """An /explain source that is neither a live query_id nor an indexed document."""


RETRY_AFTER_SECONDS = 5  # what a 503 (nothing served yet or now) asks clients to wait

# Every error for a caller, and its status. A class not here gets the status of its nearest
# base that is (Starlette's handlers follow the class's MRO).
STATUS: dict[type[Exception], int] = {
    # indexer
    indexer_errors.EmptyDocumentError: 422,
    indexer_errors.MetadataTypeError: 422,
    indexer_errors.CollectionNameError: 422,
    indexer_errors.CollectionNotFoundError: 404,
    indexer_errors.CollectionConflictError: 409,
    indexer_errors.BuildRunningError: 409,
    indexer_errors.ChangesQueuedError: 429,
    indexer_errors.CollectionDeletingError: 404,
    indexer_errors.RowsPurgedError: 503,
    indexer_errors.NoActiveIndexError: 503,
    indexer_errors.DocumentNotFoundError: 404,
    indexer_errors.BuildBusyError: 409,
    indexer_errors.JobNotFoundError: 404,
    indexer_errors.JobStateError: 409,
    indexer_errors.IndexChangedError: 409,
    # search
    search_errors.QueryError: 422,
    search_errors.FilterError: 422,
    search_errors.PairTooLargeError: 413,
    search_errors.ShardUnavailableError: 503,
    # the service's own
    ApiKeyError: 401,
    PathNotAllowedError: 403,
    MissingPathError: 422,
    DocumentTooLargeError: 413,
    BodyTooLargeError: 413,
    LimitExceededError: 422,
    SourceNotFoundError: 404,
    UnreadableFileError: 422,
    InvalidSettingError: 422,
    CollectionEmptyError: 409,
    InvalidTextError: 422,
    IndexNotReadyError: 503,
    SearchDeadlineError: 503,
    # a file of the served version gone from disk: the server's fault, never the client's
    FileNotFoundError: 503,
    # the driver's own error when the database is down or the connection dropped; the pool
    # reconnects (pre-ping) once it is back, so the service recovers by itself
    OperationalError: 503,
}

# The errors that are the server's (its configuration, its files, its runtime): a 500.
SERVER_FAULTS: frozenset[type[DocsimError]] = frozenset({
    model_errors.EncoderNotFoundError,
    model_errors.BackendUnavailableError,
    model_errors.TrainingError,
    indexer_errors.CorpusError,
    indexer_errors.DatabaseError,
    indexer_errors.DataDirBusyError,
    indexer_errors.CorruptFileError,
    indexer_errors.BackendError,
    indexer_errors.EngineError,
    indexer_errors.RaySessionError,
    indexer_errors.IndexBuildError,
    indexer_errors.AlreadyPublishedError,
    search_errors.IndexMismatchError,
})  # fmt: skip


def json_safe(value: Any) -> Any:
    """`value` with what JSON cannot carry made printable: NaN and infinities as their names,
    strings with lone surrogates (from `\\ud800` escapes) with those escaped, bytes decoded."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [json_safe(v) for v in value]
    return value


async def _invalid_request(_request: Request, error: RequestValidationError) -> JSONResponse:
    """A 422 listing what is wrong, as FastAPI's own, that cannot fail on the input it echoes."""
    detail = json_safe(jsonable_encoder(json_safe(error.errors())))
    return JSONResponse(status_code=422, content={"detail": detail})


def effective_routes(app: FastAPI) -> list[Any]:
    """Every route of `app`, those of its included routers one by one: a recent FastAPI
    keeps an included router whole in `app.routes` (an older one copied its routes there)."""
    iterate = getattr(routing, "iter_route_contexts", None)
    return list(iterate(app.routes)) if iterate is not None else list(app.routes)


async def _http_error(request: Request, error: HTTPException) -> Response:
    """FastAPI's answer to an HTTP error, with a 405's `Allow` naming every method of the
    path's resource: Starlette names only those of the first route that matched it, where a
    path such as `/documents/{id}` has one route for GET and one for DELETE. Of the routes
    whose templates match the path, those with the fewest parameters name the resource
    (`/jobs/reindex` is not the job `reindex` of `/jobs/{job_id}`)."""
    if error.status_code == 405:
        matching = [
            route
            for route in effective_routes(request.app)
            if route.matches(request.scope)[0] is not Match.NONE
        ]
        fewest = min((route.path_format.count("{") for route in matching), default=0)
        allowed = {
            method
            for route in matching
            if route.path_format.count("{") == fewest
            for method in getattr(route, "methods", None) or ()
        }
        headers = {**(error.headers or {}), "Allow": ", ".join(sorted(allowed))}
        error = HTTPException(405, error.detail, headers)
    return await http_exception_handler(request, error)


def missing_file_detail(error: FileNotFoundError) -> str:
    """What a client is told of a server file gone missing: its name, never its path."""
    name = Path(str(error.filename)).name if error.filename else "a file"
    return f"{name} of the served index is missing on the server; reindex, or retry later"


# What a request on a collection deleted while it ran meets (its rows purged, its files gone,
# its folder locked by the deletion): the client is told the collection is gone instead.
_GONE_IF_DELETED = {409, 429, 503}


def _deleted_collection(request: Request) -> str | None:
    """The name of the request's collection when it has been deleted since the request
    found it (`app.api.deps.get_collection`), else None. Reads SQL."""
    held = getattr(request.state, "collection", None)
    collections = getattr(request.app.state, "collections", None)
    if held is None or collections is None:
        return None
    name: str = held.name
    try:
        return None if collections.exists(name) else name
    except OperationalError:
        return None


def register_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    for error_type, status in STATUS.items():

        async def handler(request: Request, error: Exception, status: int = status) -> JSONResponse:
            detail = error.args[0] if error.args else type(error).__name__
            if status in _GONE_IF_DELETED and (gone := _deleted_collection(request)):
                return JSONResponse(
                    status_code=404, content={"detail": f"collection {gone!r} deleted"}
                )
            if isinstance(error, OperationalError):  # its text names hosts and SQL: not shown
                detail = "the database is unavailable; the service reconnects by itself: retry"
            elif isinstance(error, FileNotFoundError):  # its text is the server's path
                detail = missing_file_detail(error)
            headers = None
            if isinstance(error, DataDirBusyError):
                headers = {"Retry-After": str(max(1, round(error.retry_after)))}
            elif status == 503:
                headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
            return JSONResponse(status_code=status, content={"detail": detail}, headers=headers)

        app.add_exception_handler(error_type, handler)
