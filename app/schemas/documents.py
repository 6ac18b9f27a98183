"""POST /documents, DELETE /documents/{id} and GET /documents/{id}."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from docsim.app.schemas.common import took_ms
from docsim.indexer.api import DocumentChange, SourceDocument
from docsim.protocol.answers import DocumentsChanged, SectionText, StoredDocument
from docsim.protocol.bodies import DocumentIdText, DocumentIn, RequestModel, as_form


class IndexedDocumentIn(DocumentIn):
    id: DocumentIdText = Field(description="The document's id (replaced if it exists).")


class DocumentsRequest(RequestModel):
    documents: list[IndexedDocumentIn] = Field(min_length=1, max_length=1000)


class DocumentsUpload(RequestModel):
    """The multipart body: one or more document files (PDF, Word, HTML, text or Markdown,
    told by their content) in fields named `file`; each file's id is its name without the
    extension, or `id` when one file is given."""

    model_config = ConfigDict(json_schema_extra=lambda schema: _upload_schema(schema))

    file: list[bytes] = Field(min_length=1, max_length=1000)
    id: DocumentIdText | None = None


def _upload_schema(schema: dict[str, Any]) -> None:
    """`DocumentsUpload`'s JSON schema, as a form's, where an `id` names one file."""
    as_form(schema)
    one_file = {"anyOf": [{"type": "string"}, {"type": "array", "maxItems": 1}]}
    schema["dependentSchemas"] = {"id": {"properties": {"file": one_file}}}


def documents_changed(change: DocumentChange, started: float) -> DocumentsChanged:
    """What `change` did; `started` is the request's `time.perf_counter()` reading."""
    return DocumentsChanged(
        index_version=change.version_id,
        revision=change.revision,
        added=change.added,
        replaced=change.replaced,
        deleted=change.deleted,
        took_ms=took_ms(started),
    )


def stored_document(source: SourceDocument, index_version: int) -> StoredDocument:
    return StoredDocument(
        id=source.doc_id,
        title=source.title,
        text=source.text,
        metadata=dict(source.metadata),
        sections=[
            SectionText(title=s.title, start=s.start, end=s.end)
            for s in source.sections or ()  # a stored document's layout is always given
        ],
        index_version=index_version,
    )
