"""GET /explain: resolve the source (a live query_id or an indexed document) and explain the
pair; `app.render` draws the explanation, `ExplainResponse.from_explanation` shapes it."""

from __future__ import annotations

from dataclasses import replace

from docsim.app.core.errors import SourceNotFoundError
from docsim.app.core.settings import ApiSettings
from docsim.app.services.query_cache import CachedQuery
from docsim.app.services.state import ServiceState
from docsim.indexer.errors import DocumentNotFoundError
from docsim.search.api import PairExplanation, ParagraphStats, Query, Searcher, explain_pair


def resolve_source(
    state: ServiceState, source: str, ttl_seconds: float
) -> tuple[Query, str, ParagraphStats | None]:
    """The source query, its kind and the statistics its ranking normalised with."""
    searcher = state.searcher
    cached = state.queries.get(source)
    if cached is not None:
        query, document_id = cached.query, cached.document_id
        if query is None:  # a query by document id carried over from an older version
            if document_id is None:
                raise ValueError(f"query {source!r} was cached with neither vectors nor an id")
            try:
                query = searcher.query_from_index(document_id)
            except DocumentNotFoundError:
                raise SourceNotFoundError(
                    f"query {source!r} was for document {document_id!r}, which the "
                    "active index no longer has"
                ) from None
        stats = cached.stats if cached.normalize else None
        if cached.normalize and stats is None:
            stats = _stats_again(searcher, query, source, cached)
            state.queries.update(source, replace(cached, stats=stats))
        return query, "query", stats
    try:
        query = searcher.query_from_index(source)
    except DocumentNotFoundError:
        raise SourceNotFoundError(
            f"source {source!r} is neither an indexed document nor a live query_id: query ids "
            f"expire after {ttl_seconds:g} s, or sooner when the query cache is full; run POST "
            "/similar again for a new one"
        ) from None
    return query, "document", searcher.ranking_stats(query)


def _stats_again(
    searcher: Searcher, query: Query, source: str, cached: CachedQuery
) -> ParagraphStats:
    """Statistics for a query whose ranking did not normalise with SDR (the default ranking's),
    or whose statistics belong to an older version (the same kind of population again)."""
    if cached.population is None:
        return searcher.ranking_stats(query)
    try:
        return searcher.population_stats(query, cached.population, cached.candidates, cached.filter)
    except DocumentNotFoundError:
        raise SourceNotFoundError(
            f"query {source!r} ranked a pool of candidates that the active index no longer "
            "holds in full; run POST /similar again for a new query_id"
        ) from None


def explain(state: ServiceState, source: str, target: str, limits: ApiSettings) -> PairExplanation:
    query, kind, stats = resolve_source(state, source, limits.query_cache_ttl_seconds)
    return explain_pair(
        state.searcher,
        query,
        source,
        kind,
        target,
        stats,
        max_cells=limits.explain_max_cells,
        top_pairs=limits.explain_top_pairs,
        passage_words=state.searcher.settings.verbatim.passage_words,
        passages=limits.explain_passages,
    )
