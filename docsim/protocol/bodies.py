"""What every request body shares: unknown fields refused, no NUL in any string, documents as
text or sections, document ids.

Each model's JSON schema (the OpenAPI description's) says what its validators check, where
JSON Schema can: no NUL in a string, one of the fields that exclude each other, a text with a
word in it. What it cannot say (a field of the collection's metadata, a file docsim can read)
the routes' descriptions and their 422 do."""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema
from typing_extensions import TypeAliasType


def has_nul(value: Any) -> bool:
    """Whether a string, or any key or string inside a JSON-like value, holds a NUL character
    (which PostgreSQL text cannot store, and no document needs)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_nul(v) for v in value)
    return False


def has_control_characters(value: str) -> bool:
    """Whether `value` holds a control character (C0, DEL or C1: newline, tab, ESC, ...)."""
    return any(unicodedata.category(c) == "Cc" for c in value)


def plain_id(value: str) -> str:
    """A document id: printable, so that it can be written in a URL and in a log line, and
    not `.` or `..`, which a URL's path cannot name (clients and proxies resolve them away)."""
    if has_control_characters(value):
        raise ValueError(
            "a document id must not contain control characters (newline, tab, ESC, ...)"
        )
    if value in DOT_SEGMENTS:
        raise ValueError(f"{value!r} cannot be a document id: a URL's path cannot name it")
    return value


DOT_SEGMENTS = (".", "..")
# JSON Schema patterns: a text without control characters (`has_control_characters`), one
# without NUL (`RequestModel`), and one with a letter or a digit (a sentence needs one)
PRINTABLE = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
# a document id: printable, and not a dot segment (one with another character, or 3+ dots)
PLAIN_ID = (
    "^(?:[^\\u0000-\\u001f\\u007f-\\u009f]*[^.\\u0000-\\u001f\\u007f-\\u009f]"
    "[^\\u0000-\\u001f\\u007f-\\u009f]*|\\.{3,})$"
)
NO_NUL = "^[^\\u0000]*$"
WORDY = "[\\p{L}\\p{N}]"


DocumentIdText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=512,
        json_schema_extra={"pattern": PLAIN_ID},
    ),
    AfterValidator(plain_id),
]


# A metadata value as its JSON schema says it (validated as any JSON): its strings and keys,
# all the way down, without NUL
_NulFree = Annotated[str, WithJsonSchema({"type": "string", "pattern": NO_NUL})]
MetadataValue = TypeAliasType(  # type: ignore[misc]
    "MetadataValue",
    Union[  # noqa: UP007 - a recursive alias spells its union so
        _NulFree,
        int,
        float,
        bool,
        None,
        list["MetadataValue"],  # type: ignore[misc]
        Annotated[
            dict[str, "MetadataValue"],  # type: ignore[misc]
            Field(json_schema_extra={"propertyNames": {"pattern": NO_NUL}}),
        ],
    ],
)
Metadata = Annotated[
    dict[str, Any], BeforeValidator(lambda v: v, json_schema_input_type=dict[str, MetadataValue])
]


# every JSON type but null (a positive spelling: schemathesis cannot judge a `not` beside an
# uploaded file, so these schemas have none)
NOT_NULL = {"type": ["string", "number", "boolean", "array", "object"]}


def given(*fields: str) -> dict[str, Any]:
    """The JSON schema of an object that has each of `fields`, and not as null."""
    return {"required": list(fields), "properties": {f: dict(NOT_NULL) for f in fields}}


def left_out(*fields: str) -> dict[str, Any]:
    """The JSON schema of an object that has none of `fields`, or has them as null."""
    return {"properties": {f: {"type": "null"} for f in fields}}


def one_of(*fields: str) -> dict[str, Any]:
    """The JSON schema of an object that has exactly one of `fields` (not as null)."""
    return {"oneOf": [given(f) for f in fields]}


def as_form(schema: dict[str, Any]) -> None:
    """`schema`, a `multipart/form-data` body's, as a form carries its fields: each one is
    given or left out, never null (a part holds text: `null` would be read as that text),
    and a list is its field given once or repeated."""
    for name, field in schema.get("properties", {}).items():
        branches = [b for b in field.get("anyOf", []) if b.get("type") != "null"]
        if len(branches) == 1:
            del field["anyOf"]
            field.update(branches[0])
        if field.get("type") == "array":  # its items stay beside, where clients look
            sizes = {k: field.pop(k) for k in ("minItems", "maxItems") if k in field}
            field["anyOf"] = [field["items"], {"type": field.pop("type"), **sizes}]
            if field["items"].get("format") == "binary":  # a file part, for clients to see
                field["format"] = "binary"
        schema["properties"][name] = field


def _without_nul(schema: Any) -> None:
    """Each string of `schema` (not behind a `$ref`: that model says its own) without NUL,
    and each object's property names too."""
    if isinstance(schema, list):
        for item in schema:
            _without_nul(item)
        return
    if not isinstance(schema, dict) or "$ref" in schema:
        return
    if schema.get("type") == "string" and not {"pattern", "format", "enum", "const"} & set(schema):
        schema["pattern"] = NO_NUL
    if schema.get("type") == "object" and "properties" not in schema:
        schema.setdefault("propertyNames", {"pattern": NO_NUL})
    for key in ("anyOf", "oneOf", "allOf", "items", "additionalProperties"):
        _without_nul(schema.get(key))


class RequestModel(BaseModel):
    """A request body: no string in it may hold a NUL character (PostgreSQL text cannot store
    one, and no document needs it), which is a 422, not a database error; a field the model
    does not have is a 422 too, not ignored."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        if has_nul(data):
            raise ValueError("text must not contain NUL characters (\\u0000)")
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The model's JSON schema, its strings without NUL, as `_no_nul` checks."""
        schema = handler(core_schema)
        _without_nul(list(handler.resolve_ref_schema(schema).get("properties", {}).values()))
        return schema


class SectionIn(RequestModel):
    title: str = ""
    text: str


class DocumentIn(RequestModel):
    """A document as in DESIGN.md section 2: `text`, or `sections` with titles. Its text (or
    one of its sections') has a letter or a digit: a sentence needs one."""

    model_config = ConfigDict(json_schema_extra=one_of("text", "sections"))

    id: DocumentIdText | None = None
    title: str = ""
    text: str | None = Field(default=None, json_schema_extra={"pattern": WORDY})
    sections: list[SectionIn] | None = Field(
        default=None, json_schema_extra={"contains": {"properties": {"text": {"pattern": WORDY}}}}
    )
    metadata: Metadata = Field(default_factory=dict)

    @model_validator(mode="after")
    def _text_or_sections(self) -> DocumentIn:
        if (self.text is None) == (self.sections is None):
            raise ValueError("give exactly one of 'text' or 'sections'")
        return self
