"""MkDocs hooks: the reference pages are generated from the code at build time, so that they
cannot drift from it.

A page asks for a generated part with a marker line:
- `<!-- settings-reference -->`: every `DOCSIM_*` variable (`settings_reference.py`, beside
  this file);
- `<!-- limits-reference -->`: the settings that bound a request, with what passing them
  answers;
- `<!-- cli-reference -->`: every `docsim` command and option, read from the typer app;
- `<!-- http-reference -->`: every route of the OpenAPI description, which is also published
  as `openapi.json` beside the pages;
- `<!-- changelog -->`: CHANGELOG.md at the repository's root.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import typing
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import typer
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def _beside(name: str) -> ModuleType:
    """The module `name`.py of this folder (MkDocs loads this file by its path, and the
    documentation's generators are no package of docsim's)."""
    spec = importlib.util.spec_from_file_location(
        f"docs_{name}", Path(__file__).with_name(f"{name}.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_reference = _beside("settings_reference")
table_cell, type_text = _reference.table_cell, _reference.type_text


def settings_reference() -> str:
    from docsim.app.core.settings import ServiceSettings

    return str(_reference.settings_markdown(ServiceSettings))


def limits_reference() -> str:
    from docsim.app.core.settings import ServiceSettings

    return str(_reference.limits_markdown(ServiceSettings))


def _option_row(param: Any) -> str:
    """A table row for a click parameter (typer ships its own copy of click: duck-typed)."""
    if param.param_type_name == "argument":
        name = f"`{param.name.upper()}`"
        help_text = getattr(param, "help", None) or ""
    else:
        name = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
        help_text = param.help or ""
    descriptor = getattr(param, "type_descriptor", None)
    if getattr(param, "is_flag", False):
        kind = "flag"
    elif descriptor is not None and typing.get_origin(descriptor.annotation) is list:
        (item,) = typing.get_args(descriptor.annotation)
        kind = f"{type_text(item)}, repeatable"
    elif descriptor is not None:
        kind = type_text(descriptor.annotation)
    else:
        kind = param.type.name
    default = getattr(param.default, "value", param.default)  # an enum member: its value
    if isinstance(default, bool):
        default = str(default).lower()
    shown = (
        "" if default in (None, "false", ()) or callable(default) else f"`{table_cell(default)}`"
    )
    required = " (required)" if param.required else ""
    return f"| {name}{required} | {table_cell(kind)} | {shown} | {table_cell(help_text)} |"


def cli_reference() -> str:
    from docsim.app.cli import docsim

    group: Any = typer.main.get_command(docsim())
    lines = []
    top = [p for p in group.params if p.name != "help"]
    lines += ["### `docsim`", "", table_cell(group.help or ""), ""]
    lines += ["| option | type | default | description |", "|---|---|---|---|"]
    lines += [_option_row(p) for p in top] + [""]
    for name in sorted(group.commands):
        command = group.commands[name]
        params = [p for p in command.params if p.name != "help"]
        lines += [f"### `docsim {name}`", ""]
        lines += [(command.help or "").strip(), ""]
        if params:
            lines += ["| argument or option | type | default | description |", "|---|---|---|---|"]
            lines += [_option_row(p) for p in params] + [""]
    return "\n".join(lines)


@cache
def openapi() -> dict[str, Any]:
    from docsim.app.core.settings import ServiceSettings
    from docsim.app.main import create_app

    with tempfile.TemporaryDirectory() as data_dir:  # the description needs no index
        return create_app(ServiceSettings(data_dir=Path(data_dir))).openapi()


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return f"`{schema['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in schema:
        return " or ".join(_schema_name(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list of {_schema_name(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    return str(schema.get("type", "object"))


def http_reference() -> str:
    spec = openapi()
    lines = []
    for path, operations in spec["paths"].items():
        for verb, op in operations.items():
            lines += [f"### `{verb.upper()} {path}`", ""]
            if op.get("summary"):
                lines += [f"**{op['summary']}**", ""]
            if op.get("description"):
                lines += [op["description"].strip(), ""]
            if params := op.get("parameters"):
                lines += ["| parameter | in | type | description |", "|---|---|---|---|"]
                for p in params:
                    required = " (required)" if p.get("required") else ""
                    lines.append(
                        f"| `{p['name']}`{required} | {p['in']} | "
                        f"{table_cell(_schema_name(p.get('schema', {})))} | "
                        f"{table_cell(p.get('description', ''))} |"
                    )
                lines.append("")
            if body := op.get("requestBody"):
                kinds = ", ".join(
                    f"`{media}` ({_schema_name(content.get('schema', {}))})"
                    for media, content in body.get("content", {}).items()
                )
                lines += [f"Body: {kinds}.", ""]
            codes = ", ".join(
                f"{code} {table_cell(r.get('description', ''))}"
                for code, r in op["responses"].items()
            )
            lines += [f"Responses: {codes}.", ""]
    lines += ["## Schemas", "", "The bodies the routes take and give, by name.", ""]
    for name, schema in sorted(spec.get("components", {}).get("schemas", {}).items()):
        lines += [f"### `{name}`", ""]
        if schema.get("description"):
            lines += [" ".join(schema["description"].split()), ""]
        if properties := schema.get("properties"):
            required = set(schema.get("required", []))
            lines += ["| field | type | default | description |", "|---|---|---|---|"]
            for field, prop in properties.items():
                mark = " (required)" if field in required else ""
                default = (
                    f"`{table_cell(json.dumps(prop['default']))}`" if "default" in prop else ""
                )
                lines.append(
                    f"| `{field}`{mark} | {table_cell(_schema_name(prop))} | {default} | "
                    f"{table_cell(prop.get('description', ''))} |"
                )
            lines.append("")
        elif "enum" in schema:
            lines += [f"One of {_schema_name(schema)}.", ""]
    return "\n".join(lines)


def changelog() -> str:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return text.split("\n", 1)[1]  # the page has its own title


MARKERS = {
    "<!-- settings-reference -->": settings_reference,
    "<!-- limits-reference -->": limits_reference,
    "<!-- cli-reference -->": cli_reference,
    "<!-- http-reference -->": http_reference,
    "<!-- changelog -->": changelog,
}


def on_files(files: Files, config: Any) -> Files:
    files.append(
        File.generated(config, "openapi.json", content=json.dumps(openapi(), indent=1) + "\n")
    )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown
