"""POST /similar: turn a request into a query, rank, and keep the query for /explain."""

from __future__ import annotations

from docsim.app.core.settings import ServiceSettings
from docsim.app.services.limits import check_search, posted_document, split_within_limits
from docsim.app.services.query_cache import CachedQuery
from docsim.app.services.state import ServiceState
from docsim.app.services.uploads import UploadedFile, read_upload, upload_limits
from docsim.protocol.requests import Example, SimilarOptions, SimilarRequest
from docsim.search.api import Query, SearchResult
from docsim.search.errors import QueryError

NO_QUERY = "a query needs a `document`, a `document_id`, `like` or an uploaded file"


def build_query(
    state: ServiceState,
    request: SimilarOptions,
    settings: ServiceSettings,
    upload: UploadedFile | None = None,
) -> Query:
    """The query: the uploaded file, else the request's posted or indexed document (its first
    `like`)."""
    if upload is not None:
        return upload_query(state, settings, upload)
    if not isinstance(request, SimilarRequest):  # an upload's options without its file
        raise QueryError(NO_QUERY)
    return example_query(state, request.likes()[0], settings, "document")


def upload_query(state: ServiceState, settings: ServiceSettings, upload: UploadedFile) -> Query:
    searcher = state.searcher
    source = read_upload(upload, upload_limits(settings), doc_id="query")
    what = f"file {upload.name!r}" if upload.name else "the uploaded file"
    return searcher.encode_document(
        split_within_limits(source, searcher.splitter, settings.api, what)
    )


def example_query(
    state: ServiceState, example: Example, settings: ServiceSettings, where: str
) -> Query:
    """An example's query: its indexed document's vectors, or its posted document encoded
    (`where` names it in errors)."""
    searcher = state.searcher
    if example.document_id is not None:
        return searcher.query_from_index(example.document_id)
    if example.document is None:  # the schema refuses such a body; a caller may not
        raise QueryError(NO_QUERY)
    posted = example.document.model_dump(exclude_none=True)
    posted["id"] = posted.get("id") or "query"
    _, document = posted_document(posted, searcher.splitter, settings.api, where)
    return searcher.encode_document(document)


def similar(
    state: ServiceState,
    request: SimilarOptions,
    settings: ServiceSettings,
    upload: UploadedFile | None = None,
) -> tuple[SearchResult, str]:
    """Rank the collection for `request` (its document in `upload` when a file was posted);
    the result and the query_id under which /explain finds the query again."""
    check_search(request, settings.api)
    likes: list[Query]
    unlikes: list[Query] = []
    if upload is not None or not isinstance(request, SimilarRequest):
        likes = [build_query(state, request, settings, upload)]
        document_id = None
    else:
        examples = request.likes()
        likes = [
            example_query(state, e, settings, f"like[{i}]" if request.like else "document")
            for i, e in enumerate(examples)
        ]
        unlikes = [
            example_query(state, e, settings, f"unlike[{i}]")
            for i, e in enumerate(request.unlike or [])
        ]
        document_id = examples[0].document_id
    query = likes[0]  # /explain pairs a target with the first example
    # ranked to `offset + top_k`: the page is cut from the whole ranking
    result = state.searcher.similar_to_examples(likes, unlikes, request)
    query_id = state.queries.put(
        CachedQuery(
            query=query if document_id is None else None,
            stats=result.stats,
            normalize=request.normalize,
            document_id=document_id,
            population=result.stats.population if result.stats is not None else None,
            candidates=tuple(request.candidates) if request.candidates is not None else None,
            filter=request.filter_tree(),
        )
    )
    return result, query_id
