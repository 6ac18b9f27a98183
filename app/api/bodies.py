"""Request bodies that come as JSON or as a multipart upload.

`POST /similar` and `POST /documents` take their JSON model, or `multipart/form-data` with the
document file(s) in `file` and the other options as form fields. FastAPI reads one body type
per route, so these routes read the body here, validate it with the same models, and answer
malformed input as FastAPI would: a 422 listing what is wrong (a 400 for a body that is not
multipart at all, a 413 for one over the upload limit).
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, Union, get_args, get_origin

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException, MultiPartParser

from docsim.app.api.body_limit import FORM, FORM_FIELD_BYTES
from docsim.app.api.json_reader import JsonBounds, JsonError, read_json
from docsim.app.core.errors import DocumentTooLargeError
from docsim.app.services.uploads import UploadedFile

Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True)
class Form:
    fields: dict[str, Any]  # a field given once holds its value, a repeated one a list
    files: list[UploadedFile]


def is_form(http: Request) -> bool:
    return http.headers.get("content-type", "").lower().startswith(FORM)


async def json_body(
    http: Request, model: type[Model], check: Callable[[Any], None] | None = None
) -> Model:
    """The JSON body validated as `model`, strictly: no NaN or Infinity, no field the model
    does not have, and no coercion (`true` is not a number, `"yes"` not a boolean). It is read
    within the JSON limits first (`app.api.json_reader`), then handed to `check` (which
    raises to refuse it) before the model's validation. Errors are located in `body` as
    FastAPI's are. A large body is parsed on a worker thread, so that the event loop goes on
    serving the other connections meanwhile."""
    raw = await http.body()
    bounds = JsonBounds.of(http.app.state.settings.api)
    if len(raw) > PARSE_ON_THREAD_BYTES:
        return await anyio.to_thread.run_sync(parsed, raw, model, bounds, check)
    return parsed(raw, model, bounds, check)


PARSE_ON_THREAD_BYTES = 256 * 1024  # about 2 ms of parsing


def strict_json(model: type[Model]) -> Callable[[Request], Awaitable[Model]]:
    """The dependency that reads a route's JSON body as `model` (`json_body`: strictly, a
    large body on a worker thread); the route declares the body with `json_request_body`."""

    async def body(http: Request) -> Model:
        return await json_body(http, model)

    return body


def parsed(
    raw: bytes,
    model: type[Model],
    bounds: JsonBounds,
    check: Callable[[Any], None] | None = None,
) -> Model:
    """`raw` validated as `model` (see `json_body`)."""
    try:
        data = read_json(raw, bounds)
    except JsonError as error:
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", error.position),
                    "msg": str(error) if error.limit else "JSON decode error",
                    "input": {},
                    "ctx": {"error": str(error)},
                }
            ]
        ) from None
    if check is not None:
        check(data)
    try:
        return model.model_validate_json(raw, strict=True)
    except ValidationError as error:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in error.errors(include_url=False)]
        ) from None


def validated(model: type[Model], data: Any) -> Model:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in error.errors(include_url=False)]
        ) from None


class _NotInCharset(MultiPartException):
    """A form field whose bytes are not text in the body's charset."""

    field = ""


class _StrictFormParser(MultiPartParser):
    """Starlette's multipart parser, except that a form field (other than `file_fields`,
    whose parts may carry a file's bytes without a file name) whose bytes are not valid in
    the body's charset (UTF-8 unless the request names another) is refused, where Starlette
    would read it as Latin-1 and hand on a different text than was sent."""

    def __init__(self, *args: Any, file_fields: set[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.file_fields = file_fields

    def on_part_end(self) -> None:
        part = self._current_part
        if part.file is None and part.field_name not in self.file_fields:
            try:
                bytes(part.data).decode(self._charset)
            except (UnicodeDecodeError, LookupError):
                error = _NotInCharset(f"the form field is not valid {self._charset} text")
                error.field = part.field_name
                raise error from None
        super().on_part_end()


async def form_body(
    http: Request,
    *,
    file_fields: set[str],
    scalar_fields: set[str],
    list_fields: set[str],
    max_file_bytes: int,
) -> Form:
    """The multipart body: the parts of the fields in `file_fields` as files, and the other
    fields, each a scalar or a list as declared. Files are held in memory to be read, so all
    of an upload's files together may have `max_file_bytes`.

    Raises:
        DocumentTooLargeError: the upload's files have more than `max_file_bytes` together.
        RequestValidationError: a field that is not declared, or a scalar given twice.
    """
    # a body over `max_file_bytes + FORM_FIELD_BYTES` never gets here (`body_limit`)
    parser = _StrictFormParser(
        http.headers,
        http.stream(),
        max_files=1000,
        max_fields=1000,
        max_part_size=FORM_FIELD_BYTES,
        file_fields=file_fields,
    )
    try:
        form = await parser.parse()
    except _NotInCharset as error:
        raise invalid(error.field, str(error)) from None
    except MultiPartException as error:  # as Starlette's own `Request.form` answers it
        raise HTTPException(status_code=400, detail=str(error)) from None
    try:
        fields: dict[str, Any] = {}
        files: list[UploadedFile] = []
        errors = []
        for key, value in form.multi_items():
            if key in file_fields:
                left = max_file_bytes - sum(len(f.data) for f in files)
                files.append(await _file(value, left, max_file_bytes))
            elif key in list_fields and isinstance(value, str):
                fields.setdefault(key, []).append(value)
            elif key in scalar_fields and isinstance(value, str) and key not in fields:
                fields[key] = value
            else:
                reason = "given twice" if key in fields else "not a field of this form"
                errors.append(
                    _error(
                        key, f"{reason} (fields: {_names(file_fields, scalar_fields, list_fields)})"
                    )
                )
        if errors:
            raise RequestValidationError(errors)
        return Form(fields, files)
    finally:
        await form.close()


async def _file(value: UploadFile | str, left: int, limit: int) -> UploadedFile:
    """A file part, read up to the `left` bytes the upload may still hold."""
    if isinstance(value, str):  # a part sent without a file name: its text is the file
        data, name = value.encode(), ""
    else:
        data, name = await value.read(left + 1), value.filename or ""
    if len(data) > left:
        what = f"file {name!r}" if name else "the uploaded file"
        raise _too_large(f"{what} takes the upload over the limit", limit)
    return UploadedFile(name, data)


def _too_large(what: str, limit: int) -> DocumentTooLargeError:
    return DocumentTooLargeError(
        f"{what}: an upload's files may have {limit:,} bytes together (DOCSIM_FILES__MAX_BYTES)"
    )


def _error(field: str, message: str) -> dict[str, Any]:
    return {"type": "value_error", "loc": ("body", field), "msg": message, "input": None}


def _names(*groups: set[str]) -> str:
    return ", ".join(sorted(set().union(*groups)))


def invalid(field: str, message: str) -> RequestValidationError:
    """A 422 about one form field, as FastAPI words them."""
    return RequestValidationError([_error(field, message)])


# the models of the bodies routes read here, named in their OpenAPI `requestBody`s: each
# declaration below records its models, and `add_body_schemas` puts them in the components
DECLARED_BODIES: dict[str, type[BaseModel]] = {}


def request_body(json_model: type[BaseModel], form_model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI `requestBody` of a route that reads JSON or a multipart upload (pass it
    as `openapi_extra`; `add_body_schemas` puts the models in the components)."""
    DECLARED_BODIES.update({m.__name__: m for m in (json_model, form_model)})
    ref = "#/components/schemas/{}".format
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": ref(json_model.__name__)}},
                FORM: {"schema": {"$ref": ref(form_model.__name__)}},
            },
        }
    }


def json_request_body(json_model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI `requestBody` of a route that reads a JSON body with `json_body`."""
    DECLARED_BODIES[json_model.__name__] = json_model
    ref = f"#/components/schemas/{json_model.__name__}"
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": ref}}},
        }
    }


def add_body_schemas(app: FastAPI) -> None:
    """Add the JSON schemas of the bodies the routes declared (`DECLARED_BODIES`, and the
    models they use) to the app's OpenAPI components: FastAPI does not see them, as these
    routes read their bodies here."""
    from pydantic.json_schema import models_json_schema

    models = list(DECLARED_BODIES.values())
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = generate()
        _, schemas = models_json_schema(
            [(m, "validation") for m in models], ref_template="#/components/schemas/{model}"
        )
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        for name, schema in schemas.get("$defs", {}).items():
            components.setdefault(name, schema)
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


UNIONS = (Union, types.UnionType)


def list_fields(model: type[BaseModel]) -> set[str]:
    """The fields of `model` that hold a list (or a list or None)."""
    found = set()
    for name, field in model.model_fields.items():
        kinds = get_args(field.annotation) if get_origin(field.annotation) in UNIONS else ()
        if any(get_origin(kind) is list for kind in (field.annotation, *kinds)):
            found.add(name)
    return found
