"""Okapi BM25 over the documents' texts, changed one document at a time.

Scores are bm25s' defaults (the Lucene variant, k1 = 1.5, b = 0.75, English stop words):

    score(q, d) = sum over query tokens t of idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = log(1 + (N - df + 0.5) / (df + 0.5))

bm25s tokenises; the index keeps its own postings (token -> documents and term frequencies)
so that adding or removing a document touches that document's tokens only. A change returns
a new index that shares every untouched posting with the old one (copy on write): requests
still running on the old version keep a consistent index.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

K1 = 1.5
B = 0.75


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """bm25s' tokenisation (lower case, English stop words removed), as strings."""
    import bm25s

    if not texts:
        return []
    return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)


@dataclass(frozen=True)
class Posting:
    """The documents holding one token `(n,)` (ascending ids), its count in each `(n,)` and
    their lengths `(n,)` (a document never changes: an edit is a removal and an addition)."""

    doc_ids: np.ndarray
    counts: np.ndarray
    lengths: np.ndarray


class Bm25Index:
    """BM25 postings of a collection, keyed by the documents' ids (not their positions)."""

    def __init__(
        self,
        postings: dict[str, Posting],
        lengths: dict[int, int],
        terms: dict[int, tuple[str, ...]],
    ) -> None:
        self._postings = postings
        self._lengths = lengths  # doc id -> tokens after stop words
        self._terms = terms  # doc id -> its distinct tokens (to undo its postings)
        self._total = sum(lengths.values())
        self._sorted_ids: np.ndarray | None = None
        self._terms_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def build(cls, doc_ids: Iterable[int], texts: Sequence[str]) -> Bm25Index:
        """The index of `texts`, the documents `doc_ids`, in one pass: every (token, document)
        count at once, grouped by token."""
        import bm25s

        doc_ids = np.asarray(list(doc_ids), dtype=np.int64)  # (D,)
        if len(doc_ids) != len(texts):
            raise ValueError(f"{len(doc_ids)} document ids for {len(texts)} texts")
        if not len(doc_ids):
            return cls({}, {}, {})
        tokenized = bm25s.tokenize(list(texts), stopwords="en", show_progress=False)
        vocabulary = np.array(sorted(tokenized.vocab, key=tokenized.vocab.__getitem__), object)
        lengths = np.array([len(ids) for ids in tokenized.ids], dtype=np.int64)  # (D,)
        tokens = np.concatenate([np.asarray(ids, np.int64) for ids in tokenized.ids])  # (T,)
        docs = np.repeat(np.argsort(np.argsort(doc_ids)), lengths)  # (T,) rank of the doc id
        ranked_ids = np.sort(doc_ids)
        pairs, counts = np.unique(tokens * len(doc_ids) + docs, return_counts=True)  # (P,)
        token_of, doc_of = np.divmod(pairs, len(doc_ids))  # (P,) sorted by token, then doc
        bounds = np.flatnonzero(np.diff(token_of)) + 1
        doc_length = lengths[np.argsort(doc_ids)]  # (D,) by rank
        postings = {
            str(vocabulary[token_of[start]]): Posting(
                ranked_ids[doc_of[start:end]],
                counts[start:end].astype(np.int32),
                doc_length[doc_of[start:end]].astype(np.int32),
            )
            for start, end in zip(
                np.concatenate([[0], bounds]), np.concatenate([bounds, [len(pairs)]]), strict=True
            )
        }
        terms = {
            int(d): tuple(str(vocabulary[t]) for t in dict.fromkeys(ids))
            for d, ids in zip(doc_ids, tokenized.ids, strict=True)
        }
        return cls(postings, dict(zip(doc_ids.tolist(), lengths.tolist(), strict=True)), terms)

    @property
    def n_documents(self) -> int:
        return len(self._lengths)

    def with_changes(self, removed: Iterable[int], added: Iterable[tuple[int, str]]) -> Bm25Index:
        """A new index without the `removed` documents and with the `added` ones."""
        added = list(added)
        postings, lengths, terms = dict(self._postings), dict(self._lengths), dict(self._terms)
        drop: dict[str, set[int]] = {}
        for doc_id in removed:
            for token in terms.pop(doc_id):
                drop.setdefault(token, set()).add(doc_id)
            del lengths[doc_id]
        put: dict[str, list[tuple[int, int, int]]] = {}
        for (doc_id, _), tokens in zip(added, tokenize([text for _, text in added]), strict=True):
            counts = Counter(tokens)
            for token, count in counts.items():
                put.setdefault(token, []).append((doc_id, count, len(tokens)))
            lengths[doc_id] = len(tokens)
            terms[doc_id] = tuple(counts)
        for token in drop.keys() | put.keys():
            postings[token] = _changed(postings.get(token), drop.get(token, ()), put.get(token, []))
            if not len(postings[token].doc_ids):
                del postings[token]
        return Bm25Index(postings, lengths, terms)

    def scores(self, text: str, doc_ids: np.ndarray) -> np.ndarray:
        """The BM25 score of each of `doc_ids` `(D,)` (ascending ids) for the query `text`;
        all 0 when the query has no token that a document holds.

        The arithmetic is bm25s' own, so that the scores are bm25s' to the bit: each (token,
        document) term is rounded to float32, and the terms are summed in float32 in the
        order of the query's tokens (a repeated token counts each time)."""
        out = np.zeros(len(doc_ids), dtype=np.float32)
        tokens = [t for t in tokenize([text])[0] if t in self._postings] if text else []
        if not tokens or not len(doc_ids):
            return out.astype(np.float64)
        own = self._ids()
        # the caller's rows of this index's documents (the same ids, unless a caller ranks
        # another set: then the documents it does not hold are left out)
        same = np.array_equal(own, doc_ids)
        rows = np.arange(len(own)) if same else np.searchsorted(doc_ids, own)  # (N,)
        known = (
            np.ones(len(own), bool) if same else doc_ids[np.minimum(rows, len(doc_ids) - 1)] == own
        )
        for token in tokens:
            where, terms = self._term(token)  # rows of this index, float32 terms
            keep = known[where]
            out[rows[where[keep]]] += terms[keep]
        return out.astype(np.float64)

    def _ids(self) -> np.ndarray:
        """`(N,)` this index's document ids, ascending (computed once)."""
        if self._sorted_ids is None:
            self._sorted_ids = np.array(sorted(self._lengths), dtype=np.int64)
        return self._sorted_ids

    def _term(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows (in `_ids`) of the documents holding `token` and their float32 BM25
        terms, computed once per index: N and the average length are fixed for it."""
        found = self._terms_cache.get(token)
        if found is None:
            posting = self._postings[token]
            n, df = len(self._lengths), len(posting.doc_ids)
            idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
            tf = posting.counts.astype(np.float32)
            norm = K1 * ((1 - B) + B * posting.lengths / (self._total / n))  # float64
            terms = (idf * (tf / (norm + tf))).astype(np.float32)
            found = (np.searchsorted(self._ids(), posting.doc_ids), terms)
            self._terms_cache[token] = found
        return found


def _changed(old: Posting | None, drop: Iterable[int], put: list[tuple[int, int, int]]) -> Posting:
    """`old` without the documents of `drop`, with those of `put` (id, count, length),
    ascending by id."""
    empty = Posting(np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.int32))
    old = old if old is not None else empty
    keep = ~np.isin(old.doc_ids, np.fromiter(drop, np.int64))
    new = np.array(put, dtype=np.int64).reshape(-1, 3)  # (a, 3)
    doc_ids = np.concatenate([old.doc_ids[keep], new[:, 0]])
    order = np.argsort(doc_ids, kind="stable")
    return Posting(
        doc_ids[order],
        np.concatenate([old.counts[keep], new[:, 1].astype(np.int32)])[order],
        np.concatenate([old.lengths[keep], new[:, 2].astype(np.int32)])[order],
    )
