"""POST/GET/DELETE /collections, and every collection route under `/collections/{name}`."""

from __future__ import annotations

import copy
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Path, Request

from docsim.app.api.bodies import json_request_body, strict_json
from docsim.app.api.deps import (
    CollectionDep,
    OwnerKey,
    ReadKey,
    ServerKey,
    SettingsDep,
    given_key,
    is_server_key,
)
from docsim.app.api.openapi import errors
from docsim.app.schemas.collections import CollectionRequest
from docsim.app.services.collections import Collection, Collections, requested_groups
from docsim.indexer.api import COLLECTION_NAME_PATTERN
from docsim.protocol.answers import CollectionDeleted, CollectionList, CollectionOut

router = APIRouter(prefix="/collections", tags=["collections"])
PREFIX = "/collections/{collection}"
SCOPED = "_in_collection"  # the operation ids of the routes under PREFIX end with it

CollectionName = Annotated[
    str, Path(pattern=COLLECTION_NAME_PATTERN, description="The collection's name.")
]


def collection_path(collection: CollectionName) -> str:
    """Declares (and checks) the `{collection}` of the routes under `/collections/{name}`."""
    return collection


def collections_of(request: Request) -> Collections:
    return request.app.state.collections


CollectionsDep = Annotated[Collections, Depends(collections_of)]


def _out(collection: Collection) -> CollectionOut:
    row, state = collection.row, collection.runtime.state
    return CollectionOut(
        name=row.name,
        settings=row.settings,
        created_at=row.created_at.isoformat(),
        index_version=state.version_id if state is not None else None,
        documents=state.searcher.index.n_documents if state is not None else None,
        keys={"write": row.write_key_sha256 is not None, "read": row.read_key_sha256 is not None},
        field_types=row.field_types or {},
    )


@router.post(
    "",
    status_code=201,
    response_model=CollectionOut,
    dependencies=[ServerKey],
    openapi_extra=json_request_body(CollectionRequest),
    responses=errors(403, 409),
)
def create(
    request: Annotated[CollectionRequest, Depends(strict_json(CollectionRequest))],
    collections: CollectionsDep,
    settings: SettingsDep,
) -> CollectionOut:
    """Create a collection, with an encoder, backend and search settings of its own when
    given (the server's otherwise), optional keys and declared metadata field types. It is
    empty: its first `POST /collections/{name}/documents` publishes its first version, as
    does a reindex job (`POST /collections/{name}/jobs/reindex`) or `docsim --collection NAME
    index`. 409 when the name is taken."""
    groups = requested_groups(request, settings)
    secret = lambda key: key.get_secret_value() if key is not None else None  # noqa: E731
    created = collections.create(
        request.name,
        groups,
        write_key=secret(request.write_key),
        read_key=secret(request.read_key),
        field_types=request.field_types,
    )
    return _out(created)


@router.get("", response_model=CollectionList)
def listing(collections: CollectionsDep, http: Request) -> CollectionList:
    """The collections the caller may read, by name: those without a read key, and those
    whose key (or the server's) the request carries."""
    key = given_key(http)
    server = is_server_key(http, key)
    readable = [
        row
        for row in collections.rows()
        if row.read_key_sha256 is None or server or row.opens(key, write=False)
    ]
    return CollectionList(collections=[_out(collections.open(row.name)) for row in readable])


@router.get("/{collection}", response_model=CollectionOut, dependencies=[ReadKey])
def show(collection: CollectionName, found: CollectionDep) -> CollectionOut:
    """One collection: its settings, the version served and its size, which keys it has."""
    return _out(found)


@router.delete(
    "/{collection}",
    response_model=CollectionDeleted,
    dependencies=[OwnerKey],
    responses=errors(409),
)
def delete(
    collection: CollectionName, found: CollectionDep, collections: CollectionsDep, http: Request
) -> CollectionDeleted:
    """Delete a collection with its versions, documents and jobs (409 for `default`, and
    while a job of it runs), and its series on /metrics. It needs the server's key or the
    collection's write key; a collection with keys is never deleted anonymously, even on a
    server without a key."""
    versions = collections.delete(found)
    http.app.state.metrics.forget_collection(http, collection)
    return CollectionDeleted(name=collection, versions=versions)


def include_scoped(app: FastAPI, routers: list[APIRouter], read_key: Any) -> None:
    """Mount `routers` under `/collections/{collection}` too, with FastAPI's own prefix: their
    routes there read and write that collection (and need its read key, when it has one).
    `name_scoped_operations` gives their OpenAPI operations names of their own."""
    for router_ in routers:
        app.include_router(
            router_, prefix=PREFIX, dependencies=[Depends(collection_path), read_key]
        )
    name_scoped_operations(app)


def name_scoped_operations(app: FastAPI) -> None:
    """Name each OpenAPI operation under `PREFIX` that a route at the root also serves after
    that one, with `SCOPED` (`similar_similar_post_in_collection`), and point its links at the
    scoped operations, in the same collection."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = generate()
        paths = spec.get("paths", {})
        for path, operations in paths.items():
            root = paths.get(path.removeprefix(PREFIX)) if path.startswith(f"{PREFIX}/") else None
            if root is None:  # a route of its own (this router's), not a scoped one
                continue
            for method, operation in operations.items():
                operation["operationId"] = f"{root[method]['operationId']}{SCOPED}"
                operation["responses"] = _scoped_links(operation.get("responses", {}))
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def _scoped_links(responses: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """`responses` with each OpenAPI link pointing at the scoped route, in the same
    collection."""
    responses = copy.deepcopy(responses)
    for response in responses.values():
        for link in response.get("links", {}).values():
            link["operationId"] = f"{link['operationId']}{SCOPED}"
            link.setdefault("parameters", {})["collection"] = "$request.path.collection"
    return responses
