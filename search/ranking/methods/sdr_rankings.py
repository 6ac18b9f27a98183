"""The methods built on SDR's paragraph matrix, whose best paragraph pairs explain each hit:
rows of the method table that rank a pool of their own in a scoring mode of their own.

- `sdr`: the paper's hierarchical scoring (`search.sdr_scorer`). Exhaustive mode scores every
  allowed document; candidate mode only those its first pass retrieves (`search.ranking.pool`),
  normalised over a fixed sample.
- `sdr-window`: `sdr` with the query's paragraphs cut into pseudo-paragraphs of `query_window`
  sentences, so that the per-paragraph z-score acts on a one-paragraph query.
- `hybrid`: reciprocal-rank fusion of the `bm25` row and `sdr`, score = sum 1 / (60 + rank).
- `fused`: weighted sum of the per-query normalised scores of `fusion`'s methods
  (`search.ranking.fusion`): SDR's own scores, and any other row's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import torch

from docsim.protocol.choices import Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.arrays import Positions, Scores
from docsim.search.errors import QueryError
from docsim.search.order import reciprocal_rank_fusion
from docsim.search.ranking.fusion import fuse
from docsim.search.ranking.pool import candidates, scoring_mode, sentences_of
from docsim.search.ranking.scorer import QueryScratch, RankedScores, Scorer, ScoringContext
from docsim.search.sdr_scorer import SdrScores
from docsim.search.types import Query

POOL_WIDENING_DEPTH = 1000  # a lexical method's documents added to SDR's candidates


@dataclass(frozen=True)
class SdrPass:
    """SDR's pass over one query: the documents it may rank (`allowed`), those SDR scored in
    `mode` (`scored`: all of them in exhaustive mode, the candidates otherwise) and its
    scores (None where the method does not weigh SDR)."""

    allowed: Positions
    scored: Positions
    sdr: SdrScores | None
    mode: ScoringMode


class SdrRanking(Scorer):
    """A method that ranks a pool of its own, in the mode its cost calls for, from SDR's
    scores and the other rows of the table (`methods`, the table's built rows)."""

    explains_with_pairs = True

    def __init__(
        self, context: ScoringContext, method: Method, methods: Mapping[Method, Scorer]
    ) -> None:
        super().__init__(context, method)
        self.methods = methods

    def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
        raise QueryError(f"method {self.method.value!r} is not a single-score method")

    @property
    def computes_sdr(self) -> bool:
        return True

    def rank(self, query: Query, options: SimilarOptions, allowed: Positions) -> RankedScores:
        """The scores of `allowed` (`-inf` outside the pool ranked), SDR scoring in the mode
        `options` asks for or the cost calls for."""
        mode = self.mode(query, options, allowed)
        scored = (
            allowed if mode is ScoringMode.exhaustive else candidates(self.context, query, allowed)
        )
        sdr = self.sdr_scores(query, options, scored, mode) if self.computes_sdr else None
        return self.combine(query, SdrPass(allowed, scored, sdr, mode))

    def combine(self, query: Query, sdr_pass: SdrPass) -> RankedScores:
        """SDR's ranking of the documents it scored; the fusions combine others'."""
        sdr, mode = sdr_pass.sdr, sdr_pass.mode
        stats = sdr.stats if sdr is not None and self.method is not Method.sdr_window else None
        return RankedScores(sdr_only(sdr), sdr_pass.scored, mode, self.method, sdr, stats)

    def mode(self, query: Query, options: SimilarOptions, allowed: Positions) -> ScoringMode:
        """Exact SDR costs the query's sentences times the collection's (a filter's few
        documents are scored exhaustively); the fusions without it score sentences through
        the compressed level or in candidate mode at a cost that does not favour candidate
        mode (benchmarks/candidate_cost.py)."""
        index = self.context.index
        sentences = (
            len(index.ids["sentence"]) if options.filter is None else sentences_of(index, allowed)
        )
        products_of = len(query.sentence_vectors) if self.computes_sdr else 0
        return scoring_mode(options, sentences, self.context.settings, products_of)

    def sdr_scores(
        self, query: Query, options: SimilarOptions, scored: Positions, mode: ScoringMode
    ) -> SdrScores:
        """SDR's scores of the documents `scored`: a filter normalises over the whole
        collection (each document scores as it would unfiltered) or over what it keeps
        (`filter_population`); a pool over itself."""
        settings = self.context.settings
        windowed_query = (
            windowed(query, settings.query_window) if self.method is Method.sdr_window else query
        )
        filtered = options.filter is not None and options.candidates is None
        whole = filtered and settings.filter_population == "collection"
        return self.context.sdr.score(
            windowed_query,
            scored,
            normalize=options.normalize,
            mode=mode,
            pooled=options.candidates is not None or (filtered and not whole),
            remember=self.method is not Method.sdr_window,
            whole_collection=whole,
        )

    def widened(
        self, query: Query, methods: Iterable[Method], sdr_pass: SdrPass, scratch: QueryScratch
    ) -> Positions:
        """The documents a fusion ranks: those SDR scored and, in candidate mode, the top
        documents of each pool-widening (lexical) row of `methods` (its scores kept in
        `scratch` for the fusion)."""
        allowed, scored, mode = sdr_pass.allowed, sdr_pass.scored, sdr_pass.mode
        if mode is ScoringMode.exhaustive:
            return scored
        pool = scored
        for m in methods:
            scorer = self.methods.get(m)
            if scorer is not None and scorer.widens_pool:
                found = scorer.scores(query, allowed, scratch)
                pool = np.union1d(pool, self.context.top(found, allowed, POOL_WIDENING_DEPTH))
        return pool


class Hybrid(SdrRanking):
    """Reciprocal-rank fusion of the `bm25` row's ranking and SDR's."""

    def combine(self, query: Query, sdr_pass: SdrPass) -> RankedScores:
        context, scratch = self.context, QueryScratch()
        scored, sdr = sdr_pass.scored, sdr_pass.sdr
        pool = self.widened(query, [Method.bm25], sdr_pass, scratch)
        bm25 = self.methods[Method.bm25].scores(query, sdr_pass.allowed, scratch)
        scores = reciprocal_rank_fusion(
            [context.top(bm25, pool, len(pool)), context.top(sdr_only(sdr), scored, len(scored))],
            context.index.n_documents,
        )
        stats = sdr.stats if sdr else None
        return RankedScores(scores, pool, sdr_pass.mode, self.method, sdr, stats)


class Fused(SdrRanking):
    """The weighted sum of the normalised scores of the rows `SearchSettings.fusion_weights`
    names (`search.ranking.fusion.fuse`), the best documents refined and fused again."""

    @property
    def computes_sdr(self) -> bool:
        return bool(dict(self.context.settings.fusion_weights).get(Method.sdr))

    def combine(self, query: Query, sdr_pass: SdrPass) -> RankedScores:
        context, settings, scratch = self.context, self.context.settings, QueryScratch()
        allowed, scored, sdr = sdr_pass.allowed, sdr_pass.scored, sdr_pass.sdr
        fusion = dict(settings.fusion_weights)
        pool = self.widened(query, fusion, sdr_pass, scratch)
        gates = settings.verbatim.fusion_gates  # methods counted by their outliers only
        components = {  # sentence matching only where SDR scored (candidate mode)
            m: sdr_only(sdr) if m is Method.sdr else self.component(m, query, scored, pool, scratch)
            for m, w in fusion.items()
            if w
        }
        scores = fuse(components, fusion, pool, settings.fusion_normaliser, gates, allowed)
        best = context.top(scores, pool, settings.scan.depth(len(pool)))  # refined
        for m in components:
            if m is not Method.sdr:
                components[m] = self.methods[m].refine(query, best, components[m], scratch)
        scores = fuse(components, fusion, pool, settings.fusion_normaliser, gates, allowed)
        stats = sdr.stats if sdr else None
        return RankedScores(scores, pool, sdr_pass.mode, self.method, sdr, stats)

    def component(
        self,
        method: Method,
        query: Query,
        scored: Positions,
        pool: Positions,
        scratch: QueryScratch,
    ) -> Scores:
        """The scores of one fused row: of the documents SDR scored for a row that scores
        only those it is given, else of the whole pool."""
        scorer = self.methods.get(method)
        if scorer is None:
            raise QueryError(f"method {method.value!r} is not a single-score method")
        return scorer.scores(query, scored if scorer.given_only else pool, scratch)


def sdr_only(scores: SdrScores | None) -> Scores:
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
