"""The generated settings reference: every setting is described, and every variable it names is
one that pydantic-settings really reads."""

from __future__ import annotations

import typing
from functools import reduce

import pytest

from docs.settings_reference import SettingRow, setting_rows, settings_markdown
from docsim.app.core.settings import ServiceSettings

pytestmark = pytest.mark.no_sql

ROWS = list(setting_rows(ServiceSettings))


def path_of(row: SettingRow) -> list[str]:
    return row.variable.removeprefix("DOCSIM_").lower().split("__")


def field_of(row: SettingRow):  # noqa: ANN201 - pydantic's FieldInfo
    *groups, name = path_of(row)
    model = reduce(lambda m, g: m.model_fields[g].annotation, groups, ServiceSettings)
    return model.model_fields[name]


def test_every_setting_has_a_description() -> None:
    missing = [row.variable for row in ROWS if len(row.description) < 10]
    assert not missing, f"settings without a description (Field(description=...)): {missing}"


def test_every_field_is_listed_once() -> None:
    def leaves(model: type, prefix: str) -> set[str]:
        found = set()
        for name, field in model.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                found |= leaves(annotation, f"{prefix}{name.upper()}__")
            else:
                found.add(f"{prefix}{name.upper()}")
        return found

    variables = [row.variable for row in ROWS]
    assert len(variables) == len(set(variables))
    assert set(variables) == leaves(ServiceSettings, "DOCSIM_")
    assert {"DOCSIM_DATA_DIR", "DOCSIM_ENCODER__CHUNK_VECTORS", "DOCSIM_API__API_KEY"} <= set(
        variables
    )


def changed_value(row: SettingRow) -> tuple[str, object] | None:
    """A valid value other than the default, as environment text and as parsed, for the
    settings whose type allows one without knowing the setting (numbers, booleans, literal
    choices); None for the rest."""
    field = field_of(row)
    annotation, default = field.annotation, field.default
    if typing.get_origin(annotation) is typing.Literal:
        other = next(v for v in typing.get_args(annotation) if v != default)
        return str(other), other
    if annotation is bool:
        return str(not default).lower(), not default
    if annotation is int and isinstance(default, int):
        upper = min((m.le for m in field.metadata if hasattr(m, "le")), default=None)
        value = default - 1 if upper is not None and default + 1 > upper else default + 1
        return str(value), value
    if annotation is float and isinstance(default, float):
        upper = min((m.le for m in field.metadata if hasattr(m, "le")), default=None)
        value = default / 2 if upper is not None and default * 2 + 1 > upper else default * 2 + 1
        return repr(value), value
    return None


def test_each_variable_is_read_from_the_environment_by_that_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sets every number, boolean and choice to another valid value through the variable the
    reference names, and finds it at that path of the parsed settings."""
    expected = {}
    for row in ROWS:
        if (changed := changed_value(row)) is not None:
            monkeypatch.setenv(row.variable, changed[0])
            expected[row.variable] = changed[1]
    assert len(expected) >= 40
    parsed = ServiceSettings()
    for row in ROWS:
        if row.variable in expected:
            value = reduce(getattr, path_of(row), parsed)
            assert value == expected[row.variable], row.variable


def test_the_markdown_has_a_section_per_group_and_a_row_per_variable() -> None:
    text = settings_markdown(ServiceSettings)
    groups = list(dict.fromkeys(row.group for row in ROWS))
    assert groups[0] == "general" and {"encoder", "search", "api"} <= set(groups)
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        f"## `{g}`" for g in groups
    ]
    for row in ROWS:
        assert sum(line.startswith(f"| `{row.variable}` |") for line in text.splitlines()) == 1
    assert "| `DOCSIM_INDEX__NPROBE` | int, >= 1 | `32` | IVF lists visited per query. |" in text
    assert "| `DOCSIM_JOBS__ALLOWED_ROOTS` | JSON list of path | `[]` |" in text
    assert "`openvino-int8`" in text and "Any SQLAlchemy URL" in text
