"""The OpenAPI description's refusals: what each operation may answer besides its success, in
one shape (`ErrorAnswer`; a 422's `InvalidAnswer`), so that the description and the answers
agree.

A route declares the refusals of its own work with `responses=errors(...)`. Those its
dependencies give (a key, a collection, the served index, a search slot), those of a request
body (413, 422; 400 for a form that is not multipart) and the 422 of a control character in
the URL (every route) are added here to each operation, so that a route mounted again under
`/collections/{collection}` (with that collection's key) documents what it answers there.
Every path and query value that has no pattern of its own gets one without control
characters, which the service refuses (`app.api.deps.reject_nul_in_url`), and the bounds that
settings give a request body (`max_top_k`, the encoders it may name, ...) are written into
its schema, as the request models say the rest (`docsim.protocol.bodies`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic.json_schema import models_json_schema

from docsim.app.api.deps import (
    get_collection,
    get_engine,
    get_runtime,
    get_state,
    get_state_or_empty,
    reject_nul_in_url,
    require_api_key,
    require_jobs_key,
    require_owner_key,
    require_read_key,
    require_server_key,
    search_slot,
)
from docsim.app.core.errors import effective_routes
from docsim.app.core.settings import ServiceSettings
from docsim.models.encoders.registry import BUILTIN_ENCODERS
from docsim.protocol.answers import ErrorAnswer, InvalidAnswer
from docsim.protocol.bodies import PRINTABLE
from docsim.search.api import SearchSettings

WHY: dict[int, str] = {  # short: the reference page lists them on every route
    400: "Not a `multipart/form-data` body",
    401: "No key (`X-API-Key` or Bearer), or not one that opens this",
    403: "A path not absolute, or outside `DOCSIM_JOBS__ALLOWED_ROOTS`",
    404: "No such collection (or deleted meanwhile), document, job or query",
    409: "Not now: no documents yet, a name taken, a job running or finished",
    413: "Over a size limit, which the message names",
    422: "Not valid: the fields' problems, or one message for a rule of the service",
    429: "Changes queued behind others: retry after `Retry-After`",
    503: "Not serving now (starting, loading, database down, past the deadline): retry "
    "after `Retry-After`",
}
RETRY_AFTER = {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}
REF = "#/components/schemas/{model}"

_COLLECTION = (404, 422, 503)  # `get_collection`: no such (or a deleted) one, a bad name, starting
_KEY = (401, *_COLLECTION)  # the keys of a collection are read from its row
# the refusals each dependency gives, by its function
RAISED_BY: dict[Callable[..., Any], tuple[int, ...]] = {
    reject_nul_in_url: (422,),
    get_collection: _COLLECTION,
    get_runtime: _COLLECTION,
    get_state: (409, *_COLLECTION),
    get_state_or_empty: (409, *_COLLECTION),
    get_engine: (503,),
    search_slot: (503,),
    require_server_key: (401,),
    require_api_key: _KEY,
    require_jobs_key: _KEY,
    require_owner_key: _KEY,
    require_read_key: _KEY,
}


def error_response(status: int) -> dict[str, Any]:
    """The OpenAPI response of a refusal with `status`."""
    model = InvalidAnswer if status == 422 else ErrorAnswer
    response: dict[str, Any] = {
        "description": WHY[status],
        "content": {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}},
    }
    if status in (429, 503):
        response["headers"] = {"Retry-After": RETRY_AFTER}
    return response


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's `responses=`: the refusals of its own work (not of its dependencies or its
    body, which `document_errors` adds)."""
    return {status: error_response(status) for status in statuses}


def raised_by(dependant: Dependant) -> set[int]:
    """The refusals of `dependant`'s dependencies (`RAISED_BY`), all the way down."""
    statuses: set[int] = set()
    for dependency in dependant.dependencies:
        statuses.update(RAISED_BY.get(dependency.call, ()))  # type: ignore[arg-type]
        statuses |= raised_by(dependency)
    return statuses


def body_errors(operation: dict[str, Any]) -> set[int]:
    """The refusals any body of `operation` may meet: over its limit, not valid, not a form."""
    content = operation.get("requestBody", {}).get("content", {})
    if not content:
        return set()
    return {413, 422} | ({400} if "multipart/form-data" in content else set())


def document_errors(app: FastAPI) -> None:
    """Add to every operation of `app`'s OpenAPI description the refusals it may answer (see
    the module), in one shape, and pattern its path and query values."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = generate()
        for route in effective_routes(app):
            if isinstance(getattr(route, "original_route", route), APIRoute) and (
                route.include_in_schema
            ):
                for method in route.methods:
                    operation = spec["paths"][route.path_format][method.lower()]
                    _add_refusals(operation, raised_by(route.dependant) | body_errors(operation))
                    _printable_parameters(operation)
        _add_answer_schemas(spec)
        _settings_bounds(spec["components"]["schemas"], app.state.settings)
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def _add_refusals(operation: dict[str, Any], statuses: set[int]) -> None:
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)  # FastAPI's own, a list only: the service's is `InvalidAnswer`
    for status in statuses:
        responses.setdefault(str(status), error_response(status))
    operation["responses"] = dict(sorted(responses.items()))


def _printable_parameters(operation: dict[str, Any]) -> None:
    for parameter in operation.get("parameters", []):
        schema = parameter.get("schema", {})
        if schema.get("type") == "string" and "pattern" not in schema:
            schema["pattern"] = PRINTABLE


def _add_answer_schemas(spec: dict[str, Any]) -> None:
    """The refusals' models in the components, and FastAPI's own 422 models out of them."""
    components = spec.setdefault("components", {}).setdefault("schemas", {})
    _, schemas = models_json_schema(
        [(ErrorAnswer, "serialization"), (InvalidAnswer, "serialization")], ref_template=REF
    )
    components.update(schemas.get("$defs", {}))
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)


def _settings_bounds(schemas: dict[str, Any], settings: ServiceSettings) -> None:
    """The bounds `settings` give the request bodies, in their schemas: the limits of a
    search (`app.services.limits.check_search`), and the encoders a collection or a job may
    name (`app.services.jobs.checked_encoder`: a known name, or a path)."""
    limits = settings.api
    for name in ("SimilarRequest", "SimilarUpload"):
        fields = schemas.get(name, {}).get("properties", {})
        for field, bound in (
            ("top_k", {"maximum": limits.max_top_k}),
            ("offset", {"maximum": limits.max_offset}),
            ("candidates", {"maxItems": limits.max_candidates}),
            ("exclude", {"maxItems": limits.max_candidates}),
            ("like", {"maxItems": limits.max_examples}),
            ("unlike", {"maxItems": limits.max_examples}),
        ):
            if field in fields:
                fields[field].update(bound)
    search = schemas.get("CollectionRequest", {}).get("properties", {}).get("search", {})
    for branch in search.get("anyOf", []):
        if branch.get("type") == "object":  # the fields `requested_groups` lets a request set
            branch.pop("propertyNames", None)
            branch.update(properties=_search_fields(schemas), additionalProperties=False)
    names = sorted({*BUILTIN_ENCODERS, settings.encoder.name})
    for name in ("CollectionRequest", "ReindexRequest"):
        encoder = schemas.get(name, {}).get("properties", {}).get("encoder", {})
        for branch in encoder.get("anyOf", []):
            if branch.get("type") == "string":
                branch["anyOf"] = [{"enum": names}, {"pattern": "[/\\\\.]"}]


def _search_fields(schemas: dict[str, Any]) -> dict[str, Any]:
    """The JSON schemas of the search settings' fields (their models in `schemas`). A group
    (`rm3`, `ot`, ...) takes its own settings only, as the service refuses any other name in
    it (`unknown_search_names`: 422)."""
    _, found = models_json_schema([(SearchSettings, "validation")], ref_template=REF)
    for name, schema in found.get("$defs", {}).items():
        if name != SearchSettings.__name__:
            if schema.get("type") == "object" and "properties" in schema:
                schema["additionalProperties"] = False
            schemas.setdefault(name, schema)
    fields: dict[str, Any] = found["$defs"][SearchSettings.__name__]["properties"]
    return fields
