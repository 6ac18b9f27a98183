"""Metadata field types fixed at first write: the pure checks."""

from __future__ import annotations

import pytest

from docsim.indexer.errors import MetadataTypeError
from docsim.indexer.text.field_types import FieldType, accepts, check_metadata, infer_field_types

pytestmark = pytest.mark.no_sql


@pytest.mark.parametrize(
    "kind, value, taken",
    [
        (FieldType.date, "1990-01-31", True),
        (FieldType.date, "1990-01-31T12:00:00Z", True),
        (FieldType.date, "yesterday", False),
        (FieldType.date, 2020, False),
        (FieldType.number, 2020, True),
        (FieldType.number, 2.5, True),
        (FieldType.number, True, False),
        (FieldType.number, "7", False),
        (FieldType.boolean, False, True),
        (FieldType.boolean, 0, False),
        (FieldType.keyword, "anything", True),
        (FieldType.keyword, "1990-01-31", True),  # a date string is a string
        (FieldType.keyword, 3, False),
        (FieldType.mixed, 3, True),
        (FieldType.mixed, "x", True),
    ],
)
def test_a_field_takes_the_values_of_its_type(kind: FieldType, value, taken: bool) -> None:
    assert accepts(kind, value) is taken


def test_first_values_fix_new_fields_and_later_ones_must_agree() -> None:
    fixed = {"date": FieldType.date}
    new = check_metadata(
        fixed, {"date": "2001-02-03", "court": {"name": "SC"}, "n": [1, 2]}, "document 'a'"
    )
    assert new == {"court.name": FieldType.keyword, "n": FieldType.number}

    with pytest.raises(MetadataTypeError) as refused:
        check_metadata(fixed, {"date": 2020}, "document 'b'")
    message = str(refused.value)
    assert "document 'b'" in message and "'date'" in message and "date values" in message
    assert "2020" in message
    with pytest.raises(MetadataTypeError, match="'tags' holds keyword"):
        check_metadata({}, {"tags": ["a", 1]}, "document 'c'")  # within one document too


def test_documents_written_before_types_were_fixed_give_them_with_their_conflicts() -> None:
    types, conflicts = infer_field_types(
        [
            {"date": "2001-02-03", "title": "x", "n": 1},
            {"date": 2001, "title": "1999-01-01", "n": 2.5},
            {"flag": True},
        ]
    )
    assert types == {
        "date": FieldType.mixed,
        "flag": FieldType.boolean,
        "n": FieldType.number,
        "title": FieldType.keyword,  # dates among other strings: a keyword field
    }
    assert conflicts == ["date"]
