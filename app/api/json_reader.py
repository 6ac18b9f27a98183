"""JSON read from a request within bounds, before any model looks at it.

Every JSON the service reads from a request (a JSON body, the filter of an upload's form) is
read here once: strictly (no NaN or Infinity) and within two limits that are settings, each
refusal naming its setting. Python's own limits would otherwise answer 500: an integer of
more than 4,300 digits is a ValueError, a nesting a thousand deep a RecursionError, and a
nesting of hundreds (under the parser's limit) recursed through by the models' validators.

- `DOCSIM_API__MAX_JSON_DEPTH`: arrays and objects nested inside each other;
- `DOCSIM_API__MAX_JSON_NUMBER_CHARS`: the characters of one number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from docsim.app.core.settings import ApiSettings

_CONTAINERS = frozenset({dict, list})  # what `json.loads` nests: exactly these types


@dataclass(frozen=True)
class JsonBounds:
    max_depth: int
    max_number_chars: int

    @classmethod
    def of(cls, limits: ApiSettings) -> JsonBounds:
        return cls(limits.max_json_depth, limits.max_json_number_chars)


class JsonError(ValueError):
    """Text that is not JSON, or JSON past a limit (`limit`: the message names its setting);
    `position`: the character (or byte) where the parser stopped, 0 when unknown."""

    def __init__(self, message: str, position: int = 0, *, limit: bool = False) -> None:
        super().__init__(message)
        self.position = position
        self.limit = limit


def read_json(text: str | bytes, bounds: JsonBounds) -> Any:
    """The value of the JSON `text`, once it is known to be within `bounds`.

    Raises:
        JsonError: not JSON (NaN and Infinity are not), a number of more than
            `bounds.max_number_chars` characters, or arrays and objects nested deeper than
            `bounds.max_depth`.
    """

    def number(token: str, read: type[int] | type[float]) -> int | float:
        if len(token) > bounds.max_number_chars:
            raise JsonError(
                f"a number has {len(token):,} characters; the limit is "
                f"{bounds.max_number_chars:,} (DOCSIM_API__MAX_JSON_NUMBER_CHARS)",
                limit=True,
            )
        try:
            return read(token)
        except ValueError:  # past Python's own limit on an integer's digits
            raise JsonError(
                f"a number of {len(token):,} characters is too long to read "
                "(DOCSIM_API__MAX_JSON_NUMBER_CHARS)",
                limit=True,
            ) from None

    try:
        value = json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_int=lambda token: number(token, int),
            parse_float=lambda token: number(token, float),
        )
    except RecursionError:  # arrays or objects nested a thousand deep: past any bound
        raise _too_deep(bounds.max_depth) from None
    except json.JSONDecodeError as error:
        raise JsonError(str(error), error.pos) from None
    except UnicodeDecodeError as error:
        raise JsonError(str(error), error.start) from None
    if json_depth(value, stop_past=bounds.max_depth) > bounds.max_depth:
        raise _too_deep(bounds.max_depth)
    return value


def json_depth(value: Any, stop_past: int | None = None) -> int:
    """How deep arrays and objects nest in `value` (a value `json.loads` made): 0 for a
    scalar, 1 for `[]` or `{"a": 1}`, 2 for `[[]]`. Level by level, without recursion; the
    count stops at `stop_past + 1` when given. Scalars are skipped by their types' set, so
    that a long array of strings or numbers costs about a C loop over it."""
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level and (stop_past is None or depth <= stop_past):
        depth += 1
        below: list[Any] = []
        for container in level:
            items = container.values() if type(container) is dict else container
            if not _CONTAINERS.isdisjoint(set(map(type, items))):
                below.extend(item for item in items if type(item) in _CONTAINERS)
        level = below
    return depth


def _refuse_constant(name: str) -> float:
    raise JsonError(f"{name} is not a JSON number (JSON has no NaN or Infinity)")


def _too_deep(max_depth: int) -> JsonError:
    return JsonError(
        f"arrays and objects nest deeper than {max_depth:,} levels (DOCSIM_API__MAX_JSON_DEPTH)",
        limit=True,
    )
