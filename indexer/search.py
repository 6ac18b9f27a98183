"""Ranking a collection against a query document: SDR, single-vector, BM25 and hybrid.

`Searcher.similar` is the one code path behind `POST /similar` and `docsim evaluate`.

- `sdr` (default): the paper's hierarchical scoring (`models.scoring`). Exhaustive mode scores
  every document and normalises over all of them (the reference). Candidate mode scores only
  documents retrieved through the sentence and document FAISS indices, and takes the z-score
  statistics from a fixed random sample of the collection, so that they do not depend on which
  documents were retrieved. `auto` picks exhaustive up to `exhaustive_max_sentences`.
- `document`: cosine of the document vectors.
- `bm25`: Okapi BM25 (bm25s) over the document texts.
- `hybrid`: reciprocal-rank fusion of `bm25` and `sdr`, score = sum 1 / (60 + rank).
Ties are broken by a fixed random order of the documents, never by id or file order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

import numpy as np
import torch
import torch.nn.functional as F
from cachetools import LRUCache
from sqlalchemy import Engine

from indexer.config import Settings, load_configured_encoder
from indexer.documents import Document
from indexer.pipeline import add_chunks
from indexer.reader import (
    IndexMismatchError,
    LoadedIndex,
    document_section_titles,
    document_texts,
    document_units,
    level_unit_rows,
    paragraph_offsets,
    units_of_documents,
)
from indexer.sentences import SentenceSplitter, load_splitter
from indexer.split import split_document
from indexer.store import active_version
from indexer.vector_index import gpu_count
from models.encoder import Encoder
from models.pooling import segment_mean
from models.precision import resolve_device
from models.scoring import (
    RaggedCollection,
    RowStats,
    document_scores,
    normalize_rows,
    paragraph_similarity,
    row_stats,
)

logger = logging.getLogger(__name__)

RRF_K = 60


class Method(str, Enum):
    sdr = "sdr"
    document = "document"
    bm25 = "bm25"
    hybrid = "hybrid"


class Granularity(str, Enum):
    document = "document"
    section = "section"
    paragraph = "paragraph"
    sentence = "sentence"


class ScoringMode(str, Enum):
    auto = "auto"
    exhaustive = "exhaustive"
    candidate = "candidate"


class QueryError(ValueError):
    """The query cannot be answered as asked (maps to 422)."""


class DocumentNotFoundError(LookupError):
    """An indexed document id that the active version does not have (maps to 404)."""


@dataclass(frozen=True)
class SearchOptions:
    top_k: int = 10
    granularity: Granularity = Granularity.document
    method: Method = Method.sdr
    normalize: bool = True
    mode: ScoringMode = ScoringMode.auto
    candidates: Sequence[str] | None = None
    matches_per_result: int = 3


@dataclass(frozen=True)
class SearchConfig:
    exhaustive_max_sentences: int = 2_000_000
    candidate_sentence_k: int = 20
    candidate_paragraph_k: int = 200
    candidate_document_k: int = 200
    candidate_max_documents: int = 500
    stats_sample_documents: int = 256
    seed: int = 0
    device: str = "cpu"  # where SDR's sentence products run: `cpu`, `cuda[:N]` or `auto`


@dataclass
class Query:
    """A query document's text, split structure and vectors."""

    text: str
    paragraphs: list[tuple[int, int]]  # (start, end) of each paragraph in `text`
    sentence_vectors: torch.Tensor  # (n, d)
    paragraph_lengths: torch.Tensor  # (I,)
    level_vectors: dict[str, torch.Tensor]  # level -> (m, d), filled on demand for posted documents
    level_spans: dict[str, list[tuple[int, int]]]
    source_index: int | None = None  # position in the collection when the query is indexed
    bm25_text: str = ""
    document: Document | None = None  # the split posted document, until its levels are encoded
    title: str = ""
    section_titles: list[str] = field(default_factory=list)

    @property
    def sentence_paragraph(self) -> torch.Tensor:
        """`(n,)` the paragraph of each sentence."""
        return torch.repeat_interleave(
            torch.arange(len(self.paragraph_lengths)), self.paragraph_lengths
        )


@dataclass(frozen=True)
class ParagraphStats:
    """The z-score statistics of a query's paragraphs, and the population they came from.

    Attributes:
        stats: per source paragraph mean and std of P.
        population: `collection` (every other document), `pool` (the posted candidates) or
            `sample` (candidate mode's fixed random sample of the collection).
        documents: how many documents the population holds.
    """

    stats: RowStats
    population: str
    documents: int


@dataclass
class ParagraphMatch:
    source_paragraph: int
    source_start: int
    source_end: int
    target_paragraph_id: int
    target_start: int
    target_end: int
    score: float
    source_text: str = ""
    target_text: str = ""


@dataclass
class DocumentHit:
    document_id: str
    title: str
    score: float
    rank: int
    matches: list[ParagraphMatch] = field(default_factory=list)


@dataclass
class UnitHit:
    unit_id: int
    level: str
    document_id: str
    title: str
    score: float
    rank: int
    start: int
    end: int
    text: str
    section_title: str | None = None


@dataclass
class SearchResult:
    results: list[DocumentHit] | list[UnitHit]
    mode: str
    scored_documents: int
    stats: ParagraphStats | None = None  # what SDR normalised with, when it did


class Searcher:
    """Answers queries against one loaded index version."""

    def __init__(
        self,
        index: LoadedIndex,
        encoder: Encoder,
        splitter: SentenceSplitter,
        engine: Engine,
        config: SearchConfig | None = None,
    ) -> None:
        self.index = index
        self.encoder = encoder
        self.splitter = splitter
        self.engine = engine
        self.config = config or SearchConfig()
        rng = np.random.default_rng(self.config.seed)
        self._tiebreak = rng.permutation(index.n_documents)  # fixed random secondary sort key
        sample = rng.choice(
            index.n_documents,
            size=min(self.config.stats_sample_documents, index.n_documents),
            replace=False,
        )
        self._stats_sample = np.sort(sample)
        self._position = {external: i for i, external in enumerate(index.external_ids)}
        self._doc_sentence_start = index.paragraph_sentence_start[
            index.doc_paragraph_start
        ]  # (D + 1,)
        n_sentences = len(index.ids["sentence"])
        self._sentence_doc = (
            np.searchsorted(self._doc_sentence_start, np.arange(n_sentences), side="right") - 1
        )
        # SDR's sentence products run where the collection's sentences are: on the
        # configured device (a GPU when there is one), copied there once per version
        self._collection = replace(
            index.collection,
            sentences=index.collection.sentences.to(resolve_device(self.config.device)),
        )
        self._bm25 = None
        self._stats_cache: RaggedCollection | None = None
        self._bm25_lock = threading.Lock()
        self._source_stats: LRUCache[int, ParagraphStats] = LRUCache(maxsize=4096)
        self._source_stats_lock = threading.Lock()

    # --- queries --------------------------------------------------------------------------
    def position(self, external_id: str) -> int:
        try:
            return self._position[external_id]
        except KeyError:
            raise DocumentNotFoundError(
                f"document {external_id!r} is not in the active index"
            ) from None

    def encode_document(self, document: Document) -> Query:
        """A posted (not indexed) document as a query. Only its sentences are encoded now: that
        is all exhaustive SDR scoring needs; other levels are encoded when first needed."""
        paragraphs = list(document.paragraphs())
        sentences = [document.text[s.start : s.end] for s in document.sentences()]
        return Query(
            text=document.text,
            paragraphs=[(p.start, p.end) for p in paragraphs],
            sentence_vectors=self.encoder.encode(sentences),
            paragraph_lengths=torch.tensor(
                [len(p.sentences) for p in paragraphs], dtype=torch.long
            ),
            level_vectors={},
            level_spans={
                "document": [(0, len(document.text))],
                "section": [(s.start, s.end) for s in document.sections],
                "paragraph": [(p.start, p.end) for p in paragraphs],
                "sentence": [(s.start, s.end) for s in document.sentences()],
            },
            bm25_text=document.text,
            document=document,
            title=document.title,
            section_titles=[s.title for s in document.sections],
        )

    def level_vectors(self, query: Query, level: str) -> torch.Tensor:
        """The query's vectors at `level` `(m, d)`, encoding its chunks on first use."""
        if level not in query.level_vectors:
            if query.document is None:
                raise ValueError(f"query has no {level} vectors and no document to encode")
            capacity = int(self.index.manifest["chunk_tokens"])
            doc = add_chunks([query.document], self.encoder, capacity)[0]
            # the sentences are encoded already (for SDR): only the chunks are new work
            vectors = self.encoder.encode_documents(
                [doc.encoder_input()], sentence_vectors=[query.sentence_vectors]
            )[0]
            query.level_vectors.update(
                document=vectors.document[None],
                section=vectors.sections,
                paragraph=vectors.paragraphs,
                sentence=vectors.sentences,
                chunk=vectors.chunks,
            )
            query.level_spans["chunk"] = [(c.start, c.end) for c in doc.chunks]
        return query.level_vectors[level]

    def query_from_source(self, source) -> Query:  # noqa: ANN001 - a SourceDocument
        return self.encode_document(split_document(source, self.splitter))

    def query_from_index(self, external_id: str) -> Query:
        """The stored vectors of an indexed document, as a query that excludes itself."""
        d = self.position(external_id)
        index = self.index
        p0, p1 = index.doc_paragraph_start[d], index.doc_paragraph_start[d + 1]
        s0, s1 = self._doc_sentence_start[d], self._doc_sentence_start[d + 1]
        paragraph_ids = index.paragraph_ids[p0:p1].tolist()
        offsets = paragraph_offsets(self.engine, paragraph_ids)
        text = document_texts(self.engine, [int(index.doc_ids[d])])[int(index.doc_ids[d])]
        level_vectors, level_spans = {}, {}
        doc_id = int(index.doc_ids[d])
        for level in ("section", "paragraph", "sentence", "chunk"):
            unit_rows = document_units(self.engine, level, doc_id)
            ids = np.array([r[0] for r in unit_rows], dtype=np.int64)
            rows = np.searchsorted(index.ids[level], ids)
            level_vectors[level] = index.vectors[level][torch.from_numpy(rows)]
            level_spans[level] = [(r[1], r[2]) for r in unit_rows]
        level_vectors["document"] = index.vectors["document"][d : d + 1]
        level_spans["document"] = [(0, len(text))]
        lengths = index.collection.paragraph_lengths[p0:p1]
        return Query(
            text=text,
            paragraphs=[offsets[p] for p in paragraph_ids],
            sentence_vectors=index.collection.sentences[s0:s1],
            paragraph_lengths=lengths,
            level_vectors=level_vectors,
            level_spans=level_spans,
            source_index=d,
            bm25_text=text,
            title=index.titles[d],
            section_titles=document_section_titles(self.engine, doc_id),
        )

    # --- ranking ----------------------------------------------------------------------------
    def similar(self, query: Query, options: SearchOptions) -> SearchResult:
        if options.granularity is not Granularity.document:
            if options.method in (Method.bm25, Method.hybrid):
                raise QueryError(
                    f"method {options.method.value!r} ranks whole documents; "
                    "use granularity 'document' or method 'sdr' / 'document'"
                )
            return self._similar_units(query, options)
        allowed = self._allowed(query, options.candidates)
        mode = self._mode(options)
        if options.method is Method.document:
            scores = self._document_cosine(query)
            ranked = self._rank(scores, allowed, options.top_k)
            return self._document_hits(
                query, ranked, scores, None, None, options, mode="exhaustive", scored=len(allowed)
            )
        if options.method is Method.bm25:
            scores = self._bm25_scores(query)
            ranked = self._rank(scores, allowed, options.top_k)
            return self._document_hits(
                query, ranked, scores, None, None, options, mode="exhaustive", scored=len(allowed)
            )
        scored_docs = allowed if mode == "exhaustive" else self._retrieve_candidates(query, allowed)
        sdr, pmatrix, columns, stats = self._sdr(
            query, scored_docs, options.normalize, mode, pooled=options.candidates is not None
        )
        if options.method is Method.sdr:
            ranked = self._rank(sdr, scored_docs, options.top_k)
            result = self._document_hits(
                query, ranked, sdr, pmatrix, columns, options, mode=mode, scored=len(scored_docs)
            )
            result.stats = stats
            return result
        bm25 = self._bm25_scores(query)
        pool = (
            allowed
            if mode == "exhaustive"
            else np.union1d(scored_docs, self._rank(bm25, allowed, 1000))
        )
        fused = np.zeros(self.index.n_documents, dtype=np.float64)
        for scores, docs in ((bm25, pool), (sdr, scored_docs)):
            order = self._rank(scores, docs, len(docs))
            fused[order] += 1.0 / (RRF_K + np.arange(1, len(order) + 1))
        ranked = self._rank(fused, pool, options.top_k)
        result = self._document_hits(
            query, ranked, fused, pmatrix, columns, options, mode=mode, scored=len(pool)
        )
        result.stats = stats
        return result

    def _mode(self, options: SearchOptions) -> str:
        if options.mode is not ScoringMode.auto:
            return options.mode.value
        if options.candidates is not None:
            return "exhaustive"
        n = len(self.index.ids["sentence"])
        return "exhaustive" if n <= self.config.exhaustive_max_sentences else "candidate"

    def _allowed(self, query: Query, candidates: Sequence[str] | None) -> np.ndarray:
        """Document positions that may be ranked (all, or the given pool), minus the source."""
        if candidates is None:
            allowed = np.arange(self.index.n_documents)
        else:
            missing = [c for c in candidates if c not in self._position]
            if missing:
                raise DocumentNotFoundError(
                    f"{len(missing)} candidate(s) not in the active index, e.g. {missing[:3]}"
                )
            allowed = np.unique(np.array([self._position[c] for c in candidates], dtype=np.int64))
        if query.source_index is not None:
            allowed = allowed[allowed != query.source_index]
        return allowed

    def _rank(self, scores: np.ndarray, allowed: np.ndarray, k: int) -> np.ndarray:
        """The best `k` of `allowed` by score, ties broken by the fixed random order."""
        allowed = np.asarray(allowed, dtype=np.int64)
        values = scores[allowed]
        order = np.lexsort((self._tiebreak[allowed], -values))
        return allowed[order[:k]]

    def _document_cosine(self, query: Query) -> np.ndarray:
        return (
            (self.index.vectors["document"] @ self.level_vectors(query, "document")[0])
            .numpy()
            .astype(np.float64)
        )

    def _bm25_scores(self, query: Query) -> np.ndarray:
        """The BM25 score of every document `(D,)`: all 0 when the query has no word of the
        BM25 vocabulary (only stop words, or words that no document has)."""
        import bm25s

        with self._bm25_lock:
            if self._bm25 is None:
                started = time.perf_counter()
                texts = document_texts(self.engine, self.index.doc_ids.tolist())
                corpus = [texts[int(d)] for d in self.index.doc_ids]
                retriever = bm25s.BM25()
                tokenized = bm25s.tokenize(corpus, stopwords="en", show_progress=False)
                if tokenized.vocab:
                    retriever.index(tokenized, show_progress=False)
                else:  # bm25s cannot index a collection without a single word
                    retriever.vocab_dict = {}
                self._bm25 = retriever
                logger.info(
                    "Built BM25 over %d documents in %.1f s",
                    len(corpus),
                    time.perf_counter() - started,
                )
        tokens = bm25s.tokenize(
            [query.bm25_text], stopwords="en", return_ids=False, show_progress=False
        )[0]
        # bm25s fails on a query without a token, and `get_scores` drops unknown ones itself
        known = [token for token in tokens if token in self._bm25.vocab_dict]
        if not known:
            return np.zeros(self.index.n_documents, dtype=np.float64)
        return np.asarray(self._bm25.get_scores(known), dtype=np.float64)

    def _sub_collection(self, docs: np.ndarray) -> tuple[RaggedCollection, np.ndarray]:
        """The sentences of `docs` as a ragged collection, and each document's first column
        in the paragraph matrix `(len(docs),)`."""
        index = self.index
        p_start, s_start = index.doc_paragraph_start, self._doc_sentence_start
        sentence_rows = _ranges(s_start[docs], s_start[docs + 1])
        paragraph_rows = _ranges(p_start[docs], p_start[docs + 1])
        collection = RaggedCollection(
            sentences=self._collection.sentences[
                torch.from_numpy(sentence_rows).to(self._collection.sentences.device)
            ],
            paragraph_lengths=index.collection.paragraph_lengths[torch.from_numpy(paragraph_rows)],
            document_lengths=index.collection.document_lengths[torch.from_numpy(docs)],
        )
        lengths = p_start[docs + 1] - p_start[docs]
        return collection, np.concatenate([[0], np.cumsum(lengths)[:-1]])

    def _stats_collection(self, source_index: int | None) -> RaggedCollection:
        """The fixed normalisation sample (without the source), gathered once."""
        if source_index is not None and source_index in self._stats_sample:
            return self._sub_collection(self._stats_sample[self._stats_sample != source_index])[0]
        if self._stats_cache is None:
            self._stats_cache = self._sub_collection(self._stats_sample)[0]
        return self._stats_cache

    def _sample_stats(self, query: Query) -> ParagraphStats:
        """Candidate mode's statistics: P over the fixed random sample of the collection."""
        sample = self._stats_collection(query.source_index)
        p = paragraph_similarity(query.sentence_vectors, query.paragraph_lengths, sample)
        return ParagraphStats(row_stats(p), "sample", sample.n_documents)

    def ranking_stats(self, query: Query) -> ParagraphStats:
        """The statistics a default `/similar` (normalised, mode `auto`, no pool) uses for this
        query; remembered per indexed source, as they hold for the whole version."""
        key = query.source_index
        if key is not None:
            with self._source_stats_lock:
                cached = self._source_stats.get(key)
            if cached is not None:
                return cached
        if self._mode(SearchOptions()) == "candidate":
            found = self._sample_stats(query)
        else:
            p = paragraph_similarity(
                query.sentence_vectors, query.paragraph_lengths, self._collection
            )  # (I, J) over every document
            n_docs = self.index.n_documents
            if key is not None:  # the source never counts among its own candidates
                p0, p1 = (
                    self.index.doc_paragraph_start[key],
                    self.index.doc_paragraph_start[key + 1],
                )
                p = torch.cat([p[:, :p0], p[:, p1:]], dim=1)
                n_docs -= 1
            found = ParagraphStats(row_stats(p), "collection", n_docs)
        self._remember_stats(query, found)
        return found

    def population_stats(
        self, query: Query, population: str, candidates: Sequence[str] | None = None
    ) -> ParagraphStats:
        """The statistics over the same kind of population that a ranking normalised with,
        computed on this version: `collection` (every other document), `sample` (candidate
        mode's fixed sample) or `pool` (the `candidates`, minus the source).

        Raises:
            DocumentNotFoundError: a candidate of the pool is not in this version.
        """
        if population == "sample":
            return self._sample_stats(query)
        if population == "pool":
            if candidates is None:
                raise ValueError("a pool population needs its candidates")
            docs = self._allowed(query, candidates)
        elif population == "collection":
            docs = self._allowed(query, None)
        else:
            raise ValueError(f"unknown population {population!r}")
        collection = self._sub_collection(docs)[0] if len(docs) else None
        if collection is None:
            raise QueryError("the population holds no document to normalise over")
        p = paragraph_similarity(query.sentence_vectors, query.paragraph_lengths, collection)
        return ParagraphStats(row_stats(p), population, len(docs))

    def _remember_stats(self, query: Query, stats: ParagraphStats) -> None:
        """Keep an indexed source's statistics when they are the default ranking's."""
        default = "sample" if self._mode(SearchOptions()) == "candidate" else "collection"
        if query.source_index is not None and stats.population == default:
            with self._source_stats_lock:
                self._source_stats[query.source_index] = stats

    def _sdr(self, query: Query, docs: np.ndarray, normalize: bool, mode: str, pooled: bool):
        """SDR scores of `docs` (others get -inf), the paragraph matrix (normalised when asked),
        the first column of each document in it (-1 for documents not scored), and the
        statistics used."""
        scores = np.full(self.index.n_documents, -np.inf)
        first_column = np.full(self.index.n_documents, -1, dtype=np.int64)
        if len(docs) == 0:
            return scores, torch.empty(0, 0), first_column, None
        if len(docs) == self.index.n_documents:
            collection, starts = self._collection, self.index.doc_paragraph_start[:-1]
        else:
            collection, starts = self._sub_collection(docs)
        first_column[docs] = starts
        pmatrix = paragraph_similarity(
            query.sentence_vectors, query.paragraph_lengths, collection
        )  # (I, J)
        used = None
        if normalize:
            if mode == "candidate":
                used = self._sample_stats(query)
            else:
                used = ParagraphStats(
                    row_stats(pmatrix), "pool" if pooled else "collection", len(docs)
                )
            self._remember_stats(query, used)
            pmatrix = normalize_rows(pmatrix, used.stats)
        scores[docs] = document_scores(pmatrix, collection.document_lengths).numpy()
        return scores, pmatrix, first_column, used

    def _retrieve_candidates(self, query: Query, allowed: np.ndarray) -> np.ndarray:
        """Documents worth scoring: those holding the nearest sentences of each query sentence,
        the nearest paragraphs of each query paragraph, and the nearest documents.

        Paragraph and document probes are the mean of the query's sentence vectors (per
        paragraph, and overall), which needs no further encoding of the query.
        """
        index, config = self.index, self.config
        docs: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        for hits in index.indices["sentence"].search(
            query.sentence_vectors.numpy(), config.candidate_sentence_k
        ):
            docs.append(self._sentence_doc[np.searchsorted(index.ids["sentence"], hits.ids)])
            scores.append(hits.scores)
        segments = torch.repeat_interleave(
            torch.arange(len(query.paragraph_lengths)), query.paragraph_lengths
        )
        probes = segment_mean(query.sentence_vectors, segments, len(query.paragraph_lengths))
        for hits in index.indices["paragraph"].search(probes.numpy(), config.candidate_paragraph_k):
            rows = np.searchsorted(index.ids["paragraph"], hits.ids)
            docs.append(np.searchsorted(index.doc_paragraph_start, rows, side="right") - 1)
            scores.append(hits.scores)
        centroid = F.normalize(query.sentence_vectors.mean(0, keepdim=True), dim=-1)
        for hits in index.indices["document"].search(centroid.numpy(), config.candidate_document_k):
            docs.append(np.searchsorted(index.doc_ids, hits.ids))
            scores.append(hits.scores)
        # keep the documents whose best hit is strongest, at most `candidate_max_documents`
        best = np.full(index.n_documents, -np.inf)
        np.maximum.at(best, np.concatenate(docs), np.concatenate(scores))
        mask = np.zeros(index.n_documents, dtype=bool)
        mask[allowed] = True
        best[~mask] = -np.inf
        found = np.flatnonzero(np.isfinite(best))
        if len(found) > config.candidate_max_documents:
            found = found[np.argsort(-best[found], kind="stable")[: config.candidate_max_documents]]
        return np.sort(found)

    def _document_hits(self, query, ranked, scores, pmatrix, columns, options, *, mode, scored):
        """The ranked documents as hits, with their best paragraph matches when `pmatrix` is
        given; `scored` is how many documents the ranking chose from."""
        index = self.index
        hits = [
            DocumentHit(
                document_id=index.external_ids[d],
                title=index.titles[d],
                score=float(scores[d]),
                rank=r + 1,
            )
            for r, d in enumerate(ranked)
        ]
        if pmatrix is not None and len(ranked) and options.matches_per_result > 0:
            wanted: list[int] = []
            per_hit = []
            for d in ranked:
                c0 = int(columns[d])
                block = pmatrix[
                    :, c0 : c0 + index.doc_paragraph_start[d + 1] - index.doc_paragraph_start[d]
                ]  # (I, j)
                best, where = block.max(dim=1)  # (I,)
                top = torch.argsort(best, descending=True, stable=True)[
                    : options.matches_per_result
                ]
                pairs = [
                    (
                        int(i),
                        int(index.paragraph_ids[index.doc_paragraph_start[d] + int(where[i])]),
                        float(best[i]),
                    )
                    for i in top
                ]
                wanted.extend(p for _, p, _ in pairs)
                per_hit.append(pairs)
            offsets = paragraph_offsets(self.engine, wanted)
            texts = document_texts(self.engine, [int(index.doc_ids[d]) for d in ranked])
            for hit, d, pairs in zip(hits, ranked, per_hit, strict=True):
                text = texts[int(index.doc_ids[d])]
                for i, pid, score in pairs:
                    s0, s1 = query.paragraphs[i]
                    t0, t1 = offsets[pid]
                    hit.matches.append(
                        ParagraphMatch(
                            source_paragraph=i,
                            source_start=s0,
                            source_end=s1,
                            target_paragraph_id=pid,
                            target_start=t0,
                            target_end=t1,
                            score=score,
                            source_text=query.text[s0:s1],
                            target_text=text[t0:t1],
                        )
                    )
        return SearchResult(results=hits, mode=mode, scored_documents=scored)

    def _similar_units(self, query: Query, options: SearchOptions) -> SearchResult:
        level = options.granularity.value
        index = self.index
        vectors = self.level_vectors(query, level).numpy()
        source_doc = (
            int(index.doc_ids[query.source_index]) if query.source_index is not None else None
        )
        allowed_docs = None
        if options.candidates is not None:
            allowed_docs = {int(index.doc_ids[p]) for p in self._allowed(query, options.candidates)}
        k = options.top_k * 4 + 10
        # a pool is searched among its own units only: nearest units of the whole collection
        # would crowd its units out (fewer than top_k hits, or scores below their best)
        within = (
            units_of_documents(self.engine, level, sorted(allowed_docs))
            if allowed_docs is not None
            else None
        )
        best: dict[int, float] = {}
        for hits in index.indices[level].search(vectors, k, within=within):
            for unit_id, score in zip(hits.ids.tolist(), hits.scores.tolist(), strict=True):
                if score > best.get(unit_id, -np.inf):
                    best[unit_id] = score
        rows = level_unit_rows(self.engine, level, list(best))
        keep = [
            u
            for u in best
            if rows[u]["doc_id"] != source_doc
            and (allowed_docs is None or rows[u]["doc_id"] in allowed_docs)
        ]
        # ties: a scrambled order (Knuth's multiplicative hash), not the id order
        keep.sort(key=lambda u: (-best[u], (u * 2654435761 + self.config.seed) % 4294967296))
        keep = keep[: options.top_k]
        texts = document_texts(self.engine, sorted({rows[u]["doc_id"] for u in keep}))
        position = {int(d): i for i, d in enumerate(index.doc_ids)}
        results = []
        for rank, u in enumerate(keep, start=1):
            row = rows[u]
            d = position[row["doc_id"]]
            results.append(
                UnitHit(
                    unit_id=u,
                    level=level,
                    document_id=index.external_ids[d],
                    title=index.titles[d],
                    score=float(best[u]),
                    rank=rank,
                    start=row["char_start"],
                    end=row["char_end"],
                    text=texts[row["doc_id"]][row["char_start"] : row["char_end"]],
                    section_title=row.get("title"),
                )
            )
        scored = (
            len(allowed_docs)
            if allowed_docs is not None
            else index.n_documents - (source_doc is not None)
        )
        return SearchResult(results=results, mode="exhaustive", scored_documents=scored)


def open_searcher(
    settings: Settings, engine: Engine, config: SearchConfig | None = None
) -> Searcher:
    """A searcher over the active version, with the encoder that version was built with.

    Raises:
        NoActiveIndexError: nothing published yet.
        IndexMismatchError: the encoder found now is not the one the index was built with.
    """
    version = active_version(engine)
    index = LoadedIndex.load(engine, version)
    if settings.index.use_gpu == "auto" and gpu_count() > 0:  # faiss-gpu sees a GPU
        index = replace(index, indices={k: v.to_gpu() for k, v in index.indices.items()})
    if config is None:
        config = SearchConfig(device=settings.encoder.device)
    recorded = index.manifest["encoder"]
    source = recorded.get("source") or recorded["name"]
    encoder = load_configured_encoder(settings, source)
    check_encoder(recorded, encoder.identity(), source, version.version_id)
    splitter = load_splitter(settings.punkt_params)
    if splitter.sha256 != index.manifest["splitter"]["params_sha256"]:
        logger.warning("The sentence splitter differs from the one the index was built with")
    return Searcher(index, encoder, splitter, engine, config)


def check_encoder(recorded: dict, found: dict, source: str, version_id: int) -> None:
    """The encoder found now must be the one the version was built with: the same
    configuration and, when the build recorded one, the same checkpoint (weights) sha256.

    Raises:
        IndexMismatchError: naming what differs (both hashes).
    """
    for key, what in (("config_hash", "configuration"), ("checkpoint_sha256", "checkpoint")):
        want, have = recorded.get(key), found.get(key)
        if want is not None and have != want:
            raise IndexMismatchError(
                f"the encoder at {source!r} is not the one version {version_id} was built with: "
                f"its {what} sha256 is {have}, the index recorded {want}; load the encoder the "
                "index was built with, or reindex with this one"
            )


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of `arange(start, end)` for each pair, without a Python loop."""
    lengths = ends - starts
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(int(lengths.sum())) + offsets
