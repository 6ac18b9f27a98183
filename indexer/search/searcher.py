"""Ranking a collection against a query document.

`Searcher.similar` is the one code path behind `POST /similar` and `docsim evaluate`; a request
without a method gets `SearchConfig.default_method`.

- `sdr`: the paper's hierarchical scoring (`indexer.search.sdr`). `auto` mode scores every
  document (exhaustive) up to `exhaustive_max_sentences`, and otherwise only the candidates
  retrieved through the FAISS indices (`indexer.search.candidates`).
- `sdr-window`: `sdr` with the query's paragraphs cut into pseudo-paragraphs of
  `query_window` sentences, so that the per-paragraph z-score acts on a one-paragraph query.
- `document`: cosine of the document vectors.
- `maxsim`, `best-sentence`, `ot`: sentence-set matching without paragraphs
  (`models.alignment`): the mean best match of the query's sentences, the single best pair,
  and the optimal-transport alignment of the two sentence sets.
- `bm25`: Okapi BM25 over the document texts (`indexer.search.lexical`); `bm25-reduced`: the
  query cut to its highest-IDF terms; `bm25-rm3`: with RM3 pseudo-relevance feedback.
- `hybrid`: reciprocal-rank fusion of `bm25` and `sdr`, score = sum 1 / (60 + rank).
- `fused`: weighted sum of the per-query normalised scores of `fusion_weights`' methods
  (`indexer.search.fusion`).
- Other granularities rank sections, paragraphs or sentences (`indexer.search.units`), with
  `sdr` or `document` (both then mean the unit vectors' cosine).
Ties are broken by a fixed random order of the documents, never by id or file order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import torch
from sqlalchemy import Engine

from indexer.config import Settings, load_configured_encoder
from indexer.search.candidates import retrieve_candidates
from indexer.search.fusion import fuse
from indexer.search.lexical import Bm25Index, reduced_query, rm3_weights
from indexer.search.loaded_index import IndexMismatchError, LoadedIndex
from indexer.search.matches import document_hits
from indexer.search.queries import encode_document, encode_levels, indexed_query
from indexer.search.ranking import reciprocal_rank_fusion, top_k
from indexer.search.sdr import SdrScorer, carry_rows
from indexer.search.shards import ShardedLevel, ShardedSdr, query_on_shards
from indexer.search.types import (
    LEXICAL,
    SENTENCE_SETS,
    WHOLE_DOCUMENT_ONLY,
    DocumentNotFoundError,
    Granularity,
    Method,
    ParagraphStats,
    Query,
    QueryError,
    ScoringMode,
    SearchConfig,
    SearchOptions,
    SearchResult,
    search_config,
)
from indexer.search.units import similar_units
from indexer.store.reader import document_paragraph_texts, document_texts
from indexer.store.vector_index import gpu_count
from indexer.store.versions import active_version
from indexer.text.documents import Document, SourceDocument
from indexer.text.sentences import SentenceSplitter, load_splitter
from indexer.text.split import split_document
from models.alignment import best_pair_scores, maxsim_scores, ot_scores, sentence_best
from models.encoder import Encoder
from models.inference import TORCH, BackendUnavailableError
from models.precision import resolve_device
from models.scoring import RaggedCollection

logger = logging.getLogger(__name__)


class Searcher:
    """Answers queries against one loaded index version."""

    def __init__(
        self,
        index: LoadedIndex,
        encoder: Encoder,
        splitter: SentenceSplitter,
        engine: Engine,
        config: SearchConfig | None = None,
        *,
        sentences_on_device: torch.Tensor | None = None,
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
        self._position = {external: i for i, external in enumerate(index.external_ids)}
        self._sdr = SdrScorer(
            index,
            resolve_device(self.config.device),
            np.sort(sample),
            "sample" if self._mode(SearchOptions()) == "candidate" else "collection",
            sentences_on_device,
        )
        n_sentences = len(index.ids["sentence"])
        self._sentence_doc = (
            np.searchsorted(self._sdr.doc_sentence_start, np.arange(n_sentences), side="right") - 1
        )  # (n,) the document position of each sentence row
        self._bm25: Bm25Index | None = None
        self._bm25_lock = threading.Lock()
        # BM25 over paragraphs and each of its rows' document position (J,), on first use; a
        # changed searcher builds its own again
        self._paragraph_bm25: tuple[Bm25Index, np.ndarray] | None = None

    def use_shards(
        self, shards: ShardedSdr | None, levels: Mapping[str, ShardedLevel] | None = None
    ) -> None:
        """Score exhaustive SDR and the sentence-set methods on `shards` (None: here), and
        search the unit levels this index maps on them (`levels`)."""
        self._sdr.shards = shards
        self.index.indices.update(levels or {})

    @property
    def tiebreak(self) -> np.ndarray:
        """`(D,)` the fixed random order that breaks ties between documents."""
        return self._tiebreak

    def with_changes(self, index: LoadedIndex) -> Searcher:
        """A searcher over `index`: this searcher's index with a document change applied
        (`LoadedIndex.with_changes`). What follows one document is carried over and changed for
        the changed documents only: the BM25 postings, and the copy of the sentence vectors on
        the device (only added sentences are copied). The z-score statistics depend on every
        document, so the new searcher computes them afresh; this one keeps serving unchanged."""
        old, sentences = self.index, self._sdr.collection.sentences
        changed = Searcher(
            index,
            self.encoder,
            self.splitter,
            self.engine,
            self.config,
            sentences_on_device=carry_rows(
                old.ids["sentence"], sentences, index.ids["sentence"], index.collection.sentences
            ),
        )
        with self._bm25_lock:
            bm25 = self._bm25
        if bm25 is not None:  # unit ids are never reused: a new id is a new document
            removed = np.setdiff1d(old.doc_ids, index.doc_ids).tolist()
            added = np.setdiff1d(index.doc_ids, old.doc_ids).tolist()
            texts = document_texts(self.engine, added)
            changed._bm25 = bm25.with_changes(removed, [(d, texts[d]) for d in added])
            if not np.array_equal(changed._bm25.doc_ids, index.doc_ids):
                raise IndexMismatchError("BM25 postings and the index hold other documents")
        return changed

    # --- queries --------------------------------------------------------------------------
    def position(self, external_id: str) -> int:
        try:
            return self._position[external_id]
        except KeyError:
            raise DocumentNotFoundError(
                f"document {external_id!r} is not in the active index"
            ) from None

    def encode_document(self, document: Document) -> Query:
        return encode_document(self.encoder, document)

    def query_from_source(self, source: SourceDocument) -> Query:
        return self.encode_document(split_document(source, self.splitter))

    def query_from_index(self, external_id: str) -> Query:
        """The stored vectors of an indexed document, as a query that excludes itself."""
        d = self.position(external_id)
        return indexed_query(self.index, self.engine, d, self._sdr.doc_sentence_start)

    def level_vectors(self, query: Query, level: str) -> torch.Tensor:
        """The query's vectors at `level` `(m, d)`, encoding its chunks on first use."""
        if level not in query.level_vectors:
            encode_levels(self.encoder, query, int(self.index.manifest["chunk_tokens"]))
        return query.level_vectors[level]

    # --- ranking ----------------------------------------------------------------------------
    def similar(self, query: Query, options: SearchOptions) -> SearchResult:
        if options.method is not None:
            method = options.method
        elif options.granularity is Granularity.document:
            method = self.config.default_method
        else:  # units are ranked by their vectors' cosine, whatever the document default
            method = Method.sdr
        options = replace(options, method=method)
        if options.granularity is not Granularity.document:
            if method in WHOLE_DOCUMENT_ONLY:
                raise QueryError(
                    f"method {method.value!r} ranks whole documents; "
                    "use granularity 'document' or method 'sdr' / 'document'"
                )
            return replace(self._similar_units(query, options), method=method)
        allowed = self._allowed(query, options.candidates)
        if method in (Method.sdr, Method.sdr_window, Method.hybrid, Method.fused):
            result = self._similar_sdr(query, options, allowed)
        else:
            scores = self.method_scores(method, query, allowed)
            ranked = self._top(scores, allowed, options.top_k)
            hits = document_hits(self.index, self.engine, query, ranked, scores)
            result = SearchResult(hits, mode="exhaustive", scored_documents=len(allowed))
        return replace(result, method=method)

    def _similar_sdr(
        self, query: Query, options: SearchOptions, allowed: np.ndarray
    ) -> SearchResult:
        """The methods built on SDR's paragraph matrix, whose best paragraph pairs explain
        each hit: `sdr`, `sdr-window`, `hybrid` and `fused` (when it weighs `sdr`)."""
        method, mode = options.method, self._mode(options)
        scored = (
            allowed
            if mode == "exhaustive"
            else retrieve_candidates(self.index, self._sentence_doc, query, allowed, self.config)
        )
        fusion = dict(self.config.fusion_weights)
        if method is Method.fused and not fusion.get(Method.sdr):
            sdr = None
        else:
            ranked_query = (
                windowed(query, self.config.query_window) if method is Method.sdr_window else query
            )
            sdr = self._sdr.score(
                ranked_query,
                scored,
                normalize=options.normalize,
                mode=mode,
                pooled=options.candidates is not None,
                remember=method is not Method.sdr_window,
            )
        pool = scored
        if method in (Method.hybrid, Method.fused) and mode != "exhaustive":
            lexical = [
                m for m in (fusion if method is Method.fused else [Method.bm25]) if m in LEXICAL
            ]
            for m in lexical:
                pool = np.union1d(
                    pool, self._top(self.method_scores(m, query, allowed), allowed, 1000)
                )
        if method is Method.hybrid:
            bm25 = self.method_scores(Method.bm25, query, allowed)
            scores = reciprocal_rank_fusion(
                [self._top(bm25, pool, len(pool)), self._top(sdr.scores, scored, len(scored))],
                self.index.n_documents,
            )
        elif method is Method.fused:
            shared: dict = {}
            components = {  # sentence matching only where SDR scored (candidate mode)
                m: sdr.scores
                if m is Method.sdr
                else self.method_scores(m, query, scored if m in SENTENCE_SETS else pool, shared)
                for m, w in fusion.items()
                if w
            }
            scores = fuse(components, fusion, pool, self.config.fusion_normaliser)
        else:
            scores = sdr.scores
        ranked = self._top(scores, pool, options.top_k)
        explaining = sdr
        shown = np.sort(ranked) if options.matches_per_result > 0 else ranked[:0]
        if sdr is None or method is Method.sdr_window:  # pairs of real paragraphs: raw P
            explaining = self._sdr.explain_columns(query, shown, None)
        elif sdr.pmatrix is None:  # scored on shards: the ranked documents' columns here
            explaining = self._sdr.explain_columns(query, shown, sdr.stats)
        hits = document_hits(
            self.index,
            self.engine,
            query,
            ranked,
            scores,
            explaining.pmatrix,
            explaining.first_column,
            options.matches_per_result,
        )
        # the statistics of a windowed query are the windows', not the paragraphs'
        stats = sdr.stats if sdr is not None and method is not Method.sdr_window else None
        return SearchResult(hits, mode=mode, scored_documents=len(pool), stats=stats)

    def method_scores(
        self, method: Method, query: Query, docs: np.ndarray, shared: dict | None = None
    ) -> np.ndarray:
        """The scores `(D,)` of a method that scores each document on its own, for the
        positions `docs` (-inf elsewhere; lexical and document-vector methods score every
        document, as cheaply). `shared` holds what several methods of one query reuse."""
        shared = {} if shared is None else shared
        config = self.config
        if method is Method.document:
            return self._document_cosine(query)
        if method is Method.bm25_paragraph:  # scored by its own, paragraph-level index
            paragraphs, doc_of = self._paragraph_bm25_index()
            return top_mean_per_group(
                paragraphs.scores(query.bm25_text),
                doc_of,
                self.index.n_documents,
                config.bm25_paragraph_top,
            )
        if method in LEXICAL:
            bm25 = self._bm25_index()
            if method is Method.bm25:
                return bm25.scores(query.bm25_text)
            tokens = bm25.tokens(query.bm25_text)  # the query variants weigh its tokens
            if method is Method.bm25_reduced:
                idf = {t: bm25.idf(t) for t in tokens}
                return bm25.weighted_scores(reduced_query(tokens, idf, config.bm25_reduced_keep))
            first = bm25.scores(query.bm25_text)
            top = self._top(first, docs, config.rm3_documents)
            feedback = [bm25.term_counts(int(self.index.doc_ids[d])) for d in top]
            weights = rm3_weights(
                tokens,
                feedback,
                first[top].tolist(),
                terms=config.rm3_terms,
                query_weight=config.rm3_query_weight,
            )
            return bm25.weighted_scores(weights)
        out = np.full(self.index.n_documents, -np.inf)
        docs = np.sort(docs)
        if not len(docs):
            return out
        if self._sdr.shards is not None:  # each shard scores its documents' sentences
            return self._sdr.shards.sentence_scores(
                query_on_shards(query, docs, self.index.n_documents),
                method.value,
                ot_reg=config.ot_reg,
                ot_iterations=config.ot_iterations,
            )
        collection = self._collection(docs)
        if method in (Method.maxsim, Method.best_sentence):
            if "best" not in shared:
                shared["best"] = sentence_best(query.sentence_vectors, collection)  # (docs, n)
            reduce = maxsim_scores if method is Method.maxsim else best_pair_scores
            out[docs] = reduce(shared["best"]).float().numpy()
        elif method is Method.ot:
            out[docs] = (
                ot_scores(
                    query.sentence_vectors,
                    collection,
                    reg=config.ot_reg,
                    iterations=config.ot_iterations,
                )
                .float()
                .numpy()
            )
        else:
            raise QueryError(f"method {method.value!r} is not a single-score method")
        return out

    def ranking_stats(self, query: Query) -> ParagraphStats:
        """The statistics a default `/similar` (normalised, mode `auto`, no pool) uses for this
        query; remembered per indexed source, as they hold for the whole version."""
        cached = self._sdr.cached_stats(query)
        if cached is not None:
            return cached
        if self._sdr.default_population == "sample":
            found = self._sdr.sample_stats(query)
        else:
            found = self._sdr.collection_stats(query)
        self._sdr.remember(query, found)
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
            return self._sdr.sample_stats(query)
        if population == "pool":
            if candidates is None:
                raise ValueError("a pool population needs its candidates")
            docs = self._allowed(query, candidates)
        elif population == "collection":
            docs = self._allowed(query, None)
        else:
            raise ValueError(f"unknown population {population!r}")
        if not len(docs):
            raise QueryError("the population holds no document to normalise over")
        return self._sdr.stats_over(query, docs, population)

    # --- helpers ----------------------------------------------------------------------------
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

    def _top(self, scores: np.ndarray, allowed: np.ndarray, k: int) -> np.ndarray:
        return top_k(scores, allowed, k, self._tiebreak)

    def _document_cosine(self, query: Query) -> np.ndarray:
        document = self.level_vectors(query, "document")[0]  # (d,)
        return (self.index.vectors["document"] @ document).numpy().astype(np.float64)

    def _collection(self, docs: np.ndarray) -> RaggedCollection:
        if len(docs) == self.index.n_documents:
            return self._sdr.collection
        return self._sdr.sub_collection(docs)[0]

    def _bm25_index(self) -> Bm25Index:
        """The BM25 postings of the collection, built on first use."""
        with self._bm25_lock:
            if self._bm25 is None:
                started = time.perf_counter()
                doc_ids = self.index.doc_ids.tolist()
                texts = document_texts(self.engine, doc_ids)
                self._bm25 = Bm25Index.build(
                    doc_ids, [texts[d] for d in doc_ids], self.config.bm25_stemmer
                )
                logger.info(
                    "Built BM25 over %d documents in %.1f s",
                    len(doc_ids),
                    time.perf_counter() - started,
                )
            return self._bm25  # built over `index.doc_ids`, in order

    def _paragraph_bm25_index(self) -> tuple[Bm25Index, np.ndarray]:
        """BM25 postings of every paragraph, and each posting row's document position."""
        with self._bm25_lock:
            if self._paragraph_bm25 is None:
                started = time.perf_counter()
                index = self.index
                texts = document_paragraph_texts(self.engine, index.doc_ids.tolist())
                ids = index.paragraph_ids  # (J,) collection order
                doc_of = np.repeat(np.arange(index.n_documents), np.diff(index.doc_paragraph_start))
                bm25 = Bm25Index.build(
                    ids.tolist(), [texts[p] for p in ids.tolist()], self.config.bm25_stemmer
                )
                order = np.argsort(ids)
                rows = order[np.searchsorted(ids[order], bm25.doc_ids)]  # (J,) by posting row
                self._paragraph_bm25 = (bm25, doc_of[rows])
                logger.info(
                    "Built paragraph BM25 over %d paragraphs in %.1f s",
                    len(ids),
                    time.perf_counter() - started,
                )
            return self._paragraph_bm25

    def _similar_units(self, query: Query, options: SearchOptions) -> SearchResult:
        index = self.index
        source = query.source_index
        allowed_docs = None
        if options.candidates is not None:
            allowed_docs = {int(index.doc_ids[p]) for p in self._allowed(query, options.candidates)}
        return similar_units(
            index,
            self.engine,
            options.granularity.value,
            self.level_vectors(query, options.granularity.value).numpy(),
            source_doc=int(index.doc_ids[source]) if source is not None else None,
            allowed_docs=allowed_docs,
            top_k=options.top_k,
            seed=self.config.seed,
        )


def top_mean_per_group(scores: np.ndarray, group: np.ndarray, n_groups: int, k: int) -> np.ndarray:
    """`(n_groups,)` the mean of each group's `k` best `scores` `(n,)` (fewer when the group
    has fewer; 0 for an empty group); `group` `(n,)` gives each score's group."""
    order = np.lexsort((-scores, group))  # by group, best first
    ranked_group = group[order]
    starts = np.searchsorted(ranked_group, np.arange(n_groups))  # (G,)
    place = np.arange(len(order)) - starts[ranked_group]  # rank within its group
    keep = place < k
    sums = np.bincount(ranked_group[keep], scores[order][keep], minlength=n_groups)
    counts = np.bincount(ranked_group[keep], minlength=n_groups)
    return np.divide(sums, counts, out=np.zeros(n_groups), where=counts > 0)


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


def open_searcher(
    settings: Settings,
    engine: Engine,
    config: SearchConfig | None = None,
    *,
    sharded: bool = False,
) -> Searcher:
    """A searcher over the active version, with the encoder that version was built with
    (`sharded`: a sharded service's coordinator, see `LoadedIndex.mapped_levels`).

    Raises:
        NoActiveIndexError: nothing published yet.
        IndexMismatchError: the encoder found now is not the one the index was built with.
    """
    version = active_version(engine)
    index = LoadedIndex.load(engine, version, sharded=sharded)
    if settings.index.use_gpu == "auto" and gpu_count() > 0:  # faiss-gpu sees a GPU
        index = replace(index, indices={k: v.to_gpu() for k, v in index.indices.items()})
    if config is None:
        config = search_config(settings, device=settings.encoder.device)
    recorded = index.manifest["encoder"]
    source = recorded.get("source") or recorded["name"]
    backend = index.manifest.get("backend") or {"name": TORCH}  # older versions: torch
    backend_dir = index.path / backend["dir"] if backend.get("dir") else None
    try:
        encoder = load_configured_encoder(
            settings, source, backend_dir, recorded.get("chunk_vectors") or "encode"
        )
    except BackendUnavailableError as error:
        raise IndexMismatchError(
            f"version {version.version_id} was built on the {backend['name']} backend, which "
            f"cannot run here: {error}"
        ) from error
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
    want_backend = recorded.get("backend") or {"name": TORCH}
    have_backend = found.get("backend") or {"name": TORCH}
    for key in ("name", "sha256"):
        if want_backend.get(key) != have_backend.get(key):
            raise IndexMismatchError(
                f"version {version_id} was encoded on the {want_backend['name']} backend "
                f"({key} {want_backend.get(key)}), but its encoder loads as "
                f"{have_backend['name']} ({key} {have_backend.get(key)}): its exported model "
                "is missing or changed; reindex"
            )
