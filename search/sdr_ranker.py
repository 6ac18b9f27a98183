"""The methods built on SDR's paragraph matrix, whose best paragraph pairs explain each hit.

- `sdr`: the paper's hierarchical scoring (`search.sdr_scorer`). Exhaustive mode scores every
  allowed document; candidate mode only those centroid interaction retrieves
  (`search.candidates.centroids`; or the nearest units in the FAISS indices,
  `search.candidates.neighbours`), normalised over a fixed sample.
- `sdr-window`: `sdr` with the query's paragraphs cut into pseudo-paragraphs of `query_window`
  sentences, so that the per-paragraph z-score acts on a one-paragraph query.
- `hybrid`: reciprocal-rank fusion of `bm25` and `sdr`, score = sum 1 / (60 + rank).
- `fused`: weighted sum of the per-query normalised scores of `fusion`'s methods
  (`search.fusion`): SDR's own scores, and any registered scorer's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import torch
from sqlalchemy import Engine

from docsim.protocol.choices import Method, ScoringMode
from docsim.search.arrays import Positions, Scores
from docsim.search.candidates.centroids import searched
from docsim.search.candidates.neighbours import retrieve_candidates
from docsim.search.errors import QueryError
from docsim.search.fusion import fuse
from docsim.search.matches import document_hits
from docsim.search.ranking import reciprocal_rank_fusion
from docsim.search.scorers import QueryScratch, Scorer, ScoringContext
from docsim.search.sdr_scorer import SdrScores
from docsim.search.settings import SearchSettings
from docsim.search.types import DocumentHit, ParagraphStats, Query, SearchOptions, SearchResult

SDR_RANKED = frozenset({Method.sdr, Method.sdr_window, Method.hybrid, Method.fused})
POOL_WIDENING_DEPTH = 1000  # a lexical method's documents added to SDR's candidates


@dataclass(frozen=True)
class RankedScores:
    """One query's scores by an `SDR_RANKED` method: `scores` `(D,)` over the documents of
    `pool` (the ranked ones), SDR's own scores (`sdr`, for the hits' paragraph pairs) and the
    statistics it normalised with."""

    scores: Scores
    pool: Positions
    method: Method | None
    sdr: SdrScores | None
    stats: ParagraphStats | None


class SdrRanker:
    """Ranks by the `SDR_RANKED` methods over `context`, with `scorers` for the others that
    `hybrid` and `fused` combine; `sentence_doc` `(n,)` is each sentence row's document."""

    def __init__(
        self,
        context: ScoringContext,
        scorers: Mapping[Method, Scorer],
        engine: Engine,
        sentence_doc: Positions,
    ) -> None:
        self.context = context
        self.scorers = scorers
        self.engine = engine
        self.sentence_doc = sentence_doc

    def rank(
        self, query: Query, options: SearchOptions, allowed: Positions, mode: ScoringMode
    ) -> SearchResult:
        """The top `options.top_k` of `allowed` by `options.method`, SDR scoring in `mode`
        (`exhaustive` or `candidate`)."""
        scored = self.score(query, options, allowed, mode)
        ranked = self.context.top(scored.scores, scored.pool, options.top_k)
        hits = self.hits(query, scored, ranked, scored.scores, options.matches_per_result)
        return SearchResult(hits, mode=mode, scored_documents=len(scored.pool), stats=scored.stats)

    def hits(
        self,
        query: Query,
        scored: RankedScores,
        ranked: Positions,
        scores: Scores,
        matches_per_result: int,
    ) -> list[DocumentHit]:
        """The `ranked` documents with `scores`, each with its best paragraph pairs with
        `query` (as `scored`, the query's own scoring, found them)."""
        return self._hits(query, scored.method, scored.sdr, ranked, scores, matches_per_result)

    def score(
        self, query: Query, options: SearchOptions, allowed: Positions, mode: ScoringMode
    ) -> RankedScores:
        """The scores of `allowed` by `options.method` (`-inf` outside the pool it ranks),
        SDR scoring in `mode`."""
        method = options.method
        context, settings = self.context, self.context.settings
        scored = allowed if mode is ScoringMode.exhaustive else self.candidates(query, allowed)
        fusion = dict(settings.fusion_weights)
        sdr = None
        if self.scores_sdr(method):
            windowed_query = (
                windowed(query, settings.query_window) if method is Method.sdr_window else query
            )
            # a filter normalises over the whole collection (each document scores as it
            # would unfiltered) or over what it keeps (`filter_population`); a pool over itself
            filtered = options.filter is not None and options.candidates is None
            whole = filtered and settings.filter_population == "collection"
            sdr = context.sdr.score(
                windowed_query,
                scored,
                normalize=options.normalize,
                mode=mode,
                pooled=options.candidates is not None or (filtered and not whole),
                remember=method is not Method.sdr_window,
                whole_collection=whole,
            )
        scratch = QueryScratch()
        pool = self._pool(query, method, fusion, scored, allowed, mode, scratch)
        if method is Method.hybrid:
            bm25 = self._scorer(Method.bm25).scores(query, allowed, scratch)
            scores = reciprocal_rank_fusion(
                [context.top(bm25, pool, len(pool)), context.top(_sdr(sdr), scored, len(scored))],
                context.index.n_documents,
            )
        elif method is Method.fused:
            gates = settings.verbatim.fusion_gates  # methods counted by their outliers only
            components = {  # sentence matching only where SDR scored (candidate mode)
                m: _sdr(sdr)
                if m is Method.sdr
                else self._component(m, query, scored, pool, scratch)
                for m, w in fusion.items()
                if w
            }
            scores = fuse(components, fusion, pool, settings.fusion_normaliser, gates, allowed)
            best = context.top(scores, pool, settings.scan.depth(len(pool)))  # refined
            for m in components:
                if m is not Method.sdr:
                    components[m] = self.scorers[m].refine(query, best, components[m], scratch)
            scores = fuse(components, fusion, pool, settings.fusion_normaliser, gates, allowed)
        else:
            scores = _sdr(sdr)
        # the statistics of a windowed query are the windows', not the paragraphs'
        stats = sdr.stats if sdr is not None and method is not Method.sdr_window else None
        return RankedScores(scores, pool, method, sdr, stats)

    def scores_sdr(self, method: Method | None) -> bool:
        """Whether ranking by `method` computes SDR's paragraph matrix: every SDR-ranked
        method but a fusion that does not weigh `sdr`."""
        return method is not Method.fused or bool(
            dict(self.context.settings.fusion_weights).get(Method.sdr)
        )

    def candidates(self, query: Query, allowed: Positions) -> Positions:
        """Candidate mode's documents of `allowed` (ascending), found by the first pass
        `first_pass` chooses."""
        context, settings = self.context, self.context.settings
        generator = first_pass(settings, context.scan is not None, len(self.sentence_doc))
        if generator == "compressed" and context.scan is not None:
            return context.scan.candidates(
                query.sentence_vectors, allowed, settings.candidates.max_documents
            )
        if generator == "centroids" and context.centroids is not None:
            return searched(context.centroids.get(), query.sentence_vectors, allowed, settings)
        return retrieve_candidates(context.index, self.sentence_doc, query, allowed, settings)

    def _scorer(self, method: Method) -> Scorer:
        try:
            return self.scorers[method]
        except KeyError:
            raise QueryError(f"method {method.value!r} is not a single-score method") from None

    def _component(
        self,
        method: Method,
        query: Query,
        scored: Positions,
        pool: Positions,
        scratch: QueryScratch,
    ) -> Scores:
        scorer = self._scorer(method)
        return scorer.scores(query, scored if scorer.given_only else pool, scratch)

    def _pool(
        self,
        query: Query,
        method: Method | None,
        fusion: Mapping[Method, float],
        scored: Positions,
        allowed: Positions,
        mode: ScoringMode,
        scratch: QueryScratch,
    ) -> Positions:
        """The documents ranked: those SDR scored and, for the fusions in candidate mode,
        the top documents of each pool-widening (lexical) method they combine (its scores
        kept in `scratch` for the fusion)."""
        if method not in (Method.hybrid, Method.fused) or mode is ScoringMode.exhaustive:
            return scored
        pool = scored
        for m in fusion if method is Method.fused else [Method.bm25]:
            scorer = self.scorers.get(m)
            if scorer is not None and scorer.widens_pool:
                found = scorer.scores(query, allowed, scratch)
                pool = np.union1d(pool, self.context.top(found, allowed, POOL_WIDENING_DEPTH))
        return pool

    def _hits(
        self,
        query: Query,
        method: Method | None,
        sdr: SdrScores | None,
        ranked: Positions,
        scores: Scores,
        matches_per_result: int,
    ) -> list[DocumentHit]:
        sdr_scorer = self.context.sdr
        shown = np.sort(ranked) if matches_per_result > 0 else ranked[:0]
        if sdr is None or method is Method.sdr_window:  # pairs of real paragraphs: raw P
            explaining = sdr_scorer.explain_columns(query, shown, None)
        elif sdr.pmatrix is None or (sdr.first_column[shown] < 0).any():
            # scored on shards, or ranked without SDR scoring it (a lexical method's pool, or
            # another example's candidates): the ranked documents' columns here
            explaining = sdr_scorer.explain_columns(query, shown, sdr.stats)
        else:
            explaining = sdr
        return document_hits(
            self.context.index,
            self.engine,
            query,
            ranked,
            scores,
            explaining.pmatrix,
            explaining.first_column,
            matches_per_result,
        )


def first_pass(settings: SearchSettings, compressed: bool, n_sentences: int) -> str:
    """The candidate generator candidate mode runs (`SearchSettings.candidates.generator`,
    with `auto` resolved): `compressed` where the compressed level is served (`compressed`)
    and the collection holds at most `candidates.scan_max_sentences` sentences, else
    `centroids`; `compressed` asked for without that level falls back to `centroids`."""
    generator = settings.candidates.generator
    if generator == "auto":
        small = n_sentences <= settings.candidates.scan_max_sentences
        return "compressed" if compressed and small else "centroids"
    if generator == "compressed" and not compressed:
        return "centroids"
    return generator


def _sdr(scores: SdrScores | None) -> Scores:
    if scores is None:
        raise QueryError("this fusion does not weigh sdr")
    return scores.scores


def windowed(query: Query, size: int) -> Query:
    """`query` with each paragraph cut into pseudo-paragraphs of `size` consecutive sentences
    (the last of a paragraph may be shorter); spans follow the sentences."""
    lengths = []
    for length in query.paragraph_lengths.tolist():
        full, rest = divmod(length, size)
        lengths += [size] * full + ([rest] if rest else [])
    sentence_spans = query.level_spans.get("sentence") or []
    ends = np.cumsum(lengths)
    paragraphs = (
        [
            (sentence_spans[e - n][0], sentence_spans[e - 1][1])
            for n, e in zip(lengths, ends, strict=True)
        ]
        if len(sentence_spans) == int(query.paragraph_lengths.sum())
        else []
    )
    return replace(
        query, paragraph_lengths=torch.tensor(lengths, dtype=torch.long), paragraphs=paragraphs
    )
