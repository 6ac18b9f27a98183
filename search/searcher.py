"""Ranking a collection against a query document.

`Searcher.similar` is the one code path behind `POST /similar` and `docsim evaluate`; a request
without a method gets `SearchSettings.default_method`. The searcher is a façade: it loads what
the methods read (`ScoringContext`), builds one object of each row of the method table
(`search.ranking.table`) and hands each request to the ranking pipeline
(`search.ranking.pipeline`); other granularities rank sections, paragraphs or sentences
(`search.units`), with `sdr` or `document` (both then mean the unit vectors' cosine).
Ties are broken by a fixed random order of the documents, never by id or file order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import torch
from sqlalchemy import Engine

from docsim.indexer.errors import DocumentNotFoundError
from docsim.indexer.text.documents import Document, SourceDocument
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.text.split import split_document
from docsim.models.encoders.encoder import Encoder
from docsim.models.inference.precision import resolve_device
from docsim.protocol.choices import Method, Population, ScoringMode
from docsim.protocol.filters import Filter
from docsim.protocol.requests import SimilarOptions
from docsim.search.arrays import Positions
from docsim.search.candidates.centroids import LazyCentroids
from docsim.search.lexical.postings import Postings
from docsim.search.queries import encode_document, encode_levels, indexed_query
from docsim.search.query_weights import SentenceWeights, rarity_neighbours
from docsim.search.ranking.pipeline import RankingPipeline
from docsim.search.ranking.pool import first_pass, scoring_mode
from docsim.search.ranking.scorer import Scorer, ScoringContext
from docsim.search.ranking.table import scorers_for
from docsim.search.sdr_scorer import SdrScorer, ShardedSdrScorer, carry_rows
from docsim.search.served.lazy_scan import LazyScan
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.served.sentence_scan import SentenceScan
from docsim.search.settings import SearchSettings
from docsim.search.shards.coordinator import ShardedLevel, ShardedSdr
from docsim.search.types import ParagraphStats, Query, SearchResult

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
        unit_scans: Mapping[str, SentenceScan | LazyScan] | None = None,
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
        self._position = {external: i for i, external in enumerate(index.external_ids)}
        self.context = scoring_context(
            index,
            engine,
            settings,
            device=device,
            sentences_on_device=sentences_on_device,
            postings=postings,
            scan=scan,
            centroids=centroids,
            level_vectors=self.level_vectors,
        )
        self.tiebreak: Positions = self.context.tiebreak  # (D,) breaks ties
        self._score_with(self.context)

    def _score_with(self, context: ScoringContext) -> None:
        self.context = context
        self.scorers: dict[Method, Scorer] = scorers_for(context)
        self.pipeline = RankingPipeline(context, self.scorers, self.engine, self._position)

    def warm(self) -> None:
        """Build now what the default methods would build on their first request (the BM25
        postings over documents or paragraphs: seconds for a few thousand long documents),
        so that no request waits for it; the service warms a version before it serves it."""
        warm_defaults(self.context, self.scorers)

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
    def similar(self, query: Query, options: SimilarOptions) -> SearchResult:
        """The collection ranked against `query` as `options` ask: its best
        `options.offset + options.top_k` documents or units (the caller cuts the page)."""
        return self.similar_to_examples([query], [], options)

    def similar_to_examples(
        self, likes: Sequence[Query], unlikes: Sequence[Query], options: SimilarOptions
    ) -> SearchResult:
        """Documents like the queries of `likes` and unlike those of `unlikes` (Elasticsearch's
        `more_like_this`, Qdrant's recommendations). A document's score is the mean of its
        scores against each `like` minus the mean of its scores against each `unlike`, each
        score the method's for that query alone (as `similar` of it ranks); a document outside
        one query's ranked pool (candidate mode) counts that pool's lowest score. One `like`
        and no `unlike` is `similar` of that query. Units are those nearest to any unit of any
        `like`. The hits' paragraph pairs are with the first `like`; every indexed example is
        left out of the ranking (`search.ranking.examples`)."""
        return self.pipeline.similar_to_examples(likes, unlikes, options)

    def sentence_weights(self, query: Query) -> torch.Tensor | None:
        """`(n,)` how much each of `query`'s sentences counts in `sdr` and `maxsim`
        (`search.query_weights`; None: the same)."""
        return self.context.sdr.weights.of(query)

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
        return self.pipeline.population_stats(query, population, candidates, filter)

    def filter_mask(self, filter: Filter) -> np.ndarray:
        """`(D,)` the documents of this version that `filter` keeps.

        Raises:
            FilterError: it names a field no document has, or a value of the wrong type.
        """
        return self.index.filter_columns.mask(filter)


def scoring_context(
    index: LoadedIndex,
    engine: Engine,
    settings: SearchSettings,
    *,
    device: str,
    sentences_on_device: torch.Tensor | None,
    postings: Postings | None,
    scan: SentenceScan | None,
    centroids: LazyCentroids | None,
    level_vectors: Callable[[Query, str], torch.Tensor],
) -> ScoringContext:
    """What a searcher's scorers read of `index`: the parts a changed version carries over
    (`Searcher.with_changes`), or new ones; the tie order and the statistics' sample are
    drawn from `settings.seed`."""
    rng = np.random.default_rng(settings.seed)
    tiebreak = rng.permutation(index.n_documents)  # (D,) breaks ties
    sample = rng.choice(
        index.n_documents,
        size=min(settings.stats_sample_documents, index.n_documents),
        replace=False,
    )
    n_sentences = len(index.ids["sentence"])
    candidate = scoring_mode(SimilarOptions(), n_sentences, settings) is ScoringMode.candidate
    sdr = SdrScorer(
        index,
        resolve_device(device),
        np.sort(sample),
        Population.sample if candidate else Population.collection,
        sentences_on_device,
        SentenceWeights(index, rarity_neighbours(settings)),
    )
    return ScoringContext(
        index=index,
        settings=settings,
        tiebreak=tiebreak,
        postings=postings
        or Postings(index, engine, settings.bm25.stemmer, settings.verbatim.shingle_words),
        sdr=sdr,
        level_vectors=level_vectors,
        scan=scan,
        centroids=centroids
        or LazyCentroids(
            index,
            dimensions=settings.scan.dimensions,
            seed=settings.seed,
            basis=scan.scan.basis if scan is not None else None,
        ),
    )


def warm_defaults(context: ScoringContext, scorers: Mapping[Method, Scorer]) -> None:
    """`Searcher.warm`: the BM25 postings and candidate mode's cells that the default methods
    (`SearchSettings.default_methods`) would build on their first request."""
    settings = context.settings
    methods = settings.default_methods()
    if methods & {Method.bm25, Method.bm25_reduced, Method.bm25_rm3}:
        context.postings.documents()
    if Method.bm25_paragraph in methods:
        context.postings.paragraphs()
    if Method.bm25_shingles in methods:
        context.postings.shingles()
    # candidate mode's cells, where a default query may need them: in a collection above
    # `exhaustive.max_sentences` (every query), or when the default computes SDR exactly
    # (a long query); otherwise the first candidate query fits them
    n_sentences = len(context.index.ids["sentence"])
    large = n_sentences > settings.exhaustive.max_sentences
    default = settings.default_method
    exact_sdr = scorers[default].computes_sdr
    cells = first_pass(settings, context.scan is not None, n_sentences)
    if context.centroids and cells == "centroids" and (large or exact_sdr):
        context.centroids.get()
