"""Metadata filters: which documents a query may rank, told by their metadata.

A filter is a tree (`docsim.protocol.filters`: its grammar, its nodes and `parse_filter`,
which every request's filter goes through when its body is validated). Fields are the scalar
values of a document's metadata, nested objects named by dotted paths (`header.court`); a list
of scalars is a field with several values, which a condition matches when any value does. A
field's type is inferred from the collection's documents (`FieldType`): booleans, numbers,
dates (ISO 8601 strings such as `1990-01-01`), keywords (other strings, whose ranges compare
them in code point order, so that `"2004"` lies between `"2000"` and `"2010"`), or `mixed`
where documents disagree, which takes `eq`, `in` and `exists` only. A document without the
field matches no condition on it, so `not` matches it.

`FilterColumns` holds each field's values column-wise for one served version, and `mask`
evaluates a filter over them with numpy: a boolean per document, before any scoring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from docsim.indexer.text.field_types import (
    FieldType,
    Scalar,
    accepts,
    field_type,
    metadata_values,
    parse_date,
    value_type,
)
from docsim.protocol.filters import (
    All,
    AnyOf,
    Equals,
    Exists,
    Filter,
    Not,
    OneOf,
    shown,
)
from docsim.search.errors import FilterError


@dataclass(frozen=True)
class Column:
    """One field's values: `docs` `(v,)` the document position of each value, `values`
    `(v,)` the values (float64 numbers, int64 microseconds for dates, bool, or objects).
    Keyword and mixed fields also hold each value's code, `codes` `(v,)`, in `vocabulary`
    (a distinct value's key: its kind and itself, so that 1 is not "1"), so that `eq` and `in`
    compare integers: an `in` of n values costs n lookups and one pass over the column."""

    type: FieldType
    docs: np.ndarray
    values: np.ndarray
    codes: np.ndarray | None = None
    vocabulary: Mapping[tuple[str, Scalar], int] | None = None

    @classmethod
    def of(cls, kind: FieldType, docs: list[int], values: list[Scalar]) -> Column:
        positions = np.asarray(docs, dtype=np.int64)
        if kind not in (FieldType.keyword, FieldType.mixed):
            return cls(kind, positions, _as_array(kind, values))
        vocabulary: dict[tuple[str, Scalar], int] = {}
        codes = np.fromiter(
            (vocabulary.setdefault(_key(v), len(vocabulary)) for v in values),
            dtype=np.int64,
            count=len(values),
        )
        return cls(kind, positions, _as_array(kind, values), codes, vocabulary)

    def matches(self, wanted: Sequence[Any]) -> np.ndarray:
        """`(v,)` True for each value equal to one of `wanted` (already in the column's form)."""
        if self.vocabulary is None or self.codes is None:
            return np.isin(self.values, np.asarray(wanted, dtype=self.values.dtype))
        found = {self.vocabulary.get(_key(value), -1) for value in wanted} - {-1}
        if len(found) == 1:
            return np.asarray(self.codes == found.pop(), dtype=bool)
        return np.isin(self.codes, np.fromiter(found, dtype=np.int64, count=len(found)))


@dataclass
class FilterColumns:
    """The metadata fields of one served version's documents, column-wise."""

    n_documents: int
    columns: dict[str, Column] = field(default_factory=dict)

    @classmethod
    def of(
        cls, metadata: Sequence[Mapping[str, Any]], fixed: Mapping[str, str] | None = None
    ) -> FilterColumns:
        """The columns of `metadata`, one mapping per document position. A field whose type
        the collection `fixed` (declared, or taken from its first write) has that type where
        it takes every value (a `keyword` field of date strings compares them as strings),
        but `mixed`; any other field, the type its values agree on."""
        docs: dict[str, list[int]] = {}
        values: dict[str, list[Scalar]] = {}
        types: dict[str, set[FieldType]] = {}
        for position, fields in enumerate(metadata):
            for name, value in metadata_values(fields):
                docs.setdefault(name, []).append(position)
                values.setdefault(name, []).append(value)
                types.setdefault(name, set()).add(value_type(value))
        columns = {}
        for name, held in values.items():
            kind = field_type(types[name])
            declared = FieldType(fixed[name]) if fixed and name in fixed else kind
            if declared not in (kind, FieldType.mixed) and all(accepts(declared, v) for v in held):
                kind = declared
            columns[name] = Column.of(kind, docs[name], held)
        return cls(len(metadata), columns)

    def types(self) -> dict[str, FieldType]:
        return {name: column.type for name, column in sorted(self.columns.items())}

    def mask(self, filter: Filter) -> np.ndarray:
        """`(D,)` True for each document `filter` keeps.

        Raises:
            FilterError: it names a field no document has, or compares one with a value of
                another type (a range on a keyword, a number against a date).
        """
        if isinstance(filter, All):
            out = np.ones(self.n_documents, dtype=bool)
            for child in filter.filters:
                out &= self.mask(child)
            return out
        if isinstance(filter, AnyOf):
            out = np.zeros(self.n_documents, dtype=bool)
            for child in filter.filters:
                out |= self.mask(child)
            return out
        if isinstance(filter, Not):
            return ~self.mask(filter.filter)
        column = self._column(filter.field)
        if isinstance(filter, Exists):
            held = self._documents(column.docs)
            return held if filter.exists else ~held
        if isinstance(filter, Equals):
            hit = column.matches([self._value(column, filter.field, "eq", filter.value)])
        elif isinstance(filter, OneOf):
            wanted = [self._value(column, filter.field, "in", v) for v in filter.values]
            hit = column.matches(wanted)
        else:
            if column.type not in (FieldType.number, FieldType.date, FieldType.keyword):
                raise FilterError(
                    f"field {filter.field!r} holds {column.type.value} values; ranges "
                    "(gt / gte / lt / lte) need a number, date or keyword field"
                )
            hit = np.ones(len(column.values), dtype=bool)
            for op, bound in filter.bounds():
                value = self._value(column, filter.field, op, bound)
                hit &= _COMPARE[op](column.values, value)
        return self._documents(column.docs[hit])

    def _column(self, name: str) -> Column:
        column = self.columns.get(name)
        if column is None:
            known = sorted(self.columns)
            listed = ", ".join(known[:30]) + (", ..." if len(known) > 30 else "")
            raise FilterError(
                f"filter field {name!r} is in no document's metadata; fields: {listed or 'none'}"
            )
        return column

    def _documents(self, positions: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n_documents, dtype=bool)
        out[positions] = True
        return out

    @staticmethod
    def _value(column: Column, name: str, op: str, value: Scalar) -> Any:
        """`value` as the column holds its values; a FilterError if it is not of the field's
        type."""
        kind = column.type
        if kind is FieldType.mixed:
            return value
        if kind is FieldType.date:
            parsed = parse_date(value) if isinstance(value, str) else None
            if parsed is None:
                raise FilterError(
                    f"field {name!r} holds dates: {op!r} takes an ISO 8601 date such as "
                    f"'1990-01-31' or '1990-01-31T12:00:00Z', got {shown(value)}"
                )
            return parsed
        ok = (
            isinstance(value, bool)
            if kind is FieldType.boolean
            else isinstance(value, (int, float)) and not isinstance(value, bool)
            if kind is FieldType.number
            else isinstance(value, str)
        )
        if not ok:
            raise FilterError(
                f"field {name!r} holds {kind.value} values: {op!r} takes a "
                f"{_NAMES[kind]}, got {shown(value)}"
            )
        return float(value) if kind is FieldType.number else value


_NAMES = {FieldType.boolean: "boolean", FieldType.number: "number", FieldType.keyword: "string"}
_COMPARE = {
    "gt": np.greater,
    "gte": np.greater_equal,
    "lt": np.less,
    "lte": np.less_equal,
}


def _as_array(kind: FieldType, values: list[Scalar]) -> np.ndarray:
    if kind is FieldType.number:
        return np.asarray(values, dtype=np.float64)
    if kind is FieldType.boolean:
        return np.asarray(values, dtype=bool)
    if kind is FieldType.date:
        return np.asarray([parse_date(v) for v in values], dtype=np.int64)  # type: ignore[arg-type]
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _key(value: Scalar) -> tuple[str, Scalar]:
    """A value's key in a keyword or mixed column: equal keys are equal in kind as well as in
    value (1 is not "1", true is not 1; 1 is 1.0)."""
    return _family(value), value


def _family(value: Any) -> str:
    return (
        "boolean"
        if isinstance(value, bool)
        else "number"
        if isinstance(value, (int, float))
        else "string"
    )
