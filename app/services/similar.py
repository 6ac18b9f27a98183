"""POST /similar: turn a request into a query, rank, and shape the response."""

from __future__ import annotations

import time

from app.api.schemas import DocumentResult, MatchOut, SimilarRequest, SimilarResponse, UnitResult
from app.core.config import ApiSettings
from app.services.limits import posted_document
from app.services.query_cache import CachedQuery
from app.services.state import ServiceState
from indexer.search import DocumentHit, Query, SearchOptions


def build_query(state: ServiceState, request: SimilarRequest, limits: ApiSettings) -> Query:
    searcher = state.searcher
    if request.document_id is not None:
        return searcher.query_from_index(request.document_id)
    assert request.document is not None  # the schema guarantees one of the two
    posted = request.document.model_dump(exclude_none=True)
    posted["id"] = posted.get("id") or "query"
    _, document = posted_document(posted, searcher.splitter, limits, "document")
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
            population=result.stats.population if result.stats is not None else None,
            candidates=tuple(request.candidates) if request.candidates is not None else None,
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
