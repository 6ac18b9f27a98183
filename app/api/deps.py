"""Shared dependencies of the routes."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from app.core.config import ServiceSettings
from app.core.errors import ApiKeyError, IndexNotReadyError, InvalidTextError
from app.services.state import ServiceState


def get_settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


def get_state(request: Request) -> ServiceState:
    state = getattr(request.app.state, "service", None)
    if state is None:
        runtime = getattr(request.app.state, "runtime", None)
        failure = runtime.failure if runtime is not None else None
        state = request.app.state.service  # a load may have finished meanwhile
        if state is not None:
            return state
        if failure is not None:
            raise IndexNotReadyError(
                f"the active index could not be loaded ({failure}); the service keeps trying "
                "to load it from SQL: retry later"
            )
        raise IndexNotReadyError(
            "no index is loaded: run `docsim index` to build one, then restart"
        )
    return state


def reject_nul_in_url(request: Request) -> None:
    """Path and query values with a NUL character (`%00`) are a 422 for every route, as in
    request bodies (`app.schemas.RequestModel`)."""
    values = [*request.path_params.values(), *request.query_params.values()]
    if any(isinstance(v, str) and "\x00" in v for v in values):
        raise InvalidTextError("URL parameters must not contain NUL characters (%00)")


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
