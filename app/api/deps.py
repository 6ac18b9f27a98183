"""Shared dependencies of the routes."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from app.core.config import ServiceSettings
from app.core.errors import ApiKeyError, IndexNotReadyError, InvalidTextError
from app.schemas.common import has_control_characters
from app.services.state import ServiceState


def get_settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


def get_state(request: Request) -> Iterator[ServiceState]:
    """The served state, taken once and held to the end of the request: everything the
    request reads (vectors, BM25, texts from SQL) belongs to its version and revision."""
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is None:
        raise IndexNotReadyError("the service is starting; retry in a moment")
    with runtime.pinned() as state:
        if state is None:
            if runtime.failure is not None:
                raise IndexNotReadyError(
                    f"the active index could not be loaded ({runtime.failure}); the service "
                    "keeps trying to load it from SQL: retry later"
                )
            raise IndexNotReadyError(
                "no index is loaded: run `docsim index` to build one, then restart"
            )
        yield state


def reject_nul_in_url(request: Request) -> None:
    """Path and query values with a control character (`%00`, `%0A`, `%1B`, ...) are a 422
    for every route, as ids and NULs in request bodies are (`app.schemas.common`)."""
    values = [*request.path_params.values(), *request.query_params.values()]
    if any(isinstance(v, str) and has_control_characters(v) for v in values):
        raise InvalidTextError(
            "URL parameters must not contain control characters (%00, %0A, %1B, ...)"
        )


SettingsDep = Annotated[ServiceSettings, Depends(get_settings)]
StateDep = Annotated[ServiceState, Depends(get_state)]


def get_engine(request: Request) -> Engine:
    return request.app.state.runtime.engine


def require_api_key(request: Request) -> None:
    """Mutating endpoints need the configured key (header `X-API-Key` or a Bearer token)."""
    expected = request.app.state.settings.api.api_key
    if expected is None:
        return
    given = request.headers.get("x-api-key")
    authorization = request.headers.get("authorization", "")
    if given is None and authorization.lower().startswith("bearer "):
        given = authorization[7:].strip()
    if given is None:
        raise ApiKeyError("this endpoint needs the API key: send it as X-API-Key")
    if not secrets.compare_digest(given.encode(), expected.get_secret_value().encode()):
        raise ApiKeyError("the API key is not valid")


EngineDep = Annotated[Engine, Depends(get_engine)]


def search_slot(request: Request) -> Iterator[None]:
    """Hold one of the service's search slots for the request (`max_concurrent_searches`):
    scoring is CPU-bound, so more at once only share the cores, and each holds its own
    paragraph matrices in memory."""
    with request.app.state.search_slots:
        yield


SearchSlot = Annotated[None, Depends(search_slot)]
ApiKey = Depends(require_api_key)
