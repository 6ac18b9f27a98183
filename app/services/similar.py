"""POST /similar: turn a request into a query, rank, and shape the response."""

from __future__ import annotations

import time

from app.api.schemas import DocumentResult, MatchOut, SimilarRequest, SimilarResponse, UnitResult
from app.core.config import ApiSettings
from app.core.errors import DocumentTooLargeError
from app.services.query_cache import CachedQuery
from app.services.state import ServiceState
from indexer.corpus import json_document
from indexer.documents import SourceDocument
from indexer.search import DocumentHit, Query, SearchOptions
from indexer.split import EmptyDocumentError, split_document


def build_query(state: ServiceState, request: SimilarRequest, limits: ApiSettings) -> Query:
    searcher = state.searcher
    if request.document_id is not None:
        return searcher.query_from_index(request.document_id)
    assert request.document is not None  # the schema guarantees one of the two
    posted = request.document.model_dump(exclude_none=True)
    size = len(posted.get("text", "")) + sum(
        len(s["text"]) + len(s["title"]) for s in posted.get("sections", [])
    )
    if size > limits.max_document_bytes:
        raise DocumentTooLargeError(
            f"document has {size} characters; the limit is {limits.max_document_bytes}"
        )
    posted["id"] = posted.get("id") or "query"
    source = json_document(posted, "")
    if not isinstance(source, SourceDocument):
        raise EmptyDocumentError(f"document is empty or invalid: {source.reason}")
    document = split_document(source, searcher.splitter)
    n_sentences = document.counts()["sentence"]
    if n_sentences > limits.max_sentences:
        raise DocumentTooLargeError(
            f"document has {n_sentences} sentences; the limit is {limits.max_sentences}"
        )
    return searcher.encode_document(document)


def similar(state: ServiceState, request: SimilarRequest, limits: ApiSettings) -> SimilarResponse:
    started = time.perf_counter()
    query = build_query(state, request, limits)
    options = SearchOptions(
        top_k=request.top_k,
        granularity=request.granularity,
        method=request.method,
        normalize=request.normalize,
        mode=request.mode,
        candidates=request.candidates,
    )
    result = state.searcher.similar(query, options)
    if result.results and isinstance(result.results[0], DocumentHit):
        results: list[DocumentResult] | list[UnitResult] = [
            DocumentResult(
                document_id=h.document_id,
                title=h.title,
                score=h.score,
                rank=h.rank,
                matches=[MatchOut(**vars(m)) for m in h.matches],
            )
            for h in result.results
        ]
    else:
        results = [UnitResult(**vars(h)) for h in result.results]
    query_id = state.queries.put(
        CachedQuery(
            query=query if request.document_id is None else None,
            stats=result.stats,
            normalize=request.normalize,
            document_id=request.document_id,
        )
    )
    return SimilarResponse(
        query_id=query_id,
        index_version=state.version_id,
        encoder=state.encoder_name,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
        mode=result.mode,
        method=request.method,
        granularity=request.granularity,
        normalize=request.normalize,
        scored_documents=result.scored_documents,
        results=results,
    )
