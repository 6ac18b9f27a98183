"""SDR's hierarchical scoring over a loaded version (`models.kernels.scoring` holds the maths).

Exhaustive mode scores the given documents and normalises over them (the reference). Candidate
mode takes the z-score statistics from a fixed random sample of the collection instead, so that
they do not depend on which documents were retrieved.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch
from cachetools import LRUCache

from docsim.models.kernels.scoring import (
    RaggedCollection,
    document_scores,
    normalize_rows,
    paragraph_similarity,
    paragraph_weights,
    row_stats,
)
from docsim.protocol.choices import Population, ScoringMode
from docsim.search.arrays import Positions, Scores, concatenated_ranges
from docsim.search.query_weights import SentenceWeights
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.served.mapped_rows import MAPPED_BLOCK_SENTENCES
from docsim.search.shards.coordinator import ShardedSdr
from docsim.search.shards.shard import query_on_shards
from docsim.search.types import ParagraphStats, Query

BLOCK_SENTENCES = 65536  # rows a block of the pass, in memory as float32


@dataclass
class SdrScores:
    """SDR scores of every document `(D,)` (-inf where not scored), the paragraph matrix
    `(I, J)` (normalised when asked), each scored document's first column in it `(D,)` (-1
    elsewhere), and the statistics it was normalised with."""

    scores: Scores
    pmatrix: torch.Tensor | None  # None: scored on shards (`ShardedSdrScorer`)
    first_column: Positions
    stats: ParagraphStats | None


class SdrScorer:
    """SDR scoring of one loaded version. The collection's sentences sit on `device` (a GPU
    when there is one), copied there once; statistics of indexed sources are remembered. Each
    query sentence counts by `weights` (`search.query_weights`; None: the same)."""

    def __init__(
        self,
        index: LoadedIndex,
        device: torch.device,
        stats_sample: Positions,
        default_population: Population,
        sentences_on_device: torch.Tensor | None = None,
        weights: SentenceWeights | None = None,
    ) -> None:
        self.index = index
        self.weights = weights or SentenceWeights(index, None)
        self.doc_sentence_start = index.doc_unit_start["sentence"]
        if sentences_on_device is None:  # mapped sentences stay mapped: shards score them
            sentences_on_device = (
                index.collection.sentences
                if index.sentences_mapped
                else index.collection.sentences.to(device)
            )
        self.collection = RaggedCollection(
            sentences=sentences_on_device,
            paragraph_lengths=index.collection.paragraph_lengths,
            document_lengths=index.collection.document_lengths,
        )
        self.stats_sample = stats_sample  # (S,) sorted document positions
        self.default_population = default_population  # what a default ranking normalises over
        self._sample_cache: RaggedCollection | None = None
        self._source_stats: LRUCache[int, ParagraphStats] = LRUCache(maxsize=4096)
        self._lock = threading.Lock()

    def sub_collection(self, docs: Positions) -> tuple[RaggedCollection, Positions]:
        """The sentences of `docs` as a ragged collection, and each document's first column
        in the paragraph matrix `(len(docs),)`."""
        index = self.index
        p_start, s_start = index.doc_paragraph_start, self.doc_sentence_start
        sentence_rows = concatenated_ranges(s_start[docs], s_start[docs + 1])
        paragraph_rows = concatenated_ranges(p_start[docs], p_start[docs + 1])
        sentences = self.collection.sentences
        collection = RaggedCollection(
            sentences=sentences[torch.from_numpy(sentence_rows).to(sentences.device)],
            paragraph_lengths=index.collection.paragraph_lengths[torch.from_numpy(paragraph_rows)],
            document_lengths=index.collection.document_lengths[torch.from_numpy(docs)],
        )
        lengths = p_start[docs + 1] - p_start[docs]
        return collection, np.concatenate([[0], np.cumsum(lengths)[:-1]])

    def paragraphs(self, query: Query, collection: RaggedCollection) -> torch.Tensor:
        """`P` `(I, J)` of `query` over `collection`
        (`models.kernels.scoring.paragraph_similarity`). Float16 rows read from the version's file
        are cast per block: blocks of `MAPPED_BLOCK_SENTENCES` rows keep the cast's buffers in the
        allocator's reused memory (a 65,536-row block is a fresh mapping each time, whose page
        faults doubled the pass)."""
        mapped = collection.sentences.dtype != query.sentence_vectors.dtype
        return paragraph_similarity(
            query.sentence_vectors,
            query.paragraph_lengths,
            collection,
            block_sentences=MAPPED_BLOCK_SENTENCES if mapped else BLOCK_SENTENCES,
            weights=self.weights.of(query),
        )

    def paragraph_weights(self, query: Query) -> torch.Tensor | None:
        """`(I,)` how much each of `query`'s paragraphs counts in a document's score (None:
        the same)."""
        return paragraph_weights(query.paragraph_lengths, self.weights.of(query))

    def sample_stats(self, query: Query) -> ParagraphStats:
        """Candidate mode's statistics: P over the fixed random sample of the collection
        (without the source)."""
        source = query.source_index
        if source is not None and source in self.stats_sample:
            sample = self.sub_collection(self.stats_sample[self.stats_sample != source])[0]
        else:
            if self._sample_cache is None:
                self._sample_cache = self.sub_collection(self.stats_sample)[0]
            sample = self._sample_cache
        p = self.paragraphs(query, sample)
        return ParagraphStats(row_stats(p), Population.sample, sample.n_documents)

    def cached_stats(self, query: Query) -> ParagraphStats | None:
        if query.source_index is None:
            return None
        with self._lock:
            return self._source_stats.get(query.source_index)

    def remember(self, query: Query, stats: ParagraphStats) -> None:
        """Keep an indexed source's statistics when they are the default ranking's."""
        if query.source_index is not None and stats.population == self.default_population:
            with self._lock:
                self._source_stats[query.source_index] = stats

    def default_stats(self, query: Query) -> ParagraphStats:
        """The statistics the default ranking (normalised, mode `auto`, no pool) uses for
        `query`; remembered per indexed source, as they hold for the whole version."""
        cached = self.cached_stats(query)
        if cached is not None:
            return cached
        if self.default_population is Population.sample:
            found = self.sample_stats(query)
        else:
            found = self.collection_stats(query)
        self.remember(query, found)
        return found

    def _every_other(self, query: Query) -> Positions:
        """Every document's position but the query's source."""
        docs = np.arange(self.index.n_documents)
        return docs if query.source_index is None else docs[docs != query.source_index]

    def whole_collection_stats(self, query: Query, remembered: bool = True) -> ParagraphStats:
        """The statistics an unfiltered ranking would use: over every other document, or the
        fixed sample where that is the default (a collection large enough for candidate
        mode); the default's, kept per source, when `remembered`."""
        if self.default_population is Population.sample:
            return self.sample_stats(query)
        if remembered:
            return self.default_stats(query)
        return self.collection_stats(query)

    def collection_stats(self, query: Query) -> ParagraphStats:
        """The statistics over every other document of the collection."""
        p = self.paragraphs(query, self.collection)  # (I, J) over every document
        n_docs, source = self.index.n_documents, query.source_index
        if source is not None:  # the source never counts among its own candidates
            p0, p1 = self.index.doc_paragraph_start[source : source + 2]
            p = torch.cat([p[:, :p0], p[:, p1:]], dim=1)
            n_docs -= 1
        return ParagraphStats(row_stats(p), Population.collection, n_docs)

    def stats_over(self, query: Query, docs: Positions, population: Population) -> ParagraphStats:
        collection = self.sub_collection(docs)[0]
        p = self.paragraphs(query, collection)
        return ParagraphStats(row_stats(p), population, len(docs))

    def score(
        self,
        query: Query,
        docs: Positions,
        *,
        normalize: bool,
        mode: ScoringMode,
        pooled: bool,
        remember: bool = True,
        whole_collection: bool = False,
    ) -> SdrScores:
        """SDR scores of `docs`, normalised over them (`pool` or `collection`), over every
        other document of the collection when `whole_collection` (`docs` being the documents
        a filter keeps) or, in candidate mode, over the fixed sample; the statistics are
        remembered for the source unless `remember` is off (a query whose paragraphs were
        regrouped)."""
        n = self.index.n_documents
        scores = np.full(n, -np.inf)
        first_column = np.full(n, -1, dtype=np.int64)
        if len(docs) == 0:
            return SdrScores(scores, torch.empty(0, 0), first_column, None)
        if len(docs) == n:
            collection, starts = self.collection, self.index.doc_paragraph_start[:-1]
        else:
            collection, starts = self.sub_collection(docs)
        first_column[docs] = starts
        pmatrix = self.paragraphs(query, collection)  # (I, J)
        used = None
        if normalize:
            if mode is ScoringMode.candidate:
                used = self.sample_stats(query)
            elif whole_collection:  # a regrouped query's paragraphs are not the source's
                used = self.whole_collection_stats(query, remembered=remember)
            else:
                population = Population.pool if pooled else Population.collection
                used = ParagraphStats(row_stats(pmatrix), population, len(docs))
            if remember:
                self.remember(query, used)
            pmatrix = normalize_rows(pmatrix, used.stats)
        columns = self.paragraph_weights(query)  # (I,) or None
        scores[docs] = document_scores(pmatrix, collection.document_lengths, columns).numpy()
        return SdrScores(scores, pmatrix, first_column, used)

    def explain_columns(
        self, query: Query, docs: Positions, stats: ParagraphStats | None
    ) -> SdrScores:
        """The paragraph matrix of `docs` only, normalised with `stats` (None: raw), here in
        this process: the columns that give the ranked documents their paragraph pairs."""
        n = self.index.n_documents
        first_column = np.full(n, -1, dtype=np.int64)
        if not len(docs):
            return SdrScores(np.full(n, -np.inf), torch.empty(0, 0), first_column, stats)
        collection, starts = self.sub_collection(docs)
        first_column[docs] = starts
        pmatrix = self.paragraphs(query, collection)
        if stats is not None:
            pmatrix = normalize_rows(pmatrix, stats.stats)
        return SdrScores(np.full(n, -np.inf), pmatrix, first_column, stats)


class ShardedSdrScorer(SdrScorer):
    """`SdrScorer` whose exhaustive scoring runs on `shards`, in two rounds (`ShardedSdr`):
    every document's score and the statistics, but no paragraph matrix (`explain_columns`
    gives the ranked documents' columns, here). Candidate mode scores here."""

    def __init__(self, local: SdrScorer, shards: ShardedSdr) -> None:
        self.__dict__.update(local.__dict__)  # the same collection, sample and caches
        self.local = local
        self.shards = shards

    def score(
        self,
        query: Query,
        docs: Positions,
        *,
        normalize: bool,
        mode: ScoringMode,
        pooled: bool,
        remember: bool = True,
        whole_collection: bool = False,
    ) -> SdrScores:
        if mode is not ScoringMode.exhaustive or not len(docs):
            return super().score(
                query,
                docs,
                normalize=normalize,
                mode=mode,
                pooled=pooled,
                remember=remember,
                whole_collection=whole_collection,
            )
        n = self.index.n_documents
        # normalised over the whole collection: its every document ranked, then those kept
        ranked = self._every_other(query) if whole_collection and normalize else docs
        on_shards = query_on_shards(query, ranked, n, self.weights.of(query))
        hits, stats, scored = self.shards.rank(on_shards, None, normalize)
        kept = np.isin(hits.positions, docs)
        scores = np.full(n, -np.inf)
        scores[hits.positions[kept]] = hits.scores[kept]
        used = None
        if stats is not None:
            population = Population.pool if pooled else Population.collection
            used = ParagraphStats(stats, population, scored)
            if remember:
                self.remember(query, used)
        return SdrScores(scores, None, np.full(n, -1, dtype=np.int64), used)


def carry_rows(
    old_ids: np.ndarray, old_rows: torch.Tensor, new_ids: np.ndarray, new_rows: torch.Tensor
) -> torch.Tensor:
    """The rows of `new_ids` `(m,)` on `old_rows`' device, reusing the rows that stay: only
    the added rows are copied there. `old_rows` `(n, d)` belong to `old_ids` `(n,)`; `new_rows`
    `(m, d)` (on any device) to `new_ids`. Both id arrays ascend, and added ids are above every
    kept one (`LoadedIndex.with_changes` guarantees it), so kept rows come first."""
    if new_rows.device == old_rows.device:
        return new_rows
    return reuse_rows(old_ids, old_rows, new_ids, new_rows)


def reuse_rows(
    old_ids: np.ndarray, old_rows: torch.Tensor, new_ids: np.ndarray, new_rows: torch.Tensor
) -> torch.Tensor:
    """`carry_rows` on any devices: the kept rows taken from `old_rows`, the added ones from
    `new_rows`, on `old_rows`' device."""
    stays = np.isin(old_ids, new_ids)  # (n,)
    kept = torch.from_numpy(np.flatnonzero(stays)).to(old_rows.device)  # (k,)
    if not np.array_equal(old_ids[stays], new_ids[: len(kept)]):
        raise ValueError("the kept rows are not the first rows of the new index")
    added = new_rows[len(kept) :].to(old_rows.device)  # (m - k, d)
    return torch.cat([old_rows.index_select(0, kept), added])
