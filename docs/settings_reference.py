"""The settings reference, generated from the settings classes themselves: every environment
variable with its type, default and description, group by group. The documentation site's
settings page is this module's Markdown, so the reference cannot drift from the code; a test
fails when a setting has no description."""

from __future__ import annotations

import enum
import json
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

PREFIX = "DOCSIM_"
NESTING = "__"
ROOT_GROUP = "general"


@dataclass(frozen=True)
class SettingRow:
    """One environment variable: `DOCSIM_ENCODER__NAME`, its group (`encoder`), its type and
    constraints as text, its default as text, and its description."""

    variable: str
    group: str
    type: str
    default: str
    description: str
    answer: int | None = None  # a limit's HTTP status when a request passes it


def _is_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def type_text(annotation: Any) -> str:
    """A short readable type: `int`, `path`, one of the literal values, `list of path`; a type
    that may be unset ends in `(optional)`."""
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(f"`{value}`" for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        kept = [a for a in get_args(annotation) if a is not type(None)]
        text = " | ".join(type_text(a) for a in kept)
        return f"{text} (optional)" if len(kept) < len(get_args(annotation)) else text
    if origin is list:
        (item,) = get_args(annotation)
        return f"JSON list of {type_text(item)}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(f"`{member.value}`" for member in annotation)
    if annotation is SecretStr:
        return "secret string"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    return getattr(annotation, "__name__", str(annotation))


def constraint_text(field: FieldInfo) -> str:
    """The field's bounds, e.g. `>= 1`, `> 0, <= 1`."""
    bounds = (
        (annotated_types.Ge, "ge", ">="),
        (annotated_types.Gt, "gt", ">"),
        (annotated_types.Le, "le", "<="),
        (annotated_types.Lt, "lt", "<"),
    )
    parts = []
    for item in field.metadata:
        for kind, attribute, sign in bounds:
            if isinstance(item, kind):
                parts.append(f"{sign} {getattr(item, attribute)}")
    return ", ".join(parts)


def default_text(field: FieldInfo) -> str:
    """The default as a user would write it in the environment; `unset` for None."""
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return json.dumps([str(v) for v in value])
    return str(value)


def setting_rows(model: type[BaseModel], prefix: str = PREFIX) -> Iterator[SettingRow]:
    """Every variable of `model`, nested groups as `PREFIX<GROUP>__<NAME>`, in field order."""
    group = prefix[len(PREFIX) :].removesuffix(NESTING).lower() or ROOT_GROUP
    for name, field in model.model_fields.items():
        if _is_group(field.annotation):
            continue
        kind = type_text(field.annotation)
        if bounds := constraint_text(field):
            kind = f"{kind}, {bounds}"
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        answer = extra.get("answer")
        yield SettingRow(
            variable=f"{prefix}{name.upper()}",
            group=group,
            type=kind,
            default=default_text(field),
            description=(field.description or "").strip(),
            answer=answer if isinstance(answer, int) else None,
        )
    for name, field in model.model_fields.items():
        group_model = field.annotation
        if isinstance(group_model, type) and issubclass(group_model, BaseModel):
            yield from setting_rows(group_model, f"{prefix}{name.upper()}{NESTING}")


def group_descriptions(model: type[BaseModel]) -> dict[str, str]:
    """Each nested group's docstring, by group name (one level of nesting, as the settings
    have)."""
    found = {ROOT_GROUP: "Where docsim keeps its data, and the sentence splitter."}
    for name, field in model.model_fields.items():
        if _is_group(field.annotation):
            found[name] = " ".join((field.annotation.__doc__ or "").split())
    return found


def table_cell(text: object) -> str:
    """`text` on one line, safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def settings_markdown(model: type[BaseModel]) -> str:
    """The reference as Markdown: a section and a table per group."""
    rows = list(setting_rows(model))
    described = group_descriptions(model)
    lines: list[str] = []
    for group in dict.fromkeys(row.group for row in rows):
        lines += [f"## `{group}`", ""]
        if described.get(group):
            lines += [described[group], ""]
        lines += ["| variable | type | default | description |", "|---|---|---|---|"]
        for row in (r for r in rows if r.group == group):
            lines.append(
                f"| `{row.variable}` | {table_cell(row.type)} | `{table_cell(row.default)}` | "
                f"{table_cell(row.description)} |"
            )
        lines.append("")
    return "\n".join(lines)


def limits_markdown(model: type[BaseModel]) -> str:
    """The limits on what a request may ask, as a Markdown table: every setting marked with
    the status a request over it gets (`json_schema_extra={"answer": 413}`)."""
    lines = ["| setting | default | answered | what it bounds |", "|---|---|---|---|"]
    for row in setting_rows(model):
        if row.answer is not None:
            lines.append(
                f"| `{row.variable}` | `{table_cell(row.default)}` | {row.answer} | "
                f"{table_cell(row.description)} |"
            )
    return "\n".join(lines) + "\n"
