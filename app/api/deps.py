"""Shared dependencies of the routes. A request's collection is found once
(`get_collection`: its name checked, its row read, its runtime started) and handed to the
routes as a `Collection` value (`CollectionDep`); the key checks read the same value."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from docsim.app.core.errors import (
    ApiKeyError,
    CollectionEmptyError,
    IndexNotReadyError,
    InvalidTextError,
)
from docsim.app.core.settings import ServiceSettings
from docsim.app.services.collections import Collection
from docsim.app.services.fairness import FairSlots, Ticket
from docsim.app.services.runtime import Runtime
from docsim.app.services.state import ServiceState
from docsim.indexer.api import DEFAULT_COLLECTION, check_collection_name
from docsim.models.inference.pacing import paced
from docsim.protocol.bodies import has_control_characters


def get_settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


def collection_name(request: Request) -> str:
    """The collection a request is for: the `{collection}` of the routes under
    `/collections/{collection}`, else `default`."""
    return request.path_params.get("collection", DEFAULT_COLLECTION)


def get_collection(request: Request) -> Collection:
    """The request's collection as SQL has it now, with its runtime; found once per request.

    Raises:
        CollectionNameError: not a collection name (422).
        CollectionNotFoundError: it does not exist (404).
        IndexNotReadyError: the service is starting.
    """
    held = getattr(request.state, "collection", None)
    if held is None:
        collections = getattr(request.app.state, "collections", None)
        if collections is None:
            raise IndexNotReadyError("the service is starting; retry in a moment")
        name = collection_name(request)
        check_collection_name(name)  # before any lookup: 422
        held = request.state.collection = collections.open(name)
    return held


def get_runtime(request: Request) -> Runtime:
    return get_collection(request).runtime


def get_state_or_empty(request: Request) -> Iterator[ServiceState | None]:
    """`get_state`, or None for a collection other than `default` that has published no
    version yet (a change then publishes its first)."""
    runtime = get_runtime(request)
    if (
        runtime.collection != DEFAULT_COLLECTION
        and runtime.failure is None
        and not runtime.has_active_version()
    ):
        yield None
        return
    with _pinned_state(request) as state:
        yield state


@contextlib.contextmanager
def _pinned_state(request: Request) -> Iterator[ServiceState]:
    """The served state, pinned for the block.

    Raises:
        IndexNotReadyError: nothing is loaded yet (503).
        CollectionEmptyError: a collection other than `default` has published nothing (409).
    """
    runtime = get_runtime(request)
    with runtime.pinned() as state:
        if state is None:
            if runtime.failure is not None:
                raise IndexNotReadyError(
                    f"the active index could not be loaded ({runtime.failure}); the service "
                    "keeps trying to load it from SQL: retry later"
                )
            name = runtime.collection
            if name == DEFAULT_COLLECTION:
                raise IndexNotReadyError("no index is loaded: run `docsim index` to build one")
            if runtime.has_active_version():  # published, not loaded here yet
                raise IndexNotReadyError(
                    f"the collection {name!r} is loading its index: retry in a moment"
                )
            raise CollectionEmptyError(
                f"the collection {name!r} has no documents yet: add some with POST "
                f"/collections/{name}/documents, or build its index with `docsim --collection "
                f"{name} index CORPUS` or POST /collections/{name}/jobs/reindex"
            )
        yield state


def get_state(request: Request) -> Iterator[ServiceState]:
    """The served state, taken once and held to the end of the request: everything the
    request reads (vectors, BM25, texts from SQL) belongs to its version and revision."""
    with _pinned_state(request) as state:
        yield state


def reject_nul_in_url(request: Request) -> None:
    """Path and query values with a control character (`%00`, `%0A`, `%1B`, ...) are a 422
    for every route, as ids and NULs in request bodies are (`docsim.protocol.bodies`)."""
    values = [*request.path_params.values(), *request.query_params.values()]
    if any(isinstance(v, str) and has_control_characters(v) for v in values):
        raise InvalidTextError(
            "URL parameters must not contain control characters (%00, %0A, %1B, ...)"
        )


SettingsDep = Annotated[ServiceSettings, Depends(get_settings)]
StateDep = Annotated[ServiceState, Depends(get_state)]


def get_engine(request: Request) -> Engine:
    engine = getattr(request.app.state, "engine", None)
    if engine is None:
        raise IndexNotReadyError("the service is starting; retry in a moment")
    return engine


def given_key(request: Request) -> str | None:
    """The API key the request carries: header `X-API-Key`, or a Bearer token."""
    given = request.headers.get("x-api-key")
    authorization = request.headers.get("authorization", "")
    if given is None and authorization.lower().startswith("bearer "):
        given = authorization[7:].strip()
    return given


def is_server_key(request: Request, key: str | None) -> bool:
    """Whether `key` is the server's own key (`DOCSIM_API__API_KEY`), which opens everything."""
    expected = request.app.state.settings.api.api_key
    return (
        key is not None
        and expected is not None
        and secrets.compare_digest(key.encode(), expected.get_secret_value().encode())
    )


def require_server_key(request: Request) -> None:
    """Creating and deleting collections needs the server's key, when it has one."""
    if request.app.state.settings.api.api_key is None:
        return
    key = given_key(request)
    if key is None:
        raise ApiKeyError("this endpoint needs the server's API key: send it as X-API-Key")
    if not is_server_key(request, key):
        raise ApiKeyError("the API key is not valid for this endpoint: it needs the server's")


def require_owner_key(request: Request) -> None:
    """Deleting a collection needs the server's key or the collection's write key; a
    collection with a write key needs one of them even on a server without a key of its own.
    A collection without keys on a server without a key is open."""
    row = get_collection(request).row
    if request.app.state.settings.api.api_key is None and row.write_key_sha256 is None:
        return
    key = given_key(request)
    if key is None:
        raise ApiKeyError(
            f"deleting the collection {row.name!r} needs its write key or the server's: send "
            "it as X-API-Key"
        )
    if not (is_server_key(request, key) or row.opens(key, write=True)):
        raise ApiKeyError(f"the API key is not valid for deleting the collection {row.name!r}")


def require_api_key(request: Request) -> None:
    """Changing a collection (documents, jobs) needs a key when the server or the collection
    has one: the server's, or the collection's write key. One collection's key opens
    nothing in another."""
    row = get_collection(request).row
    if request.app.state.settings.api.api_key is None and row.write_key_sha256 is None:
        return
    key = given_key(request)
    if key is None:
        raise ApiKeyError("this endpoint needs the API key: send it as X-API-Key")
    if not (is_server_key(request, key) or row.opens(key, write=True)):
        raise ApiKeyError(f"the API key is not valid for changing the collection {row.name!r}")


def require_jobs_key(request: Request) -> None:
    """Reading a collection's jobs needs what changing it needs (`require_api_key`), or its
    read key where it has one: the jobs are part of what that key opens."""
    try:
        require_api_key(request)
    except ApiKeyError:
        row = get_collection(request).row
        if row.read_key_sha256 is None or not row.opens(given_key(request), write=False):
            raise


def require_read_key(request: Request) -> None:
    """Reading a collection that has a read key needs it (or its write key, or the
    server's key); a collection without one is open to read."""
    row = get_collection(request).row
    if row.read_key_sha256 is None:
        return
    key = given_key(request)
    if key is None:
        raise ApiKeyError(f"the collection {row.name!r} needs its read key: send it as X-API-Key")
    if not (is_server_key(request, key) or row.opens(key, write=False)):
        raise ApiKeyError(f"the API key is not valid for reading the collection {row.name!r}")


EngineDep = Annotated[Engine, Depends(get_engine)]


def search_slot(request: Request) -> Iterator[Ticket]:
    """Hold one of the service's search slots for the request (`max_concurrent_searches`):
    scoring is CPU-bound, so more at once only share the cores, and each holds its own
    paragraph matrices in memory. Long searches yield theirs to short ones, and every one
    has a deadline (`app.services.fairness`): the route runs its work `paced_by` the ticket."""
    with request.app.state.search_slots.slot() as ticket:
        yield ticket


@contextlib.contextmanager
def paced_by(request: Request, ticket: Ticket) -> Iterator[None]:
    """The encoders this thread runs in the block pace themselves by `ticket`'s slot."""
    slots: FairSlots = request.app.state.search_slots
    with paced(lambda rows: slots.pace(ticket, rows)):
        yield


@contextlib.contextmanager
def write_paced(request: Request) -> Iterator[None]:
    """A write's work in the block (reading its files, encoding) answers to the write deadline
    (`write_deadline_seconds`) and, once it has worked for `fair_share_seconds`, yields to
    young searches before each batch (`FairSlots.yield_to_young`): it holds no search slot."""
    slots: FairSlots = request.app.state.search_slots
    seconds = request.app.state.settings.api.write_deadline_seconds
    deadline = time.monotonic() + seconds
    what = (
        f"the write ran past its deadline of {seconds:g} s (DOCSIM_API__WRITE_DEADLINE_SECONDS) "
        "and nothing changed; retry when the server is less busy, or send fewer documents"
    )
    working_since: list[float] = []  # its first batch's time

    def before_batch(_rows: int) -> None:
        if not working_since:
            working_since.append(time.monotonic())
        slots.yield_to_young(deadline, what, working_since[0])

    with paced(before_batch):
        yield


SearchSlot = Annotated[Ticket, Depends(search_slot)]
ApiKey = Depends(require_api_key)
ReadKey = Depends(require_read_key)
JobsKey = Depends(require_jobs_key)
ServerKey = Depends(require_server_key)
OwnerKey = Depends(require_owner_key)
CollectionDep = Annotated[Collection, Depends(get_collection)]
StateOrEmptyDep = Annotated[ServiceState | None, Depends(get_state_or_empty)]
