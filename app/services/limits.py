"""The API's limits on a posted document (`max_document_bytes`, `max_sentences`), checked the
same way wherever a document comes in: POST /similar and POST /documents, as JSON or as an
uploaded file."""

from __future__ import annotations

from typing import Any

from docsim.app.core.config import ApiSettings
from docsim.app.core.errors import DocumentTooLargeError
from docsim.indexer.api import (
    Document,
    SentenceSplitter,
    SourceDocument,
    json_document,
    split_document,
)
from docsim.indexer.errors import EmptyDocumentError


def posted_document(
    posted: dict[str, Any], splitter: SentenceSplitter, limits: ApiSettings, what: str
) -> tuple[SourceDocument, Document]:
    """A posted document (`DocumentIn.model_dump(exclude_none=True)` with an `id`), read and
    split, once it is known to be within the limits.

    Args:
        what: how messages name the document: "document" or "document 'some-id'".

    Raises:
        DocumentTooLargeError: more characters or sentences than the limits allow (413).
        EmptyDocumentError: no text, or no sentence in it (422).
    """
    size = len(posted.get("text", "")) + sum(
        len(s["text"]) + len(s["title"]) for s in posted.get("sections", [])
    )
    if size > limits.max_document_bytes:
        raise DocumentTooLargeError(
            f"{what} has {size} characters; the limit is {limits.max_document_bytes}"
        )
    source = json_document(posted, "")
    if not isinstance(source, SourceDocument):
        raise EmptyDocumentError(f"{what} is empty or invalid: {source.reason}")
    return source, split_within_limits(source, splitter, limits, what)


def split_within_limits(
    source: SourceDocument, splitter: SentenceSplitter, limits: ApiSettings, what: str
) -> Document:
    """`source` split, once its text and sentences are known to be within the limits (a
    document read from an uploaded file is checked here; a posted one before it is read).

    Raises:
        DocumentTooLargeError: more characters or sentences than the limits allow (413).
    """
    if len(source.text) > limits.max_document_bytes:
        raise DocumentTooLargeError(
            f"{what} has {len(source.text)} characters; the limit is {limits.max_document_bytes}"
        )
    document = split_document(source, splitter)
    n_sentences = document.counts()["sentence"]
    if n_sentences > limits.max_sentences:
        raise DocumentTooLargeError(
            f"{what} has {n_sentences} sentences; the limit is {limits.max_sentences}"
        )
    return document
