"""Metadata field types: what a document's metadata values are, as filters and writes see them.

A document's metadata is flattened into (field, scalar) pairs (`metadata_values`): nested
objects named by dotted paths (`header.court`), each element of a list of scalars a value of
its field. A value's type (`value_type`) is boolean, number, date (an ISO 8601 string such as
`1990-01-31`) or keyword (any other string). A collection fixes each field's type at its first
write, like a search engine's mapping (`check_metadata`): declared when the collection is
created, else taken from the first document that holds the field; a later value of another type
is refused, naming the field, its type and the value. `mixed` is only ever the type of a field
whose documents disagreed before types were fixed: it takes any value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from enum import Enum
from typing import Any

import numpy as np

from docsim.indexer.errors import MetadataTypeError

Scalar = bool | int | float | str
_ISO_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)


class FieldType(str, Enum):
    boolean = "boolean"
    number = "number"
    date = "date"
    keyword = "keyword"
    mixed = "mixed"  # documents hold values of several types: eq, in and exists only


def metadata_values(metadata: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Scalar]]:
    """Every (field, scalar) of one document's metadata: nested objects by dotted path, each
    element of a list of scalars, and no nulls or non-finite numbers."""
    for key, value in metadata.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from metadata_values(value, name + ".")
        elif isinstance(value, list):
            for item in value:
                if is_scalar(item):
                    yield name, item
        elif is_scalar(value):
            yield name, value


def is_scalar(value: Any) -> bool:
    """A string, boolean, or number that is finite as a float (JSON allows 1e400 as an
    integer; a float64 column cannot hold it)."""
    if isinstance(value, bool) or isinstance(value, str):
        return True
    if isinstance(value, int):
        return abs(value) <= _LARGEST
    return isinstance(value, float) and math.isfinite(value)


_LARGEST = int(np.finfo(np.float64).max)


def value_type(value: Scalar) -> FieldType:
    if isinstance(value, bool):
        return FieldType.boolean
    if isinstance(value, (int, float)):
        return FieldType.number
    if parse_date(value) is not None:
        return FieldType.date
    return FieldType.keyword


def field_type(types: set[FieldType]) -> FieldType:
    """One type for a field whose values have `types`: dates among other strings are
    keywords; anything else that disagrees is `mixed`."""
    if len(types) == 1:
        return next(iter(types))
    if types == {FieldType.date, FieldType.keyword}:
        return FieldType.keyword
    return FieldType.mixed


def parse_date(text: str) -> int | None:
    """An ISO 8601 date or date-time as microseconds since the epoch (UTC; a time without an
    offset is taken as UTC), or None."""
    if not _ISO_DATE.match(text):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // _MICROSECOND


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = datetime.resolution


# --- types fixed at first write ------------------------------------------------------------
_WANTED = {
    FieldType.boolean: "true or false",
    FieldType.number: "a number",
    FieldType.date: "an ISO 8601 date such as '1990-01-31' or '1990-01-31T12:00:00Z'",
    FieldType.keyword: "a string",
}


def accepts(kind: FieldType, value: Scalar) -> bool:
    """Whether a field of type `kind` takes `value` (a keyword field takes date strings too)."""
    if kind is FieldType.mixed:
        return True
    if kind is FieldType.keyword:
        return isinstance(value, str)
    return value_type(value) is kind


def check_metadata(
    fixed: Mapping[str, FieldType], metadata: Mapping[str, Any], what: str
) -> dict[str, FieldType]:
    """The types of the fields of `metadata` that `fixed` does not hold yet, as their first
    values give them.

    Raises:
        MetadataTypeError: a value that is not of its field's type (in `fixed`, or as an
            earlier value of the same document fixed it), naming `what`, the field, its type
            and the value.
    """
    new: dict[str, FieldType] = {}
    for name, value in metadata_values(metadata):
        kind = fixed.get(name) or new.get(name)
        if kind is None:
            new[name] = value_type(value)
        elif not accepts(kind, value):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise MetadataTypeError(
                f"{what}: metadata field {name!r} holds {kind.value} values ({_WANTED[kind]}); "
                f"got {shown}"
            )
    return new


def infer_field_types(
    metadata: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, FieldType], list[str]]:
    """The field types that documents written before types were fixed agree on, and the
    fields on which they disagree (typed `mixed`: they take any value, and filters on them
    take eq, in and exists only)."""
    seen: dict[str, set[FieldType]] = {}
    for fields in metadata:
        for name, value in metadata_values(fields):
            seen.setdefault(name, set()).add(value_type(value))
    types = {name: field_type(kinds) for name, kinds in sorted(seen.items())}
    return types, [name for name, kind in types.items() if kind is FieldType.mixed]
