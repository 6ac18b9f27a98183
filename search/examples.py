"""Ranking a version's documents (or units) like some example documents and unlike others:
the work behind `Searcher.similar_to_examples`, over the scorers a `Searcher` builds.

A request's documents are ranked by its method's scorer (`search.scorers`) or by one
of SDR's rankings (`search.sdr_ranker`), each example on its own, then combined;
other granularities rank sections, paragraphs or sentences (`search.units`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import torch
from sqlalchemy import Engine

from docsim.indexer.errors import DocumentNotFoundError
from docsim.protocol.choices import Granularity, Method, Population, ScoringMode
from docsim.search.arrays import Positions, Scores
from docsim.search.errors import QueryError
from docsim.search.filters import Filter
from docsim.search.matches import add_shared_passages, document_hits
from docsim.search.scorers import QueryScratch, Scorer, ScoringContext
from docsim.search.sdr_ranker import SDR_RANKED, RankedScores, SdrRanker
from docsim.search.settings import SearchSettings
from docsim.search.types import (
    WHOLE_DOCUMENT_ONLY,
    ParagraphStats,
    Query,
    SearchOptions,
    SearchResult,
)
from docsim.search.units import similar_units


class ExampleRanker:
    """Ranks one version's documents for a request: its method's scores of each example,
    combined, the ranked hits and their evidence. `position` maps external ids to positions."""

    def __init__(
        self,
        context: ScoringContext,
        scorers: Mapping[Method, Scorer],
        sdr_ranker: SdrRanker,
        engine: Engine,
        position: Mapping[str, int],
    ) -> None:
        self.context = context
        self.index = context.index
        self.settings = context.settings
        self.scorers = scorers
        self.sdr_ranker = sdr_ranker
        self.engine = engine
        self.position = position

    def similar_to_examples(
        self, likes: Sequence[Query], unlikes: Sequence[Query], options: SearchOptions
    ) -> SearchResult:
        """`Searcher.similar_to_examples`."""
        if not likes:
            raise QueryError("give at least one document to rank like (`like`)")
        method = self.method(options)
        options = replace(options, method=method)
        if options.granularity is not Granularity.document:
            if method in WHOLE_DOCUMENT_ONLY:
                raise QueryError(
                    f"method {method.value!r} ranks whole documents; "
                    "use granularity 'document' or method 'sdr' / 'document'"
                )
            if unlikes:
                raise QueryError("`unlike` applies to whole documents (granularity 'document')")
            return replace(self._similar_units(likes, options), method=method)
        if options.group_by is not None:
            raise QueryError(
                "group_by groups the units of granularity 'section', 'paragraph' or "
                "'sentence'; granularity 'document' has one result per document already"
            )
        examples = [*likes, *unlikes]
        runs = [  # each as it would be ranked alone, its own source left out
            self._document_scores(
                query,
                options,
                self.allowed(query, options.candidates, options.filter, options.exclude),
            )
            for query in examples
        ]
        first, mode = runs[0]
        if len(examples) == 1:
            scores, pool = first.scores, first.pool
        else:
            sources = [q.source_index for q in examples if q.source_index is not None]
            scores, pool = combined([r for r, _ in runs], len(likes))
            pool = pool[~np.isin(pool, sources)]
        ranked = self.context.top(scores, pool, options.top_k)
        if method in SDR_RANKED:
            hits = self.sdr_ranker.hits(likes[0], first, ranked, scores, options.matches_per_result)
        else:
            hits = document_hits(self.index, self.engine, likes[0], ranked, scores)
        add_shared_passages(
            self.index, self.engine, likes[0].text, hits, ranked, options.shared_passages,
            self.settings.verbatim.passage_words,
        )  # fmt: skip
        return SearchResult(
            hits, mode=mode, scored_documents=len(pool), stats=first.stats, method=method
        )

    def method(self, options: SearchOptions) -> Method:
        """The request's method: its own, else the default (units: their vectors' cosine)."""
        if options.method is not None:
            return options.method
        if options.granularity is Granularity.document:
            return self.settings.default_method
        return Method.sdr  # units are ranked by their vectors' cosine, whatever the default

    def _document_scores(
        self, query: Query, options: SearchOptions, allowed: Positions
    ) -> tuple[RankedScores, ScoringMode]:
        """`query`'s scores of the `allowed` documents by `options.method`, and the mode."""
        method = options.method
        assert method is not None
        if method in SDR_RANKED:
            sentences = (  # a filter's few documents are scored exhaustively
                len(self.index.ids["sentence"])
                if options.filter is None
                else self._sentences_of(allowed)
            )
            # exact SDR costs the query's sentences times the collection's; the fusions
            # without it score sentences through the compressed level or in candidate mode
            # at a cost that does not favour candidate mode (benchmarks/candidate_cost.py)
            products_of = len(query.sentence_vectors) if self.sdr_ranker.scores_sdr(method) else 0
            mode = scoring_mode(options, sentences, self.settings, products_of)
            return self.sdr_ranker.score(query, options, allowed, mode), mode
        scores = self.scorers[method].scores(query, allowed, QueryScratch())
        return RankedScores(scores, allowed, method, None, None), ScoringMode.exhaustive

    def population_stats(
        self,
        query: Query,
        population: Population,
        candidates: Sequence[str] | None = None,
        filter: Filter | None = None,
    ) -> ParagraphStats:
        """`Searcher.population_stats`."""
        sdr = self.context.sdr
        if population is Population.sample:
            return sdr.sample_stats(query)
        if population is Population.pool:
            if candidates is None and filter is None:
                raise QueryError("a pool population needs its candidates or filter")
            docs = self.allowed(query, candidates, filter)
        else:
            docs = self.allowed(query, None)
        if not len(docs):
            raise QueryError("the population holds no document to normalise over")
        return sdr.stats_over(query, docs, population)

    def allowed(
        self,
        query: Query,
        candidates: Sequence[str] | None,
        filter: Filter | None = None,
        exclude: Sequence[str] = (),
    ) -> Positions:
        """The positions `query` may rank: the `candidates` (all when None) that `filter`
        keeps, minus the query's source and the documents `exclude` names (those this version
        holds)."""
        allowed = allowed_positions(self.position, self.index.n_documents, query, candidates)
        if filter is not None:
            allowed = allowed[self.index.filter_columns.mask(filter)[allowed]]
        if exclude:
            left_out = [self.position[d] for d in exclude if d in self.position]
            allowed = allowed[~np.isin(allowed, left_out)]
        return allowed

    def _sentences_of(self, allowed: Positions) -> int:
        """How many sentences the documents at `allowed` hold."""
        start = self.index.doc_unit_start["sentence"]
        return int((start[allowed + 1] - start[allowed]).sum())

    def _similar_units(self, likes: Sequence[Query], options: SearchOptions) -> SearchResult:
        level = options.granularity.value
        sources = [q.source_index for q in likes if q.source_index is not None]
        allowed = None
        if options.candidates is not None or options.filter is not None:
            allowed = self.allowed(likes[0], options.candidates, options.filter, options.exclude)
        vectors = torch.cat([self.context.level_vectors(q, level) for q in likes]).numpy()
        return similar_units(
            self.index,
            self.engine,
            level,
            vectors,  # (m, d) every like's units
            excluded=sources,
            allowed=allowed,
            top_k=options.top_k,
            seed=self.settings.seed,
            group_size=options.group_size if options.group_by == "document" else None,
        )


def scoring_mode(
    options: SearchOptions, n_sentences: int, settings: SearchSettings, query_sentences: int = 0
) -> ScoringMode:
    """`options.mode`, with `auto` resolved by cost: exhaustive over a pool, or over a
    collection (or the documents a filter keeps) of `n_sentences` sentences, at most
    `exhaustive.max_sentences`, whose products with the query's `query_sentences` are at most
    `exhaustive.max_products`; else candidate."""
    if options.mode is not ScoringMode.auto:
        return options.mode
    if options.candidates is not None:
        return ScoringMode.exhaustive
    if (
        n_sentences <= settings.exhaustive.max_sentences
        and n_sentences * query_sentences <= settings.exhaustive.max_products
    ):
        return ScoringMode.exhaustive
    return ScoringMode.candidate


def allowed_positions(
    positions: Mapping[str, int],
    n_documents: int,
    query: Query,
    candidates: Sequence[str] | None,
) -> Positions:
    """Document positions that may be ranked (all `n_documents`, or the pool of `candidates`,
    placed by `positions`), minus the query's source.

    Raises:
        DocumentNotFoundError: a candidate is not in this version.
    """
    if candidates is None:
        allowed = np.arange(n_documents)
    else:
        missing = [c for c in candidates if c not in positions]
        if missing:
            raise DocumentNotFoundError(
                f"{len(missing)} candidate(s) not in the active index, e.g. {missing[:3]}"
            )
        allowed = np.unique(np.array([positions[c] for c in candidates], dtype=np.int64))
    if query.source_index is not None:
        allowed = allowed[allowed != query.source_index]
    return allowed


def combined(runs: Sequence[RankedScores], n_likes: int) -> tuple[Scores, Positions]:
    """The mean of the first `n_likes` runs' scores minus the mean of the others', over the
    union of the likes' pools; a document outside a run's pool counts that run's lowest."""
    pool = np.unique(np.concatenate([r.pool for r in runs[:n_likes]]))
    out = np.full(len(runs[0].scores), -np.inf)
    total = np.zeros(len(pool))
    n_unlikes = len(runs) - n_likes
    for i, run in enumerate(runs):
        floor = float(run.scores[run.pool].min()) if len(run.pool) else 0.0
        held = np.where(np.isin(pool, run.pool), run.scores[pool], floor)
        total += held / n_likes if i < n_likes else -held / n_unlikes
    out[pool] = total
    return out, pool
