"""POST /collections and GET /collections."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from docsim.indexer.api import COLLECTION_NAME_PATTERN
from docsim.protocol.bodies import RequestModel, given, left_out
from docsim.search.api import SearchSettings, regrouped

KEY_RULE = (
    "visible ASCII characters (letters, digits, punctuation; spaces only between them), as "
    "an HTTP header can carry them"
)
KEY_PATTERN = "^[!-~]([ -~]*[!-~])?$"  # `header_safe_key`'s rule, as JSON Schema says it


def header_safe_key(key: SecretStr | None) -> SecretStr | None:
    """`key`, when an HTTP request can carry it whole in `X-API-Key` or a Bearer token: other
    characters are mangled on the way and surrounding spaces are stripped, so a key holding
    them would lock its owner out."""
    if key is None:
        return None
    value = key.get_secret_value()
    if not all(" " <= c <= "~" for c in value) or value != value.strip():
        raise ValueError(f"a key is {KEY_RULE}")
    return key


class CollectionRequest(RequestModel):
    model_config = ConfigDict(
        json_schema_extra={"anyOf": [left_out("read_key"), given("write_key")]}
    )

    name: str = Field(
        pattern=COLLECTION_NAME_PATTERN,
        description="1 to 64 characters of a-z, 0-9, `_` and `-`, starting with a letter or "
        "digit; the collection's routes are under `/collections/{name}`.",
    )
    encoder: str | None = Field(
        default=None,
        max_length=4096,
        description="The encoder of its indexes: `minilm`, the server's configured one, or a "
        "model directory under the allowed roots. Default: the server's.",
    )
    backend: Literal["auto", "torch", "openvino-int8", "openvino-fp32"] | None = Field(
        default=None, description="What runs the encoder's forward pass. Default: the server's."
    )
    search: dict[str, Any] | None = Field(
        default=None,
        description="Search settings of its own over the server's (`DOCSIM_SEARCH__*`, "
        'lower case, without the prefix: e.g. `{"default_method": "bm25"}`).',
    )
    field_types: dict[str, Literal["boolean", "number", "date", "keyword"]] | None = Field(
        default=None,
        max_length=1_000,
        description="Metadata field types it declares, by field (dotted paths for nested "
        "objects): `boolean`, `number`, `date` (ISO 8601 strings) or `keyword` (any string). "
        "A field not declared takes the type of its first value. A document whose value is "
        "not of its field's type is refused (422), or skipped by a build.",
    )
    write_key: SecretStr | None = Field(
        default=None,
        min_length=16,
        max_length=512,
        json_schema_extra={"pattern": KEY_PATTERN},
        description="An API key for changing this collection (documents, jobs); the server's "
        f"key opens it too. A key of one collection opens nothing in another. It is {KEY_RULE}.",
    )
    read_key: SecretStr | None = Field(
        default=None,
        min_length=16,
        max_length=512,
        json_schema_extra={"pattern": KEY_PATTERN},
        description="An API key that searching and reading this collection then need (its "
        f"write key and the server's key open it too). Needs a write key. It is {KEY_RULE}.",
    )

    @field_validator("search")
    @classmethod
    def _search_types(cls, search: dict[str, Any] | None) -> dict[str, Any] | None:
        """The search settings named, each of its type as the rest of the body is read
        (strictly: `true` is no number, `"5"` or `5.0` no integer), as the OpenAPI description
        says; a name that is not a setting is left to the service, which names it (422)."""
        if search is None:
            return None
        search = regrouped(search)  # the flat names of before issue 70, with a warning
        fields = SearchSettings.model_fields
        known = {name: value for name, value in search.items() if name in fields}
        try:
            SearchSettings.model_validate_json(json.dumps(known), strict=True)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()
            )
            raise ValueError(f"search: {problems}") from None
        return search

    @field_validator("write_key", "read_key")
    @classmethod
    def _header_safe(cls, key: SecretStr | None) -> SecretStr | None:
        return header_safe_key(key)

    @model_validator(mode="after")
    def _read_key_needs_a_write_key(self) -> CollectionRequest:
        if self.read_key is not None and self.write_key is None:
            raise ValueError("a collection with a read key needs a write key too")
        return self
