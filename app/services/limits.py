"""The API's limits, checked before any work starts: on a posted document
(`max_document_bytes`, `max_sentences`), the same way wherever a document comes in (POST
/similar and POST /documents, as JSON or as an uploaded file), and on what a search asks for
(`max_top_k`, `max_offset`, `max_examples`, `max_candidates`, `max_filter_clauses`,
`max_filter_values`). Each refusal names its setting. The body's bytes are bounded before it is
read (`app.api.body_limit`)."""

from __future__ import annotations

import re
from typing import Any

from docsim.app.core.errors import DocumentTooLargeError, LimitExceededError
from docsim.app.core.settings import ApiSettings
from docsim.indexer.api import (
    Document,
    SentenceSplitter,
    SourceDocument,
    json_document,
    split_document,
)
from docsim.indexer.errors import EmptyDocumentError

_SENTENCE_MARK = re.compile(r"[.?!](?=\s)")  # where Punkt weighs a break: its cost


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
    size = posted_characters(posted)
    if size > limits.max_document_bytes:
        raise DocumentTooLargeError(
            f"{what} has {size} characters; the limit is {limits.max_document_bytes} "
            "(DOCSIM_API__MAX_DOCUMENT_BYTES)"
        )
    source = json_document(posted, "")
    if not isinstance(source, SourceDocument):
        raise EmptyDocumentError(f"{what} is empty or invalid: {source.reason}")
    return source, split_within_limits(source, splitter, limits, what)


def posted_characters(posted: dict[str, Any]) -> int:
    """The characters of every string of a posted document that becomes its text or title:
    its `title`, its `text`, and its sections' titles and texts."""
    sections = posted.get("sections") or []
    return (
        len(posted.get("title") or "")
        + len(posted.get("text") or "")
        + sum(len(s.get("text") or "") + len(s.get("title") or "") for s in sections)
    )


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
            f"{what} has {len(source.text)} characters; the limit is "
            f"{limits.max_document_bytes} (DOCSIM_API__MAX_DOCUMENT_BYTES)"
        )
    marks = sum(1 for _ in _SENTENCE_MARK.finditer(source.text))
    if marks > limits.max_sentence_marks:
        raise DocumentTooLargeError(
            f"{what} has {marks:,} sentence marks; the limit is {limits.max_sentence_marks:,} "
            "(DOCSIM_API__MAX_SENTENCE_MARKS)"
        )
    document = split_document(source, splitter)
    n_sentences = document.counts()["sentence"]
    if n_sentences > limits.max_sentences:
        raise DocumentTooLargeError(
            f"{what} has {n_sentences} sentences; the limit is {limits.max_sentences} "
            "(DOCSIM_API__MAX_SENTENCES)"
        )
    return document


def check_search(request: Any, limits: ApiSettings) -> None:
    """`request` (a `SimilarOptions`: a JSON search or an upload's form) within the limits on
    what a search asks for.

    Raises:
        LimitExceededError: the first count over its limit, named with its setting (422).
    """
    counts = [
        ("top_k", request.top_k, limits.max_top_k, "MAX_TOP_K"),
        ("offset", request.offset, limits.max_offset, "MAX_OFFSET"),
    ]
    if request.candidates is not None:
        counts.append(
            ("candidates", len(request.candidates), limits.max_candidates, "MAX_CANDIDATES")
        )
    if request.exclude is not None:
        counts.append(("exclude", len(request.exclude), limits.max_candidates, "MAX_CANDIDATES"))
    for examples in ("like", "unlike"):
        given = getattr(request, examples, None)
        if given is not None:
            counts.append((examples, len(given), limits.max_examples, "MAX_EXAMPLES"))
    if request.filter is not None:
        clauses, values = filter_size(request.filter.data())
        counts.append(
            ("the filter's clauses", clauses, limits.max_filter_clauses, "MAX_FILTER_CLAUSES")
        )
        counts.append(
            ("the filter's values", values, limits.max_filter_values, "MAX_FILTER_VALUES")
        )
    for what, count, limit, setting in counts:
        if count > limit:
            raise LimitExceededError(
                f"{what} is {count:,}; the limit is {limit:,} (DOCSIM_API__{setting})"
            )


def filter_size(data: Any) -> tuple[int, int]:
    """(nodes, values) of a filter's JSON form: its conditions and and / or / not nodes, and
    the values its `in` lists hold. Iterative: the nesting was bounded by parsing."""
    nodes = values = 0
    pending = [data]
    while pending:
        node = pending.pop()
        nodes += 1
        if isinstance(node.get("in"), list):
            values += len(node["in"])
        for combinator in ("and", "or"):
            if isinstance(node.get(combinator), list):
                pending.extend(node[combinator])
        if isinstance(node.get("not"), dict):
            pending.append(node["not"])
    return nodes, values


def check_filter_size(data: Any, limits: ApiSettings) -> None:
    """A filter's JSON form, as read and before any model validates it, within the limits on
    its clauses and values: counted node by node, and refused at the first count past its
    limit, so that a filter far over them costs no more than reading it. An item that is not
    a filter node counts as a clause; what is wrong with it is left to validation.

    Raises:
        LimitExceededError: the first count past its limit, named with its setting (422).
    """
    nodes = values = 0
    pending = [data] if isinstance(data, dict) else []
    while pending:
        node = pending.pop()
        nodes += 1
        if nodes > limits.max_filter_clauses:
            raise _past("the filter's clauses", nodes, limits.max_filter_clauses, "CLAUSES")
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("in"), list):
            values += len(node["in"])
            if values > limits.max_filter_values:
                raise _past("the filter's values", values, limits.max_filter_values, "VALUES")
        for combinator in ("and", "or"):
            if isinstance(node.get(combinator), list):
                pending.extend(node[combinator])
        if "not" in node:
            pending.append(node["not"])


def _past(what: str, counted: int, limit: int, setting: str) -> LimitExceededError:
    return LimitExceededError(
        f"{what} is {counted:,} or more; the limit is {limit:,} (DOCSIM_API__MAX_FILTER_{setting})"
    )
