"""POST /similar: turn a request into a query, rank, and keep the query for /explain."""

from __future__ import annotations

from app.core.config import ApiSettings
from app.schemas.similar import SimilarRequest
from app.services.limits import posted_document
from app.services.query_cache import CachedQuery
from app.services.state import ServiceState
from indexer.search.types import Query, SearchOptions, SearchResult


def build_query(state: ServiceState, request: SimilarRequest, limits: ApiSettings) -> Query:
    searcher = state.searcher
    if request.document_id is not None:
        return searcher.query_from_index(request.document_id)
    assert request.document is not None  # the schema guarantees one of the two
    posted = request.document.model_dump(exclude_none=True)
    posted["id"] = posted.get("id") or "query"
    _, document = posted_document(posted, searcher.splitter, limits, "document")
    return searcher.encode_document(document)


def similar(
    state: ServiceState, request: SimilarRequest, limits: ApiSettings
) -> tuple[SearchResult, str]:
    """Rank the collection for `request`; the result and the query_id under which /explain
    finds the query again."""
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
    return result, query_id
