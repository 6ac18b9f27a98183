"""POST /similar: the multipart form of the request (its JSON body and options are the
protocol's, `docsim.protocol.requests`), and the answer built from a search's result."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from docsim.app.schemas.common import took_ms
from docsim.protocol.answers import (
    SimilarResponse,
)
from docsim.protocol.bodies import as_form
from docsim.protocol.requests import OPTION_RULES, SimilarOptions
from docsim.search.api import Granularity, SearchResult


class SimilarUpload(SimilarOptions):
    """The multipart body: the query document as a file (PDF, Word, HTML, text or Markdown,
    told by its content) in `file`, and the options as form fields."""

    model_config = ConfigDict(json_schema_extra=lambda schema: _upload_schema(schema))

    file: bytes = Field(description="The query document's file.")


def _upload_schema(schema: dict[str, Any]) -> None:
    """`SimilarUpload`'s JSON schema, as a form's, with the options' rules."""
    as_form(schema)
    schema["allOf"] = OPTION_RULES


def _more(
    results: list[Any],
    end: int,
    granularity: Granularity,
    result: SearchResult,
    request_grouped: bool,
) -> bool:
    """Whether a page ending at `end` may have a next: documents are as many as were scored;
    ungrouped units, as long as the ranking filled every place asked (grouped units come in
    one page)."""
    if granularity is Granularity.document:
        return end < result.scored_documents
    return len(results) == end and request_grouped is False


def similar_response(
    result: SearchResult,
    request: SimilarOptions,
    *,
    query_id: str,
    index_version: int,
    index_revision: int,
    encoder: str,
    started: float,
) -> SimilarResponse:
    """The answer to `request`, ranked as `result` by `encoder` over `index_version` (its
    results from the request's `offset` on); `started` is the request's
    `time.perf_counter()` reading."""
    results = result.results  # the wire's models already
    end = request.offset + request.top_k
    method = result.method or request.method
    if method is None:  # `Searcher.similar` names the method it ranked by, always
        raise ValueError("a search result names no method")
    return SimilarResponse(
        query_id=query_id,
        index_version=index_version,
        index_revision=index_revision,
        encoder=encoder,
        took_ms=took_ms(started),
        mode=result.mode,
        method=method,
        granularity=request.granularity,
        normalize=request.normalize,
        scored_documents=result.scored_documents,
        results=results[request.offset :],
        next_offset=end
        if _more(results, end, request.granularity, result, request.group_by is not None)
        else None,
    )
