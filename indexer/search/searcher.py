"""Ranking a collection against a query document.

`Searcher.similar` is the one code path behind `POST /similar` and `docsim evaluate`; a request
without a method gets `SearchSettings.default_method`. Each method is a registered scorer
(`indexer.search.scorers`) or one of SDR's rankings (`indexer.search.sdr_ranking`); other
granularities rank sections, paragraphs or sentences (`indexer.search.units`), with `sdr` or
`document` (both then mean the unit vectors' cosine). Ties are broken by a fixed random order
of the documents, never by id or file order.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import torch
from sqlalchemy import Engine

from docsim.indexer.search.arrays import Positions, Scores
from docsim.indexer.search.centroid_candidates import LazyCentroids
from docsim.indexer.search.filters import Filter
from docsim.indexer.search.loaded_index import LoadedIndex
from docsim.indexer.search.matches import document_hits
from docsim.indexer.search.postings import Postings
from docsim.indexer.search.queries import encode_document, encode_levels, indexed_query
from docsim.indexer.search.scorers import QueryScratch, Scorer, ScoringContext, scorers_for
from docsim.indexer.search.sdr import SdrScorer, ShardedSdrScorer, carry_rows
from docsim.indexer.search.sdr_ranking import SDR_RANKED, RankedScores, SdrRanker, first_pass
from docsim.indexer.search.sentence_scan import SentenceScan
from docsim.indexer.search.settings import SearchSettings
from docsim.indexer.search.sharded import ShardedLevel, ShardedSdr
from docsim.indexer.search.types import (
    WHOLE_DOCUMENT_ONLY,
    DocumentNotFoundError,
    Granularity,
    Method,
    ParagraphStats,
    Population,
    Query,
    QueryError,
    ScoringMode,
    SearchOptions,
    SearchResult,
)
from docsim.indexer.search.units import similar_units
from docsim.indexer.text.documents import Document, SourceDocument
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoder import Encoder
from docsim.models.precision import resolve_device

logger = logging.getLogger(__name__)


class Searcher:
    """Answers queries against one loaded index version, with `settings`' methods and knobs;
    SDR's sentence products run on `device` (`cpu`, `cuda[:N]` or `auto`)."""

    def __init__(
        self,
        index: LoadedIndex,
        encoder: Encoder,
        splitter: SentenceSplitter,
        engine: Engine,
        settings: SearchSettings | None = None,
        *,
        device: str = "cpu",
        sentences_on_device: torch.Tensor | None = None,
        postings: Postings | None = None,
        scan: SentenceScan | None = None,
        centroids: LazyCentroids | None = None,
        unit_scans: Mapping[str, SentenceScan] | None = None,
    ) -> None:
        self.index = index
        if scan is not None:  # it searches the sentence level, whose FAISS index is not loaded
            index.indices["sentence"] = scan
        self.unit_scans = dict(unit_scans or {})  # other compressed levels, for their searches
        for level, unit_scan in self.unit_scans.items():
            index.indices[level] = unit_scan
        self.encoder = encoder
        self.splitter = splitter
        self.engine = engine
        self.settings = settings = settings or SearchSettings()
        self.device = device
        rng = np.random.default_rng(settings.seed)
        self.tiebreak: Positions = rng.permutation(index.n_documents)  # (D,) breaks ties
        sample = rng.choice(
            index.n_documents,
            size=min(settings.stats_sample_documents, index.n_documents),
            replace=False,
        )
        self._position = {external: i for i, external in enumerate(index.external_ids)}
        n_sentences = len(index.ids["sentence"])
        candidate = scoring_mode(SearchOptions(), n_sentences, settings) is ScoringMode.candidate
        sdr = SdrScorer(
            index,
            resolve_device(device),
            np.sort(sample),
            Population.sample if candidate else Population.collection,
            sentences_on_device,
        )
        self.context = ScoringContext(
            index=index,
            settings=settings,
            tiebreak=self.tiebreak,
            postings=postings or Postings(index, engine, settings.bm25_stemmer),
            sdr=sdr,
            level_vectors=self.level_vectors,
            scan=scan,
            centroids=centroids
            or LazyCentroids(
                index,
                dimensions=settings.scan_dimensions,
                seed=settings.seed,
                basis=scan.scan.basis if scan is not None else None,
            ),
        )
        self._score_with(self.context)

    def _score_with(self, context: ScoringContext) -> None:
        self.context = context
        self.scorers: dict[Method, Scorer] = scorers_for(context)
        n_sentences = len(self.index.ids["sentence"])
        sentence_doc = (
            np.searchsorted(context.sdr.doc_sentence_start, np.arange(n_sentences), side="right")
            - 1
        )  # (n,) the document position of each sentence row
        self.sdr_ranker = SdrRanker(context, self.scorers, self.engine, sentence_doc)

    def default_methods(self) -> set[Method]:
        """The methods a request naming none is scored with: the default, or what it fuses."""
        default = self.settings.default_method
        if default is Method.fused:
            return {method for method, _ in self.settings.fusion_weights}
        if default is Method.hybrid:  # reciprocal-rank fusion of BM25 and SDR
            return {Method.bm25, Method.sdr}
        return {default}

    def warm(self) -> None:
        """Build now what the default methods would build on their first request (the BM25
        postings over documents or paragraphs: seconds for a few thousand long documents),
        so that no request waits for it; the service warms a version before it serves it."""
        methods = self.default_methods()
        if methods & {Method.bm25, Method.bm25_reduced, Method.bm25_rm3}:
            self.context.postings.documents()
        if Method.bm25_paragraph in methods:
            self.context.postings.paragraphs()
        # candidate mode's cells, where a default query may need them: in a collection above
        # `exhaustive_max_sentences` (every query), or when the default computes SDR exactly
        # (a long query); otherwise the first candidate query fits them
        n_sentences = len(self.index.ids["sentence"])
        large = n_sentences > self.settings.exhaustive_max_sentences
        default = self.settings.default_method
        exact_sdr = default in SDR_RANKED and self.sdr_ranker.scores_sdr(default)
        centroids = self.context.centroids
        cells = first_pass(self.settings, self.context.scan is not None, n_sentences)
        if centroids and cells == "centroids" and (large or exact_sdr):
            centroids.get()

    def use_shards(
        self, shards: ShardedSdr | None, levels: Mapping[str, ShardedLevel] | None = None
    ) -> None:
        """Score exhaustive SDR and the methods with a sharded scorer on `shards` (None:
        here), and search the unit levels this index maps on them (`levels`)."""
        sdr = self.context.sdr
        if isinstance(sdr, ShardedSdrScorer):
            sdr = sdr.local
        if shards is not None:
            sdr = ShardedSdrScorer(sdr, shards)
        self._score_with(replace(self.context, sdr=sdr, shards=shards))
        self.index.indices.update(levels or {})

    def with_changes(self, index: LoadedIndex) -> Searcher:
        """A searcher over `index`: this searcher's index with a document change applied
        (`LoadedIndex.with_changes`). What follows one document is carried over and changed for
        the changed documents only: the BM25 postings, and the copy of the sentence vectors on
        the device (only added sentences are copied). The z-score statistics depend on every
        document, so the new searcher computes them afresh; this one keeps serving unchanged.
        A compressed sentence level projects the added sentences only, and candidate mode's
        cells, when fitted, assign only the added sentences."""
        old = self.index
        scan = self.context.scan
        new_scan = scan.changed(old, index) if scan is not None else None
        unit_scans = {level: held.changed(old, index) for level, held in self.unit_scans.items()}
        return Searcher(
            index,
            self.encoder,
            self.splitter,
            self.engine,
            self.settings,
            device=self.device,
            sentences_on_device=carry_rows(
                old.ids["sentence"],
                self.context.sdr.collection.sentences,
                index.ids["sentence"],
                index.collection.sentences,
            ),
            postings=self.context.postings.with_changes(index),
            scan=new_scan,
            centroids=self.context.centroids.changed(
                index, new_scan.scan.basis if new_scan is not None else None
            )
            if self.context.centroids is not None
            else None,
            unit_scans=unit_scans,
        )

    def vector_sizes(self) -> dict[str, tuple[int, int]]:
        """`LoadedIndex.vector_sizes`, with compressed levels' own bytes."""
        sizes = self.index.vector_sizes()
        scans = dict(self.unit_scans)
        if self.context.scan is not None:
            scans["sentence"] = self.context.scan
        for level, scan in scans.items():
            sizes[level] = (scan.count, scan.memory_bytes())
        return sizes

    # --- queries --------------------------------------------------------------------------
    def position(self, external_id: str) -> int:
        try:
            return self._position[external_id]
        except KeyError:
            raise DocumentNotFoundError(
                f"document {external_id!r} is not in the active index"
            ) from None

    def encode_document(self, document: Document) -> Query:
        return encode_document(self.encoder, document, int(self.index.manifest["chunk_tokens"]))

    def query_from_source(self, source: SourceDocument) -> Query:
        return self.encode_document(split_document(source, self.splitter))

    def query_from_index(self, external_id: str) -> Query:
        """The stored vectors of an indexed document, as a query that excludes itself."""
        d = self.position(external_id)
        return indexed_query(self.index, self.engine, d, self.context.sdr.doc_sentence_start)

    def level_vectors(self, query: Query, level: str) -> torch.Tensor:
        """The query's vectors at `level` `(m, d)`, encoding its chunks on first use."""
        if level not in query.level_vectors:
            encode_levels(self.encoder, query, int(self.index.manifest["chunk_tokens"]))
        return query.level_vectors[level]

    # --- ranking ----------------------------------------------------------------------------
    def similar(self, query: Query, options: SearchOptions) -> SearchResult:
        return self.similar_to_examples([query], [], options)

    def similar_to_examples(
        self, likes: Sequence[Query], unlikes: Sequence[Query], options: SearchOptions
    ) -> SearchResult:
        """Documents like the queries of `likes` and unlike those of `unlikes` (Elasticsearch's
        `more_like_this`, Qdrant's recommendations). A document's score is the mean of its
        scores against each `like` minus the mean of its scores against each `unlike`, each
        score the method's for that query alone (as `similar` of it ranks); a document outside
        one query's ranked pool (candidate mode) counts that pool's lowest score. One `like`
        and no `unlike` is `similar` of that query. Units are those nearest to any unit of any
        `like`. The hits' paragraph pairs are with the first `like`; every indexed example is
        left out of the ranking."""
        if not likes:
            raise QueryError("give at least one document to rank like (`like`)")
        method = self._method(options)
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
                query, options, self._allowed(query, options.candidates, options.filter)
            )
            for query in examples
        ]
        first, mode = runs[0]
        if len(examples) == 1:
            scores, pool = first.scores, first.pool
        else:
            sources = [q.source_index for q in examples if q.source_index is not None]
            scores, pool = _combined([r for r, _ in runs], len(likes))
            pool = pool[~np.isin(pool, sources)]
        ranked = self.context.top(scores, pool, options.top_k)
        if method in SDR_RANKED:
            hits = self.sdr_ranker.hits(likes[0], first, ranked, scores, options.matches_per_result)
        else:
            hits = document_hits(self.index, self.engine, likes[0], ranked, scores)
        return SearchResult(
            hits, mode=mode, scored_documents=len(pool), stats=first.stats, method=method
        )

    def _method(self, options: SearchOptions) -> Method:
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

    def ranking_stats(self, query: Query) -> ParagraphStats:
        """The statistics a default `/similar` (normalised, mode `auto`, no pool) uses for this
        query (`SdrScorer.default_stats`)."""
        return self.context.sdr.default_stats(query)

    def population_stats(
        self,
        query: Query,
        population: Population,
        candidates: Sequence[str] | None = None,
        filter: Filter | None = None,
    ) -> ParagraphStats:
        """The statistics over the same kind of population that a ranking normalised with,
        computed on this version: every other document, candidate mode's fixed sample, or
        the `candidates` and / or the documents `filter` keeps (minus the source).

        Raises:
            DocumentNotFoundError: a candidate of the pool is not in this version.
            QueryError: the population holds no document.
        """
        sdr = self.context.sdr
        if population is Population.sample:
            return sdr.sample_stats(query)
        if population is Population.pool:
            if candidates is None and filter is None:
                raise QueryError("a pool population needs its candidates or filter")
            docs = self._allowed(query, candidates, filter)
        else:
            docs = self._allowed(query, None)
        if not len(docs):
            raise QueryError("the population holds no document to normalise over")
        return sdr.stats_over(query, docs, population)

    # --- helpers ----------------------------------------------------------------------------
    def filter_mask(self, filter: Filter) -> np.ndarray:
        """`(D,)` the documents of this version that `filter` keeps.

        Raises:
            FilterError: it names a field no document has, or a value of the wrong type.
        """
        return self.index.filter_columns.mask(filter)

    def _allowed(
        self, query: Query, candidates: Sequence[str] | None, filter: Filter | None = None
    ) -> Positions:
        allowed = allowed_positions(self._position, self.index.n_documents, query, candidates)
        if filter is not None:
            allowed = allowed[self.filter_mask(filter)[allowed]]
        return allowed

    def _sentences_of(self, allowed: Positions) -> int:
        """How many sentences the documents at `allowed` hold."""
        start = self.index.doc_unit_start["sentence"]
        return int((start[allowed + 1] - start[allowed]).sum())

    def _similar_units(self, likes: Sequence[Query], options: SearchOptions) -> SearchResult:
        index, level = self.index, options.granularity.value
        sources = [q.source_index for q in likes if q.source_index is not None]
        allowed = None
        if options.candidates is not None or options.filter is not None:
            allowed = self._allowed(likes[0], options.candidates, options.filter)
        vectors = torch.cat([self.level_vectors(q, level) for q in likes]).numpy()  # (m, d)
        return similar_units(
            index,
            self.engine,
            level,
            vectors,
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
    `exhaustive_max_sentences`, whose products with the query's `query_sentences` are at most
    `exhaustive_max_products`; else candidate."""
    if options.mode is not ScoringMode.auto:
        return options.mode
    if options.candidates is not None:
        return ScoringMode.exhaustive
    if (
        n_sentences <= settings.exhaustive_max_sentences
        and n_sentences * query_sentences <= settings.exhaustive_max_products
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


def _combined(runs: Sequence[RankedScores], n_likes: int) -> tuple[Scores, Positions]:
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
