"""BM25 over word shingles: verbatim reuse (judgments quote statutes and the judgments they
follow word for word), which unigram BM25 and the dense vectors smooth away.

A document's shingles are its runs of `n` consecutive tokens, tokenised as BM25 tokenises
(`search.lexical.tokens`: lower case, English stop words removed, optionally stemmed), each
hashed to 64 bits: a token's hash is the first 8 bytes of its BLAKE2b digest, a shingle's a
position-weighted sum of its tokens' hashes (odd multipliers, modulo 2**64) passed through a
mixing step. Two different shingles share a hash with probability about 2**-64 per pair.

Scores are BM25's Lucene variant over the shingles, as `search.lexical.bm25` scores tokens
(k1 = 1.5, b = 0.75, a document's length its number of shingles):

    score(q, d) = sum over q's shingles s of idf(s) * tf / (tf + k1 * (1 - b + b * |d| / avgdl))
    idf(s) = log(1 + (N - df + 0.5) / (df + 0.5))

a shingle repeated in the query counting each time. The postings are sorted arrays (each
distinct hash once, `(V,)`, with the rows and counts of its documents), not a dictionary: a
collection holds millions of distinct shingles, most of them in one document. A change adds a
part holding the new documents' postings and marks removed documents dead; N, the average
length and each df count the live documents only, so that scores equal those of an index
built from the live documents alone. Past `MAX_PARTS`, the parts after the first (the
changes') are merged into one, their dead rows dropped: the first, the version's own (mapped
from its file, `shingles_file`), is never copied into memory.

Dimensions: N documents, V distinct shingles of a part, P postings of a part.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from docsim.models.inference.pacing import before_batch
from docsim.search.lexical.posting_lists import compact
from docsim.search.lexical.tokens import stemmer_for

K1 = 1.5
B = 0.75
MAX_PARTS = 8  # a change's parts merged into one past this many
BUILD_DOCUMENTS = 1024  # documents tokenised at a time
# odd multipliers of the tokens' hashes by position in a shingle (up to `MAX_N` tokens)
MULTIPLIERS = np.array(
    [
        0x9E3779B97F4A7C15,
        0xC2B2AE3D27D4EB4F,
        0x165667B19E3779F9,
        0xD6E8FEB86659FD93,
        0xFF51AFD7ED558CCD,
        0xC4CEB9FE1A85EC53,
        0x94D049BB133111EB,
        0xBF58476D1CE4E5B9,
    ],
    dtype=np.uint64,
)
MAX_N = len(MULTIPLIERS)


def token_hashes(words: Sequence[str]) -> np.ndarray:
    """`(t,)` uint64: each word's 64-bit hash (BLAKE2b, 8 bytes)."""
    return np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
            for w in words
        ),
        dtype=np.uint64,
        count=len(words),
    )


def shingle_hashes(tokens: np.ndarray, n: int) -> np.ndarray:
    """`(max(t - n + 1, 0),)` uint64: the hash of each run of `n` consecutive token hashes in
    `tokens` `(t,)`, in order."""
    if not 1 <= n <= MAX_N:
        raise ValueError(f"shingles are 1 to {MAX_N} tokens long, not {n}")
    count = len(tokens) - n + 1
    if count <= 0:
        return np.empty(0, np.uint64)
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64
        mixed = np.zeros(count, np.uint64)
        for i in range(n):
            mixed += tokens[i : i + count] * MULTIPLIERS[i]
        mixed ^= mixed >> np.uint64(31)  # spreads the high bits into the low ones
        mixed *= MULTIPLIERS[0]
        mixed ^= mixed >> np.uint64(29)
    return mixed


def text_shingles(texts: Sequence[str], n: int, stemmer: str | None) -> list[np.ndarray]:
    """Each text's shingle hashes `(s,)`, in order, tokenised as BM25 tokenises."""
    import bm25s

    if not texts:
        return []
    tokenized = bm25s.tokenize(
        list(texts), stopwords="en", stemmer=stemmer_for(stemmer), show_progress=False
    )
    words = sorted(tokenized.vocab, key=tokenized.vocab.__getitem__)  # by bm25s' id
    hashes = token_hashes(words)  # (W,)
    return [shingle_hashes(hashes[np.asarray(ids, np.int64)], n) for ids in tokenized.ids]


def flat_postings(
    rows: np.ndarray, shingles: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(p,)` the key, row and count of each distinct shingle of each document at `rows`
    `(a,)`, whose shingles are `shingles`."""
    keys, holders, counts = (
        [np.empty(0, np.uint64)],
        [np.empty(0, np.int64)],
        [np.empty(0, np.int64)],
    )
    for row, found in zip(rows.tolist(), shingles, strict=True):
        distinct, counted = np.unique(found, return_counts=True)
        keys.append(distinct)
        holders.append(np.full(len(distinct), row, np.int64))
        counts.append(counted)
    return np.concatenate(keys), np.concatenate(holders), np.concatenate(counts)


@dataclass(frozen=True)
class ShinglePart:
    """Postings of some of an index's documents: `keys` `(V,)` uint64 ascending, each the
    hash of a shingle; its documents' rows (in the index's `row_ids`) and counts are
    `rows[starts[v]:starts[v + 1]]` and `counts[...]` (`starts` `(V + 1,)`)."""

    keys: np.ndarray
    starts: np.ndarray
    rows: np.ndarray
    counts: np.ndarray

    @staticmethod
    def of(rows: np.ndarray, shingles: Sequence[np.ndarray]) -> ShinglePart:
        """The postings of the documents at `rows` `(a,)`, whose shingles are `shingles`."""
        keys, holders, counts = flat_postings(rows, shingles)
        return ShinglePart.merged([keys], [holders], [counts])

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`(P,)` each posting's key, row and count."""
        keys = np.repeat(self.keys, np.diff(self.starts))
        return keys, self.rows.astype(np.int64), self.counts.astype(np.int64)

    @staticmethod
    def merged(
        keys: list[np.ndarray], rows: list[np.ndarray], counts: list[np.ndarray]
    ) -> ShinglePart:
        """One part from (key, row, count) postings in any order, each key and row once."""
        flat_keys = np.concatenate([np.empty(0, np.uint64), *keys])
        flat_rows = np.concatenate([np.empty(0, np.int64), *rows])
        flat_counts = np.concatenate([np.empty(0, np.int64), *counts])
        order = np.lexsort((flat_rows, flat_keys))  # by key, then row
        flat_keys = flat_keys[order]
        first = np.flatnonzero(np.r_[True, flat_keys[1:] != flat_keys[:-1]][: len(order)])
        return ShinglePart(
            keys=flat_keys[first],
            starts=np.r_[first, len(order)].astype(np.int64),
            rows=compact(flat_rows[order]),
            counts=compact(flat_counts[order]),
        )

    def matches(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The postings of the hashes `wanted` `(q,)` (distinct): `(m,)` each posting's index
        in `wanted`, its row and its count."""
        at = np.searchsorted(self.keys, wanted)  # (q,)
        inside = at < len(self.keys)
        found = np.zeros(len(wanted), bool)
        found[inside] = self.keys[at[inside]] == wanted[inside]
        which = np.flatnonzero(found)  # (f,) indices in `wanted`
        begin = self.starts[at[which]].astype(np.int64)  # (f,) (uint32 in a kept file)
        sizes = self.starts[at[which] + 1].astype(np.int64) - begin  # (f,)
        if not len(which) or not sizes.sum():
            empty = np.empty(0, np.int64)
            return empty, empty, empty
        # each posting's place in the flat arrays: its key's start plus its rank in the key
        firsts = np.repeat(begin - np.r_[0, np.cumsum(sizes)[:-1]], sizes)  # (m,)
        places = firsts + np.arange(int(sizes.sum()))
        return np.repeat(which, sizes), self.rows[places].astype(np.int64), self.counts[places]


class ShingleIndex:
    """BM25 over the `n`-token shingles of a collection's documents, keyed by their ids.

    `doc_ids` `(N,)` are the live documents, ascending: the order of `scores`. Rows count
    every document the parts hold, removed ones included (`row_ids`, `lengths`, `live`)."""

    def __init__(
        self,
        n: int,
        stemmer: str | None,
        row_ids: np.ndarray,
        lengths: np.ndarray,
        live: np.ndarray,
        parts: tuple[ShinglePart, ...],
    ) -> None:
        self.n = n
        self.stemmer = stemmer
        self.row_ids = row_ids  # (R,) int64 each row's document id
        self.lengths = lengths  # (R,) its shingles
        self.live = live  # (R,) bool: not removed
        self.parts = parts
        live_rows = np.flatnonzero(live)
        self._rows = live_rows[np.argsort(row_ids[live_rows], kind="stable")]  # (N,) by id
        self.doc_ids = row_ids[self._rows]  # (N,) ascending
        n_live = len(self._rows)
        average = float(lengths[self._rows].sum()) / max(n_live, 1)
        # (R,) each row's length normalisation, `K1 * (1 - B + B * |d| / avgdl)`
        self._norm = K1 * ((1 - B) + B * lengths / max(average, 1e-12))

    @classmethod
    def build_sorted(
        cls,
        doc_ids: np.ndarray,
        text_batches: Iterable[Sequence[str]],
        n: int,
        stemmer: str | None = None,
    ) -> ShingleIndex:
        """The index of the documents `doc_ids` `(D,)` (ascending), whose texts come in
        `text_batches`, in that order."""
        keys, rows, counts = [], [], []
        lengths: list[int] = []
        for texts in text_batches:
            shingles = text_shingles(texts, n, stemmer)
            batch = flat_postings(np.arange(len(lengths), len(lengths) + len(texts)), shingles)
            keys.append(batch[0])
            rows.append(batch[1])
            counts.append(batch[2])
            lengths.extend(len(found) for found in shingles)
        if len(lengths) != len(doc_ids):
            raise ValueError(f"{len(doc_ids)} document ids for {len(lengths)} texts")
        part = ShinglePart.merged(keys, rows, counts)
        row_ids = np.asarray(doc_ids, np.int64)
        return cls(n, stemmer, row_ids, np.array(lengths, np.int64), np.ones(len(lengths), bool),
                   (part,))  # fmt: skip

    @property
    def n_documents(self) -> int:
        return len(self.doc_ids)

    def shingles(self, text: str) -> np.ndarray:
        """`(s,)` the shingle hashes of the query `text`, as the documents' were made."""
        return text_shingles([text], self.n, self.stemmer)[0] if text else np.empty(0, np.uint64)

    def scores(self, text: str) -> np.ndarray:
        """`(N,)` float64 the BM25 score of every live document, in `doc_ids` order, for the
        shingles of the query `text`; all 0 when no document shares one."""
        return self.shingle_scores(self.shingles(text))

    def shingle_scores(self, shingles: np.ndarray) -> np.ndarray:
        """`scores` of a query's shingle hashes `(s,)` (repeats counted)."""
        wanted, repeats = np.unique(shingles, return_counts=True)  # (q,)
        found = [part.matches(wanted) for part in self.parts]
        before_batch(len(wanted))  # a long query's work yields here
        which = np.concatenate([f[0] for f in found])  # (m,)
        rows = np.concatenate([f[1] for f in found])
        tf = np.concatenate([f[2] for f in found]).astype(np.float64)
        alive = self.live[rows]
        which, rows, tf = which[alive], rows[alive], tf[alive]
        df = np.bincount(which, minlength=len(wanted))  # (q,) live holders
        n_live = len(self.doc_ids)
        idf = np.log1p((n_live - df + 0.5) / (df + 0.5))  # (q,)
        terms = repeats[which] * idf[which] * tf / (tf + self._norm[rows])  # (m,)
        by_row = np.bincount(rows, weights=terms, minlength=len(self.row_ids))  # (R,)
        return by_row[self._rows]

    def with_changes(
        self, removed: Iterable[int], added: Sequence[tuple[int, str]]
    ) -> ShingleIndex:
        """A new index without the `removed` documents and with the `added` ones (id, text);
        this one is left as it is (requests running on it go on)."""
        removed_ids = np.fromiter(removed, np.int64)
        live = self.live & ~np.isin(self.row_ids, removed_ids)
        shingles = text_shingles([text for _, text in added], self.n, self.stemmer)
        first_row = len(self.row_ids)
        new_rows = np.arange(first_row, first_row + len(added))
        parts = self.parts + ((ShinglePart.of(new_rows, shingles),) if added else ())
        changed = ShingleIndex(
            self.n,
            self.stemmer,
            np.r_[self.row_ids, np.array([d for d, _ in added], np.int64)],
            np.r_[self.lengths, np.array([len(s) for s in shingles], np.int64)],
            np.r_[live, np.ones(len(added), bool)],
            parts,
        )
        return changed._changes_merged() if len(parts) > MAX_PARTS else changed

    def _changes_merged(self) -> ShingleIndex:
        """The same index with its parts after the first merged into one, removed rows'
        postings dropped from it."""
        merged = self._live_part(self.parts[1:], np.arange(len(self.live)))
        parts = (self.parts[0], merged)
        return ShingleIndex(self.n, self.stemmer, self.row_ids, self.lengths, self.live, parts)

    def _live_part(self, parts: tuple[ShinglePart, ...], new_row: np.ndarray) -> ShinglePart:
        """`parts` merged into one, the postings of removed rows dropped and each row `r`
        renamed `new_row[r]` (`new_row` `(R,)`)."""
        keys, rows, counts = [], [], []
        for part in parts:
            part_keys, part_rows, part_counts = part.flat()
            keep = self.live[part_rows]
            keys.append(part_keys[keep])
            rows.append(new_row[part_rows[keep]])
            counts.append(part_counts[keep])
        return ShinglePart.merged(keys, rows, counts)

    def compacted(self) -> ShingleIndex:
        """The same live documents in one part, removed rows dropped."""
        part = self._live_part(self.parts, np.cumsum(self.live) - 1)  # a live row's new row
        return ShingleIndex(
            self.n,
            self.stemmer,
            self.row_ids[self.live],
            self.lengths[self.live],
            np.ones(int(self.live.sum()), bool),
            (part,),
        )
