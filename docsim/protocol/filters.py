"""A metadata filter as a request carries it: its grammar, the tree it parses into, and the
parser (`parse_filter`) that every request's filter goes through once, when its body is
validated. Evaluating a tree over a collection's metadata is the search layer's
(`search.filters`).

A filter is a tree. Its leaves are conditions on one metadata field (`Equals`, `OneOf`,
`Range`, `Exists`); its inner nodes combine them (`All`, `AnyOf`, `Not`):

    {"and": [{"field": "court", "eq": "Supreme Court of India"},
             {"field": "date", "gte": "1990-01-01"},
             {"not": {"field": "bench", "in": ["Division", "Full"]}}]}

A value is a string, a boolean or a number that is finite as a float64.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Scalar = bool | int | float | str
LARGEST = int(sys.float_info.max)  # the largest integer a float64 column holds


class FilterSyntaxError(ValueError):
    """A filter that is not one: the message says where and why."""


RANGE_BOUNDS = ("gt", "gte", "lt", "lte")
MAX_DEPTH = 32  # nesting of and / or / not


@dataclass(frozen=True)
class Equals:
    field: str
    value: Scalar


@dataclass(frozen=True)
class OneOf:
    field: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True)
class Range:
    field: str
    gt: Scalar | None = None
    gte: Scalar | None = None
    lt: Scalar | None = None
    lte: Scalar | None = None

    def bounds(self) -> Iterator[tuple[str, Scalar]]:
        for name in RANGE_BOUNDS:
            value = getattr(self, name)
            if value is not None:
                yield name, value


@dataclass(frozen=True)
class Exists:
    field: str
    exists: bool = True


@dataclass(frozen=True)
class All:
    filters: tuple[Filter, ...]


@dataclass(frozen=True)
class AnyOf:
    filters: tuple[Filter, ...]


@dataclass(frozen=True)
class Not:
    filter: Filter


Condition = Equals | OneOf | Range | Exists
Filter = Equals | OneOf | Range | Exists | All | AnyOf | Not


def parse_filter(data: Any, depth: int = 0) -> Filter:
    """The filter tree of its JSON form (see the module's docstring).

    Raises:
        FilterSyntaxError: `data` is not a filter; the message says where and why.
    """
    if depth > MAX_DEPTH:
        raise FilterSyntaxError(f"a filter nests at most {MAX_DEPTH} levels of and / or / not")
    if not isinstance(data, Mapping) or not data:
        raise FilterSyntaxError(f"a filter is a non-empty JSON object, got {shown(data)}")
    keys = set(data)
    for combinator in ("and", "or"):
        if combinator in keys:
            if keys != {combinator}:
                raise FilterSyntaxError(
                    f"an {combinator!r} node holds only {combinator!r}: {shown(data)}"
                )
            children = data[combinator]
            if not isinstance(children, list) or not children:
                raise FilterSyntaxError(f"{combinator!r} takes a non-empty list of filters")
            parsed = tuple(parse_filter(child, depth + 1) for child in children)
            return All(parsed) if combinator == "and" else AnyOf(parsed)
    if "not" in keys:
        if keys != {"not"}:
            raise FilterSyntaxError(f"a 'not' node holds only 'not': {shown(data)}")
        return Not(parse_filter(data["not"], depth + 1))
    return _condition(data)


def _condition(data: Mapping[str, Any]) -> Condition:
    name = data.get("field")
    if not isinstance(name, str) or not name:
        raise FilterSyntaxError(
            f"a condition names its metadata 'field' (a string), or is an 'and' / 'or' / "
            f"'not' node: {shown(data)}"
        )
    ops = set(data) - {"field"}
    unknown = ops - {"eq", "in", "exists", *RANGE_BOUNDS}
    if unknown:
        raise FilterSyntaxError(
            f"unknown filter operator(s) {sorted(unknown)} on field {name!r}; operators: "
            "eq, in, gt, gte, lt, lte, exists"
        )
    kinds = {"range" if op in RANGE_BOUNDS else op for op in ops}
    if len(kinds) != 1:
        raise FilterSyntaxError(
            f"a condition on field {name!r} takes one of eq, in, exists, or range bounds "
            f"(gt / gte / lt / lte), got {sorted(ops) or 'none'}"
        )
    kind = kinds.pop()
    if kind == "eq":
        return Equals(name, _scalar(data["eq"], name, "eq"))
    if kind == "in":
        values = data["in"]
        if not isinstance(values, list) or not values:
            raise FilterSyntaxError(f"'in' on field {name!r} takes a non-empty list of values")
        return OneOf(name, tuple(_scalar(v, name, "in") for v in values))
    if kind == "exists":
        if not isinstance(data["exists"], bool):
            raise FilterSyntaxError(f"'exists' on field {name!r} takes true or false")
        return Exists(name, data["exists"])
    bounds = {op: _scalar(data[op], name, op) for op in ops}
    if "gt" in bounds and "gte" in bounds or "lt" in bounds and "lte" in bounds:
        raise FilterSyntaxError(f"field {name!r}: give at most one lower and one upper bound")
    return Range(name, **bounds)


def finite_scalar(value: Any) -> bool:
    """Whether `value` is a string, a boolean, or a number that is finite as a float64 (JSON
    allows 1e400 as an integer; a float64 column cannot hold it)."""
    if isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return abs(value) <= LARGEST
    return isinstance(value, float) and math.isfinite(value)


def _scalar(value: Any, name: str, op: str) -> Scalar:
    if finite_scalar(value):
        return value
    raise FilterSyntaxError(
        f"{op!r} on field {name!r} takes a string, boolean or finite number, got {shown(value)}"
    )


def shown(value: Any, limit: int = 80) -> str:
    """`value` as a message quotes it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fields_of(filter: Filter) -> Iterator[str]:
    """Every field a filter names."""
    if isinstance(filter, (All, AnyOf)):
        for child in filter.filters:
            yield from fields_of(child)
    elif isinstance(filter, Not):
        yield from fields_of(filter.filter)
    else:
        yield filter.field
