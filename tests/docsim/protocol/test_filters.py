"""A filter's grammar: its JSON form parsed into the tree, and every malformed form refused
saying why."""

from __future__ import annotations

from typing import Any

import pytest

from docsim.protocol.filters import (
    All,
    AnyOf,
    Equals,
    Exists,
    FilterSyntaxError,
    Not,
    OneOf,
    Range,
    parse_filter,
)

pytestmark = pytest.mark.no_sql


def test_the_json_form_parses_into_the_tree() -> None:
    parsed = parse_filter(
        {
            "and": [
                {"field": "court", "eq": "Supreme Court"},
                {"or": [{"field": "year", "gte": 1990, "lt": 2000}, {"field": "tag", "in": ["a"]}]},
                {"not": {"field": "judge", "exists": True}},
            ]
        }
    )
    assert parsed == All(
        (
            Equals("court", "Supreme Court"),
            AnyOf((Range("year", gte=1990, lt=2000), OneOf("tag", ("a",)))),
            Not(Exists("judge", True)),
        )
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "non-empty JSON object"),
        ({}, "non-empty JSON object"),
        ({"and": []}, "non-empty list"),
        ({"and": [{"field": "a", "eq": 1}], "or": []}, "holds only"),
        ({"not": {"field": "a", "eq": 1}, "field": "b"}, "holds only 'not'"),
        ({"eq": 1}, "names its metadata 'field'"),
        ({"field": "a"}, "got none"),
        ({"field": "a", "eq": 1, "in": [1]}, "takes one of"),
        ({"field": "a", "eq": 1, "gte": 0}, "takes one of"),
        ({"field": "a", "like": 1}, "unknown filter operator"),
        ({"field": "a", "in": []}, "non-empty list"),
        ({"field": "a", "in": "x"}, "non-empty list"),
        ({"field": "a", "eq": [1]}, "string, boolean or finite number"),
        ({"field": "a", "eq": None}, "string, boolean or finite number"),
        ({"field": "a", "eq": float("nan")}, "string, boolean or finite number"),
        ({"field": "a", "gte": 10**400}, "string, boolean or finite number"),
        ({"field": "a", "exists": 1}, "true or false"),
        ({"field": "a", "gt": 1, "gte": 2}, "at most one lower"),
    ],
)
def test_a_malformed_filter_is_refused_saying_why(data: Any, message: str) -> None:
    with pytest.raises(FilterSyntaxError, match=message):
        parse_filter(data)


def test_nesting_is_bounded() -> None:
    deep: dict[str, Any] = {"field": "a", "eq": 1}
    for _ in range(40):
        deep = {"not": deep}
    with pytest.raises(FilterSyntaxError, match="nests at most"):
        parse_filter(deep)
