"""GET /explain: resolve the source, explain the pair, and shape it as json, png or html."""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from app.api.schemas import (
    AlignmentOut,
    ChunkOut,
    ExplainResponse,
    ParagraphMatrixOut,
    ParagraphOut,
    SectionOut,
    SentenceAlignmentOut,
    SentenceOut,
    SideOut,
    StatisticsOut,
    TopPairOut,
)
from app.core.config import ApiSettings
from app.core.errors import SourceNotFoundError
from app.services.query_cache import CachedQuery
from app.services.state import ServiceState
from indexer.explain import Explanation, Side, explain_pair
from indexer.search import DocumentNotFoundError, ParagraphStats, Query, Searcher

DECIMALS = 5


def resolve_source(
    state: ServiceState, source: str, ttl_seconds: float
) -> tuple[Query, str, ParagraphStats | None]:
    """The source query, its kind and the statistics its ranking normalised with."""
    searcher = state.searcher
    cached = state.queries.get(source)
    if cached is not None:
        query = cached.query
        if query is None:  # a query by document id carried over from an older version
            try:
                query = searcher.query_from_index(cached.document_id)
            except DocumentNotFoundError:
                raise SourceNotFoundError(
                    f"query {source!r} was for document {cached.document_id!r}, which the "
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
            f"expire after {ttl_seconds:g} s, when the query cache is full, or when a new index "
            "version is loaded; run POST /similar again for a new one"
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
        return searcher.population_stats(query, cached.population, cached.candidates)
    except DocumentNotFoundError:
        raise SourceNotFoundError(
            f"query {source!r} ranked a pool of candidates that the active index no longer "
            "holds in full; run POST /similar again for a new query_id"
        ) from None


def explain(state: ServiceState, source: str, target: str, limits: ApiSettings) -> Explanation:
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
    )


def _rounded(matrix: torch.Tensor) -> list[list[float]]:
    return matrix.double().round(decimals=DECIMALS).tolist()


def _side_out(side: Side) -> SideOut:
    return SideOut(
        ref=side.ref,
        kind=side.kind,
        title=side.title,
        text=side.text,
        sections=[
            SectionOut(index=i, title=title, start=s.start, end=s.end)
            for i, (title, s) in enumerate(zip(side.section_titles, side.sections, strict=True))
        ],
        paragraphs=[
            ParagraphOut(index=i, section=side.paragraph_section[i], start=p.start, end=p.end)
            for i, p in enumerate(side.paragraphs)
        ],
        sentences=[
            SentenceOut(index=k, paragraph=side.sentence_paragraph[k], start=s.start, end=s.end)
            for k, s in enumerate(side.sentences)
        ],
        chunks=[
            ChunkOut(
                index=c,
                section=side.chunk_section[c],
                start=s.start,
                end=s.end,
                text=side.text[s.start : s.end],
            )
            for c, s in enumerate(side.chunks)
        ],
    )


def to_response(explanation: Explanation, state: ServiceState, started: float) -> ExplainResponse:
    alignment = explanation.alignment
    stats = explanation.stats
    source_paragraph = explanation.source.sentence_paragraph
    per_paragraph: list[list[SentenceAlignmentOut]] = [[] for _ in explanation.source.paragraphs]
    for k, (r, score) in enumerate(
        zip(alignment.sentence_target.tolist(), alignment.sentence_score.tolist(), strict=True)
    ):
        per_paragraph[source_paragraph[k]].append(
            SentenceAlignmentOut(source_sentence=k, target_sentence=r, score=round(score, DECIMALS))
        )
    best = alignment.best_paragraph.tolist()
    return ExplainResponse(
        index_version=state.version_id,
        encoder=state.encoder_name,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
        source=_side_out(explanation.source),
        target=_side_out(explanation.target),
        score=explanation.score,
        normalized=stats is not None,
        document_cosine=explanation.document_cosine,
        statistics=(
            StatisticsOut(
                population=stats.population,
                documents=stats.documents,
                mean=stats.stats.mean.tolist(),
                std=stats.stats.std.tolist(),
            )
            if stats is not None
            else None
        ),
        section_matrix=_rounded(explanation.section_matrix),
        chunk_matrix=_rounded(explanation.chunk_matrix),
        paragraph_matrix=ParagraphMatrixOut(
            raw=_rounded(alignment.paragraphs), normalized=_rounded(alignment.normalized)
        ),
        alignments=[
            AlignmentOut(
                source_paragraph=i,
                target_paragraph=j,
                score=float(alignment.paragraphs[i, j]),
                z=float(alignment.normalized[i, j]),
                sentences=per_paragraph[i],
            )
            for i, j in enumerate(best)
        ],
        top_pairs=[TopPairOut(**vars(p)) for p in explanation.top_pairs],
        chunk_attention=(
            {k: _rounded(v) for k, v in explanation.chunk_attention.items()}
            if explanation.chunk_attention is not None
            else None
        ),
    )
