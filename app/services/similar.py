"""POST /similar: turn a request into a query, rank, and keep the query for /explain."""

from __future__ import annotations

from app.core.config import ServiceSettings
from app.schemas.similar import SimilarOptions, SimilarRequest
from app.services.limits import posted_document, split_within_limits
from app.services.query_cache import CachedQuery
from app.services.state import ServiceState
from app.services.uploads import UploadedFile, read_upload
from indexer.api import FileLimits, Query, SearchOptions, SearchResult, parse_filter
from indexer.errors import QueryError

NO_QUERY = "a query needs a `document`, a `document_id` or an uploaded file"


def build_query(
    state: ServiceState,
    request: SimilarOptions,
    settings: ServiceSettings,
    upload: UploadedFile | None = None,
) -> Query:
    """The query: the uploaded file, else the request's posted or indexed document."""
    searcher, limits = state.searcher, settings.api
    if upload is not None:
        source = read_upload(upload, FileLimits(**settings.files.model_dump()), doc_id="query")
        what = f"file {upload.name!r}" if upload.name else "the uploaded file"
        return searcher.encode_document(
            split_within_limits(source, searcher.splitter, limits, what)
        )
    if not isinstance(request, SimilarRequest):  # an upload's options without its file
        raise QueryError(NO_QUERY)
    if request.document_id is not None:
        return searcher.query_from_index(request.document_id)
    if request.document is None:  # the schema refuses such a body; a caller may not
        raise QueryError(NO_QUERY)
    posted = request.document.model_dump(exclude_none=True)
    posted["id"] = posted.get("id") or "query"
    _, document = posted_document(posted, searcher.splitter, limits, "document")
    return searcher.encode_document(document)


def similar(
    state: ServiceState,
    request: SimilarOptions,
    settings: ServiceSettings,
    upload: UploadedFile | None = None,
) -> tuple[SearchResult, str]:
    """Rank the collection for `request` (its document in `upload` when a file was posted);
    the result and the query_id under which /explain finds the query again."""
    query = build_query(state, request, settings, upload)
    document_id = getattr(request, "document_id", None)
    options = SearchOptions(
        top_k=request.offset + request.top_k,  # the page is cut from the whole ranking
        granularity=request.granularity,
        method=request.method,
        normalize=request.normalize,
        mode=request.mode,
        candidates=request.candidates,
        filter=parse_filter(request.filter.data()) if request.filter is not None else None,
        group_by=request.group_by,
        group_size=request.group_size,
    )
    result = state.searcher.similar(query, options)
    query_id = state.queries.put(
        CachedQuery(
            query=query if document_id is None else None,
            stats=result.stats,
            normalize=request.normalize,
            document_id=document_id,
            population=result.stats.population if result.stats is not None else None,
            candidates=tuple(request.candidates) if request.candidates is not None else None,
            filter=options.filter,
        )
    )
    return result, query_id
