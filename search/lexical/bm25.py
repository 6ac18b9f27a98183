"""Okapi BM25 over the documents' texts, changed one document at a time.

Scores are bm25s' defaults (the Lucene variant, k1 = 1.5, b = 0.75, English stop words,
optionally Snowball-stemmed):

    score(q, d) = sum over query tokens t of idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = log(1 + (N - df + 0.5) / (df + 0.5))

computed with bm25s' own arithmetic, so that the scores are bm25s' to the bit. bm25s
tokenises; the index keeps its own postings (token -> documents and term frequencies), so that
adding or removing a document rewrites that document's postings only. A change returns a new
index that shares every other posting with the old one (copy on write): requests still running
on the old version keep a consistent index.

Query variants (`search.lexical.query_terms`) score the same postings with other query terms,
through `Bm25Index.weighted_scores`.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from docsim.models.inference.pacing import before_batch
from docsim.search.lexical.posting_lists import (
    Posting,
    Vocabulary,
    changed_parts,
    counted_postings,
)
from docsim.search.lexical.tokens import tokenize

K1 = 1.5
B = 0.75
# documents tokenised and counted at a time by `Bm25Index.build`
BUILD_DOCUMENTS = 1024
# query tokens scored between two calls of the request's pacing hook (`models.inference.pacing`)
PACED_TOKENS = 4096
# a table maps postings' id offsets to rows where the ids span at most this many offsets a
# document (4 bytes each; ids freed by deletions leave holes), plus the slack
ROW_TABLE_SPAN = 4
ROW_TABLE_SLACK = 4096
# the most memory the cache of tokens' BM25 terms holds (at a hundred times AILA, every token
# cached would take 0.7 to 1.4 GB: 170 million posting entries)
WEIGHTS_CACHE_BYTES = 256 << 20


@dataclass(frozen=True)
class Bm25Collection:
    """What BM25's idf and length normalisation need of the whole collection: the document
    count, the total length and each token's document frequency. Shards of a collection sum
    theirs (`combine`), so that each scores its own documents exactly as one index would."""

    documents: int
    total_length: int
    frequencies: Mapping[str, int]

    @staticmethod
    def combine(parts: Iterable[Bm25Collection]) -> Bm25Collection:
        parts = list(parts)
        frequencies: Counter[str] = Counter()
        for part in parts:
            frequencies.update(part.frequencies)
        return Bm25Collection(
            sum(p.documents for p in parts), sum(p.total_length for p in parts), frequencies
        )


class Bm25Index:
    """BM25 postings of a collection, keyed by the documents' ids (not their positions).

    With `collection`, the index holds part of a larger collection (a shard) and scores with
    that collection's idf and average length."""

    def __init__(
        self,
        postings: dict[str, Posting],
        lengths: dict[int, int],
        terms: dict[int, np.ndarray],
        counts: dict[int, np.ndarray],
        stemmer: str | None = None,
        collection: Bm25Collection | None = None,
        vocabulary: Vocabulary | None = None,
        base: int = 0,
    ) -> None:
        self.stemmer = stemmer  # the Snowball language of the tokens, or None
        self._postings = postings  # ids less `_base`
        self._base = base
        self._lengths = lengths  # doc id -> tokens after stop words
        # doc id -> `(t,)` the ids in `_vocabulary` of its distinct tokens (to undo its
        # postings; for RM3), and `(t,)` the count of each (both `compact`)
        self._terms = terms
        self._counts = counts
        self._vocabulary = vocabulary if vocabulary is not None else Vocabulary()
        self.doc_ids = np.array(sorted(lengths), dtype=np.int64)  # (N,) the order of `scores`
        length_of = np.array([lengths[d] for d in self.doc_ids.tolist()], np.float64)
        self.collection = collection
        if collection is None:
            self._average = float(length_of.sum()) / max(len(lengths), 1)
        else:
            self._average = float(collection.total_length) / max(collection.documents, 1)
        # (N,) float64: each document's length normalisation, `K1 * (1 - B + B * |d| / avgdl)`
        self._norm = K1 * ((1 - B) + B * length_of / self._average)
        self._row_of = row_lookup(self.doc_ids, base)
        self._weights = WeightsCache()  # each token's rows and terms, computed on first use

    @classmethod
    def build(
        cls,
        doc_ids: Iterable[int],
        texts: Sequence[str],
        stemmer: str | None = None,
        *,
        batch: int = BUILD_DOCUMENTS,
    ) -> Bm25Index:
        """The index of `texts`, the documents `doc_ids` (`build_sorted`, `batch` at a time)."""
        doc_ids = np.asarray(list(doc_ids), dtype=np.int64)  # (D,)
        if len(doc_ids) != len(texts):
            raise ValueError(f"{len(doc_ids)} document ids for {len(texts)} texts")
        order = np.argsort(doc_ids, kind="stable")  # (D,)
        batches = (
            [texts[i] for i in order[s : s + batch].tolist()] for s in range(0, len(order), batch)
        )
        return cls.build_sorted(doc_ids[order], batches, stemmer, batch=batch)

    @classmethod
    def build_sorted(
        cls,
        doc_ids: np.ndarray,
        text_batches: Iterable[Sequence[str]],
        stemmer: str | None = None,
        *,
        batch: int = BUILD_DOCUMENTS,
    ) -> Bm25Index:
        """The index of the documents `doc_ids` `(D,)` (ascending), whose texts come in
        `text_batches`, in that order. Each batch is tokenised and counted on its own, and
        each document's distinct tokens and counts kept; then each token's posting gets its
        exact size, and the documents' counts are written into it, `batch` documents at a
        time. What the build holds beyond the index is one batch's texts and each document's
        tokens as 4-byte ids, instead of every token of the collection at once (the
        collection-wide arrays took 1.7 GiB above the index at ten times AILA)."""
        postings, lengths, terms, counts, vocabulary, base = counted_postings(
            doc_ids, text_batches, stemmer, batch
        )
        return cls(postings, lengths, terms, counts, stemmer, vocabulary=vocabulary, base=base)

    @property
    def n_documents(self) -> int:
        return len(self._lengths)

    def with_changes(self, removed: Iterable[int], added: Iterable[tuple[int, str]]) -> Bm25Index:
        """A new index without the `removed` documents and with the `added` ones (new ids)."""
        added = list(added)
        tokens = tokenize([text for _, text in added], self.stemmer)
        parts = (self._postings, self._lengths, self._terms, self._counts)
        postings, lengths, terms, counts, vocabulary, base = changed_parts(
            (*parts, self._vocabulary, self._base),
            removed,
            [(doc_id, t) for (doc_id, _), t in zip(added, tokens, strict=True)],
        )
        # whole again
        return Bm25Index(postings, lengths, terms, counts, self.stemmer, None, vocabulary, base)

    def local_collection(self) -> Bm25Collection:
        """This index's own document count, total length and document frequencies."""
        return Bm25Collection(
            len(self._lengths),
            int(sum(self._lengths.values())),
            {token: len(ids) for token, (ids, _) in self._postings.items()},
        )

    def within(self, collection: Bm25Collection) -> Bm25Index:
        """This index as a shard of `collection` (the postings are shared, not copied)."""
        return Bm25Index(
            self._postings,
            self._lengths,
            self._terms,
            self._counts,
            self.stemmer,
            collection,
            self._vocabulary,
            self._base,
        )

    def term_counts(self, doc_id: int) -> dict[str, int]:
        """How often each token occurs in the document `doc_id` (after stop words)."""
        words = self._vocabulary.decoded(self._terms[doc_id])
        return dict(zip(words, self._counts[doc_id].tolist(), strict=True))

    def tokens(self, text: str) -> list[str]:
        """The query tokens of `text`, tokenised as the documents were."""
        return tokenize([text], self.stemmer)[0] if text else []

    def scores(self, text: str) -> np.ndarray:
        """The BM25 score of every document `(N,)`, in the order of `doc_ids`, for the query
        `text`; all 0 when the query has no token that a document holds.

        As bm25s does: each (token, document) term is rounded to float32, and the terms are
        summed in float32 in the order of the query's tokens (a repeated token counts each
        time)."""
        return self.token_scores(self.tokens(text))

    def token_scores(self, tokens: Sequence[str]) -> np.ndarray:
        """`scores` of a query already tokenised (`tokens`, as `tokens` gives them)."""
        out = np.zeros(len(self.doc_ids), dtype=np.float32)
        for i, token in enumerate(tokens):
            if i % PACED_TOKENS == 0:
                before_batch(min(PACED_TOKENS, len(tokens) - i))  # a long query yields
            if token in self._postings:
                rows, weights = self._weight(token)
                out[rows] += weights
        return out.astype(np.float64)

    def weighted_scores(self, weights: Mapping[str, float]) -> np.ndarray:
        """`(N,)` sum over tokens of `weights[token]` times the token's BM25 term."""
        out = np.zeros(len(self.doc_ids), dtype=np.float64)
        for token, weight in weights.items():
            if token in self._postings:
                rows, terms = self._weight(token)
                out[rows] += weight * terms
        return out

    def document_frequency(self, token: str) -> int:
        """The documents of this index holding `token` (the postings a query term reads)."""
        posting = self._postings.get(token)
        return 0 if posting is None else len(posting[0])

    def holders(self, token: str) -> np.ndarray:
        """`(df,)` the ids of the documents holding `token`, ascending (int64)."""
        posting = self._postings.get(token)
        if posting is None:
            return np.empty(0, np.int64)
        return posting[0].astype(np.int64) + self._base

    def idf(self, token: str) -> float:
        """BM25's idf of `token` (0 for a token no document holds)."""
        if self.collection is not None:
            n, df = self.collection.documents, self.collection.frequencies.get(token, 0)
        else:
            posting = self._postings.get(token)
            n, df = len(self.doc_ids), len(posting[0]) if posting is not None else 0
        if not df:
            return 0.0
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def _weight(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows (in `doc_ids`) of the documents holding `token` and their float32 terms,
        computed once per index: N and the average length are fixed for it."""
        found = self._weights.get(token)
        if found is None:
            offsets, counts = self._postings[token]
            idf = np.float32(self.idf(token))
            rows = rows_of(offsets, self._row_of, self.doc_ids, self._base)  # (df,)
            tf = counts.astype(np.float32)
            found = (rows, (idf * (tf / (self._norm[rows] + tf))).astype(np.float32))
            # rows that are the posting's own offsets, mapped from its file, cost nothing
            self._weights.keep(token, found, found[1].nbytes + (rows is not offsets) * rows.nbytes)
        # as numpy's fancy indexing takes them: converted once here, not at each use
        return found[0].astype(np.intp, copy=False), found[1]


class WeightsCache:
    """Tokens' rows and BM25 terms kept for the next queries while they fit in
    `WEIGHTS_CACHE_BYTES`, the oldest dropped first."""

    def __init__(self) -> None:
        self._found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._sizes: dict[str, int] = {}  # the bytes each kept token holds
        self.held_bytes = 0  # their sum
        self._lock = threading.Lock()

    def get(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        return self._found.get(token)

    def __contains__(self, token: str) -> bool:
        return token in self._found

    def __len__(self) -> int:
        return len(self._found)

    def keep(self, token: str, found: tuple[np.ndarray, np.ndarray], size: int) -> None:
        """Keeps `found`, `size` bytes, dropping the oldest tokens while it would not fit
        (nothing kept that could never fit)."""
        if size > WEIGHTS_CACHE_BYTES:
            return
        with self._lock:
            if token in self._found:
                return
            while self.held_bytes + size > WEIGHTS_CACHE_BYTES:
                oldest = next(iter(self._found))
                del self._found[oldest]
                self.held_bytes -= self._sizes.pop(oldest)
            self._found[token] = found
            self._sizes[token] = size
            self.held_bytes += size


def rows_of(
    offsets: np.ndarray, table: np.ndarray | None, doc_ids: np.ndarray, base: int
) -> np.ndarray:
    """`(df,)` the rows in `doc_ids` of the documents at `offsets` from `base`, found as
    `row_lookup`'s `table` says (a binary search where the ids spread too far for a table)."""
    if table is None:
        return offsets
    if len(table):
        rows: np.ndarray = table[offsets]
        return rows
    return np.searchsorted(doc_ids, offsets.astype(np.int64) + base).astype(np.int32)


def row_lookup(doc_ids: np.ndarray, base: int) -> np.ndarray | None:
    """How `Bm25Index._rows` finds a posting's rows among `doc_ids` `(N,)` (ascending): None
    where the ids are `base, base + 1, ...` (an offset is its row); else a table `(span,)`
    int32 of each offset's row (-1 for an id no document has), where the ids span at most
    `ROW_TABLE_SPAN` times as many offsets as there are documents and none is below `base`;
    else an empty table (search the ids)."""
    n = len(doc_ids)
    if not n or (int(doc_ids[0]) == base and int(doc_ids[-1]) == base + n - 1):
        return None
    span = int(doc_ids[-1]) - base + 1
    if int(doc_ids[0]) < base or span > ROW_TABLE_SPAN * n + ROW_TABLE_SLACK:
        return np.empty(0, np.int32)
    table = np.full(span, -1, np.int32)
    table[doc_ids - base] = np.arange(n, dtype=np.int32)
    return table
