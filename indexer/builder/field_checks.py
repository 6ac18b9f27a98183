"""A build's documents checked against their collection's metadata field types.

The types a collection has fixed (`indexer.text.field_types`) hold for its builds too: a
document whose metadata value is not of its field's type is skipped, with the reason in the
build's report, and a field first seen in the build is typed by the first document that holds
it, in the corpus's order. The build publishes the types it ends with beside its version.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlalchemy import Engine, select

from docsim.indexer.errors import MetadataTypeError
from docsim.indexer.store.tables import collections
from docsim.indexer.text.documents import Skipped, SourceDocument
from docsim.indexer.text.field_types import FieldType, check_metadata


class BuildFieldTypes:
    """The field types of one build's collection, as its documents come in."""

    def __init__(self, fixed: dict[str, FieldType]) -> None:
        self.types = dict(fixed)

    @classmethod
    def of_collection(cls, engine: Engine, name: str) -> BuildFieldTypes:
        """The types the collection `name` has stored (none before its first write)."""
        with engine.connect() as conn:
            stored = conn.execute(
                select(collections.c.field_types).where(collections.c.name == name)
            ).scalar_one_or_none()
        return cls({field: FieldType(kind) for field, kind in (stored or {}).items()})

    def checked(
        self, items: Iterable[SourceDocument | Skipped]
    ) -> Iterator[SourceDocument | Skipped]:
        """`items`, each document whose metadata conflicts with the types replaced by a
        `Skipped` that says why; the others' new fields join the types."""
        for item in items:
            if isinstance(item, SourceDocument):
                try:
                    new = check_metadata(self.types, item.metadata, f"document {item.doc_id!r}")
                except MetadataTypeError as error:
                    yield Skipped(str(item.metadata.get("source", item.doc_id)), str(error))
                    continue
                self.types.update(new)
            yield item

    def stored(self) -> dict[str, str]:
        """The types as the collection stores them."""
        return {field: kind.value for field, kind in sorted(self.types.items())}
