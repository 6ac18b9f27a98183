"""The ranking pipeline: a request's stages in order (`search.ranking` lists them), over the
rows of the method table that a `Searcher` builds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import torch
from sqlalchemy import Engine

from docsim.protocol.choices import WHOLE_DOCUMENT_ONLY, Granularity, Method, Population
from docsim.protocol.filters import Filter
from docsim.protocol.requests import SimilarOptions
from docsim.search.arrays import Positions
from docsim.search.errors import QueryError
from docsim.search.ranking.examples import combined
from docsim.search.ranking.matches import add_shared_passages, document_hits, paragraph_hits
from docsim.search.ranking.pool import allowed
from docsim.search.ranking.scorer import Scorer, ScoringContext
from docsim.search.types import ParagraphStats, Query, SearchResult
from docsim.search.units import similar_units


class RankingPipeline:
    """Ranks one version's documents for a request by the rows `scorers` (one per method) over
    `context`; `position` maps external ids to positions, `engine` reads the hits' texts."""

    def __init__(
        self,
        context: ScoringContext,
        scorers: Mapping[Method, Scorer],
        engine: Engine,
        position: Mapping[str, int],
    ) -> None:
        self.context = context
        self.scorers = scorers
        self.engine = engine
        self.position = position

    def similar_to_examples(
        self, likes: Sequence[Query], unlikes: Sequence[Query], options: SimilarOptions
    ) -> SearchResult:
        """`Searcher.similar_to_examples`: the request checked, each example ranked alone
        (its own source left out), the runs combined, the top `offset + top_k` and their
        evidence."""
        method = self.method(options)
        options = options.model_copy(update={"method": method})
        checked(likes, unlikes, options, method)
        if options.granularity is not Granularity.document:
            return replace(self.similar_units(likes, options), method=method)
        scorer = self.scorers[method]
        examples = [*likes, *unlikes]
        runs = [scorer.rank(query, options, self.allowed(query, options)) for query in examples]
        first = runs[0]
        scores, pool = first.scores, first.pool
        if len(examples) > 1:
            sources = [q.source_index for q in examples if q.source_index is not None]
            scores, pool = combined(runs, len(likes))
            pool = pool[~np.isin(pool, sources)]
        ranked = self.context.top(scores, pool, options.depth())
        if scorer.explains_with_pairs:
            hits = paragraph_hits(
                self.context, self.engine, likes[0], first, ranked, scores,
                options.matches_per_result,
            )  # fmt: skip
        else:
            hits = document_hits(self.context.index, self.engine, likes[0], ranked, scores)
        add_shared_passages(
            self.context.index, self.engine, likes[0].text, hits, ranked,
            options.shared_passages, self.context.settings.verbatim.passage_words,
        )  # fmt: skip
        return SearchResult(
            hits, mode=first.mode, scored_documents=len(pool), stats=first.stats, method=method
        )

    def method(self, options: SimilarOptions) -> Method:
        """The request's method: its own, else the default (units: their vectors' cosine)."""
        if options.method is not None:
            return options.method
        if options.granularity is Granularity.document:
            return self.context.settings.default_method
        return Method.sdr  # units are ranked by their vectors' cosine, whatever the default

    def allowed(self, query: Query, options: SimilarOptions) -> Positions:
        """The positions `query` may rank under `options` (`search.ranking.pool.allowed`)."""
        return allowed(
            self.context.index,
            self.position,
            query,
            options.candidates,
            options.filter_tree(),
            options.exclude or (),
        )

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
            docs = allowed(self.context.index, self.position, query, candidates, filter)
        else:
            docs = allowed(self.context.index, self.position, query, None)
        if not len(docs):
            raise QueryError("the population holds no document to normalise over")
        return sdr.stats_over(query, docs, population)

    def similar_units(self, likes: Sequence[Query], options: SimilarOptions) -> SearchResult:
        """The sections, paragraphs or sentences nearest to any unit of any `like`, grouped by
        document when `options.group_by` asks."""
        level = options.granularity.value
        sources = [q.source_index for q in likes if q.source_index is not None]
        kept = None
        if options.candidates is not None or options.filter is not None:
            kept = self.allowed(likes[0], options)
        vectors = torch.cat([self.context.level_vectors(q, level) for q in likes]).numpy()
        return similar_units(
            self.context.index,
            self.engine,
            level,
            vectors,  # (m, d) every like's units
            excluded=sources,
            allowed=kept,
            top_k=options.depth(),
            seed=self.context.settings.seed,
            group_size=options.group_size if options.group_by == "document" else None,
        )


def checked(
    likes: Sequence[Query], unlikes: Sequence[Query], options: SimilarOptions, method: Method
) -> None:
    """Raises `QueryError` for a request the pipeline cannot rank: no `like`, a whole-document
    method or an `unlike` at a unit granularity, or `group_by` of whole documents."""
    if not likes:
        raise QueryError("give at least one document to rank like (`like`)")
    if options.granularity is not Granularity.document:
        if method in WHOLE_DOCUMENT_ONLY:
            raise QueryError(
                f"method {method.value!r} ranks whole documents; "
                "use granularity 'document' or method 'sdr' / 'document'"
            )
        if unlikes:
            raise QueryError("`unlike` applies to whole documents (granularity 'document')")
    elif options.group_by is not None:
        raise QueryError(
            "group_by groups the units of granularity 'section', 'paragraph' or "
            "'sentence'; granularity 'document' has one result per document already"
        )
