"""Metadata filters: the inferred field types, and the vectorised mask against a plain
per-document reference (the parser's tests are `tests/docsim/protocol/test_filters.py`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docsim.protocol.filters import parse_filter
from docsim.search.errors import FilterError
from docsim.search.filters import FieldType, FilterColumns, metadata_values

pytestmark = pytest.mark.no_sql


def test_values_are_flattened_by_dotted_path() -> None:
    metadata = {
        "a": {"b": 1, "c": [True, "x", {"skip": 1}]},
        "n": None,
        "f": float("inf"),
        "big": 10**400,  # JSON allows it; no float holds it
    }
    assert list(metadata_values(metadata)) == [("a.b", 1), ("a.c", True), ("a.c", "x")]


def test_field_types_are_inferred_from_the_documents() -> None:
    columns = FilterColumns.of(
        [
            {"n": 1, "d": "1990-01-31", "k": "x", "b": True, "m": 1, "dk": "2001-02-03"},
            {"n": 2.5, "d": "2001-02-03T10:00:00Z", "k": "y", "b": False, "m": "1", "dk": "z"},
        ]
    )
    assert columns.types() == {
        "b": FieldType.boolean,
        "d": FieldType.date,
        "dk": FieldType.keyword,  # dates among other strings are strings
        "k": FieldType.keyword,
        "m": FieldType.mixed,
        "n": FieldType.number,
    }


METADATA = [
    {"year": 1990, "court": "High", "date": "1990-05-01", "tags": ["a", "b"], "ok": True},
    {"year": 2001, "court": "Supreme", "date": "2001-01-01T12:00:00+02:00", "tags": ["b"]},
    {"year": 1975.5, "court": "Supreme", "ok": False},
    {"court": "District", "date": "2010-12-31", "tags": []},
]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"field": "yaer", "eq": 1}, "'yaer' is in no document's metadata; fields: court, date"),
        ({"field": "court", "gte": 1}, "'court' holds keyword values: 'gte' takes a string"),
        ({"field": "ok", "lt": 1}, "'ok' holds boolean values; ranges"),
        ({"field": "year", "eq": "1990"}, "'year' holds number values: 'eq' takes a number"),
        ({"field": "year", "eq": True}, "'year' holds number values"),
        ({"field": "court", "in": ["High", 3]}, "'court' holds keyword values: 'in' takes a"),
        ({"field": "ok", "eq": 1}, "'ok' holds boolean values"),
        ({"field": "date", "gte": 1990}, "'date' holds dates: 'gte' takes an ISO 8601 date"),
        ({"field": "date", "gte": "1990"}, "'date' holds dates"),
        ({"field": "date", "gte": "1990-13-01"}, "'date' holds dates"),
        ({"not": {"field": "nope", "exists": True}}, "'nope' is in no document's metadata"),
    ],
)
def test_an_unknown_field_or_a_value_of_another_type_is_named(data: Any, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        FilterColumns.of(METADATA).mask(parse_filter(data))


@pytest.mark.parametrize(
    ("data", "kept"),
    [
        ({"field": "court", "eq": "Supreme"}, [1, 2]),
        ({"field": "tags", "eq": "b"}, [0, 1]),  # any value of a list
        ({"not": {"field": "tags", "eq": "b"}}, [2, 3]),  # no value, or no field
        ({"field": "year", "gte": 1990}, [0, 1]),
        ({"field": "year", "gt": 1975, "lt": 1990}, [2]),
        ({"field": "court", "gte": "High", "lt": "Supreme"}, [0]),  # code point order
        ({"field": "date", "gte": "2001-01-01"}, [1, 3]),  # 10:00 UTC on 1 January
        ({"field": "date", "gt": "2001-01-01T10:00:00Z"}, [3]),
        ({"field": "ok", "exists": True}, [0, 2]),
        ({"field": "ok", "exists": False}, [1, 3]),
        ({"field": "tags", "exists": True}, [0, 1]),  # an empty list holds no value
        ({"or": [{"field": "ok", "eq": False}, {"field": "court", "in": ["District"]}]}, [2, 3]),
    ],
)
def test_conditions_keep_the_documents_they_describe(data: Any, kept: list[int]) -> None:
    mask = FilterColumns.of(METADATA).mask(parse_filter(data))
    assert np.flatnonzero(mask).tolist() == kept


# --- the vectorised mask against a per-document reference --------------------------------
FIELDS = ("n", "k", "d", "b", "m")
NUMBERS = st.sampled_from([0, 1, 2, 2.5, -3])
KEYWORDS = st.sampled_from(["x", "y", "z"])
DATES = st.sampled_from(["1990-01-01", "1990-01-01T06:00:00Z", "2000-06-30", "2020-02-29"])
VALUES = {
    "n": NUMBERS,
    "k": KEYWORDS,
    "d": DATES,
    "b": st.booleans(),
    "m": st.one_of(NUMBERS, KEYWORDS),
}


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in draw(st.sets(st.sampled_from(FIELDS))):
        values = VALUES[name]
        out[name] = draw(st.one_of(values, st.lists(values, max_size=3)))
    return out


@st.composite
def conditions(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(FIELDS))
    kind = draw(st.sampled_from(["eq", "in", "exists", "range"]))
    if kind == "exists":
        return {"field": name, "exists": draw(st.booleans())}
    if kind == "eq":
        return {"field": name, "eq": draw(VALUES[name])}
    if kind == "in":
        return {"field": name, "in": draw(st.lists(VALUES[name], min_size=1, max_size=3))}
    bound = NUMBERS if name in ("n", "m") else DATES if name == "d" else VALUES[name]
    if name == "k":
        bound = KEYWORDS
    lower = draw(st.sampled_from([None, "gt", "gte"]))
    upper = draw(st.sampled_from([None, "lt", "lte"] if lower else ["lt", "lte"]))
    return {
        "field": name,
        **{op: draw(bound) for op in (lower, upper) if op is not None},
    }


filters = st.recursive(
    conditions(),
    lambda inner: st.one_of(
        st.builds(lambda f: {"and": f}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda f: {"or": f}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda f: {"not": f}, inner),
    ),
    max_leaves=6,
)


def _moment(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _family(value: Any) -> str:
    return type(value).__name__.replace("int", "number").replace("float", "number")


def reference(data: dict[str, Any], doc: dict[str, Any], types: dict[str, FieldType]) -> bool:
    """One document, one filter, the plainest way: the filter's definition, with the
    comparisons a field's type gives."""
    if "and" in data:
        return all(reference(f, doc, types) for f in data["and"])
    if "or" in data:
        return any(reference(f, doc, types) for f in data["or"])
    if "not" in data:
        return not reference(data["not"], doc, types)
    name = data["field"]
    raw = doc.get(name)
    values = raw if isinstance(raw, list) else [] if raw is None else [raw]
    if "exists" in data:
        return bool(values) == data["exists"]
    kind = types[name]

    def same(a: Any, b: Any) -> bool:
        if kind is FieldType.date:
            return _moment(a) == _moment(b)
        if kind is FieldType.mixed:
            return _family(a) == _family(b) and a == b
        return bool(a == b)

    if "eq" in data:
        return any(same(v, data["eq"]) for v in values)
    if "in" in data:
        return any(same(v, w) for v in values for w in data["in"])
    key = _moment if kind is FieldType.date else str if kind is FieldType.keyword else float
    checks = {
        "gt": lambda v, b: key(v) > key(b),
        "gte": lambda v, b: key(v) >= key(b),
        "lt": lambda v, b: key(v) < key(b),
        "lte": lambda v, b: key(v) <= key(b),
    }
    bounds = [(op, b) for op, b in data.items() if op in checks]
    return any(all(checks[op](v, b) for op, b in bounds) for v in values)


@settings(max_examples=300, deadline=None)
@given(docs=st.lists(documents(), min_size=1, max_size=12), data=filters)
def test_the_mask_equals_the_reference_on_every_document(
    docs: list[dict[str, Any]], data: dict[str, Any]
) -> None:
    columns = FilterColumns.of(docs)
    types = columns.types()
    try:
        mask = columns.mask(parse_filter(data))
    except FilterError as error:  # an unknown field, a range over unranged values, or a value
        # of another type than the field's (`m` is a number field when no document has text)
        message = str(error)
        assert (
            "is in no document's metadata" in message
            or "ranges" in message
            or ("takes a" in message and types.get(data.get("field", "")) is not FieldType.mixed)
        ), message
        return
    expected = [reference(data, doc, types) for doc in docs]
    assert mask.tolist() == expected
