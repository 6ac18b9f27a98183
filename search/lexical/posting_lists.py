"""The postings of `search.lexical.bm25`, as arrays: built from the documents' tokens in one
pass (`counted_postings`) and changed one token at a time (`changed_posting`), each array in
the narrowest integer dtype that holds it (`compact`), each document's distinct tokens kept
as ids of a shared `Vocabulary`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from docsim.search.lexical.tokens import stemmer_for

# The documents holding one token `(n,)` (ascending ids, less the index's base id: a version's
# ids start at `version_id << 40`, which would need 8 bytes each), and its count in each `(n,)`.
# A plain
# tuple, not a class: the garbage collector stops tracking a tuple that holds only arrays, and
# a collection holds one posting per distinct token (AILA: 55,853), each of which every full
# collection, which pauses every thread, would otherwise walk.
# Both arrays in the narrowest dtype that holds them (`compact`): at a hundred times AILA the
# postings are 170 million entries, 6 bytes each instead of 12.
Posting = tuple[np.ndarray, np.ndarray]
# what an index is built from: postings, doc id -> length, its distinct tokens (ids in the
# vocabulary), their counts, the vocabulary, and the base id the postings' ids are offset from
PostingParts = tuple[
    dict[str, Posting],
    dict[int, int],
    dict[int, np.ndarray],
    dict[int, np.ndarray],
    "Vocabulary",
    int,
]


def compact(values: np.ndarray, wide: type[np.integer] = np.int64) -> np.ndarray:
    """`values` (integers) as uint16 or uint32 where they are non-negative and fit, else
    `wide`."""
    if len(values) and int(values.min()) < 0:
        return values.astype(wide, copy=False)
    top = int(values.max()) if len(values) else 0
    for dtype in (np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype, copy=False)
    return values.astype(wide, copy=False)


class Vocabulary:
    """The tokens a document's forward entry names by id (4 bytes each, not a string
    reference and a tuple). Append-only: an index after a change shares it with the index
    before, which never reads the ids added since."""

    def __init__(self, words: Iterable[str] = ()) -> None:
        self.words: list[str] = list(words)
        self.ids = {word: i for i, word in enumerate(self.words)}

    def id_of(self, word: str) -> int:
        found = self.ids.get(word)
        if found is None:
            found = self.ids[word] = len(self.words)
            self.words.append(word)
        return found

    def encoded(self, words: Iterable[str]) -> np.ndarray:
        """`(t,)` the ids of `words` (adding the new ones)."""
        return compact(np.fromiter((self.id_of(w) for w in words), np.int64))

    def decoded(self, ids: np.ndarray) -> list[str]:
        return [self.words[i] for i in ids.tolist()]


def counted_postings(
    doc_ids: np.ndarray, text_batches: Iterable[Sequence[str]], stemmer: str | None, batch: int
) -> PostingParts:
    """`Bm25Index.build_sorted`'s parts: the postings, each document's length, distinct
    tokens and their counts, the vocabulary, and the base id (the smallest)."""
    import bm25s

    vocabulary: dict[str, int] = {}  # token -> its id here
    tokens_of: list[np.ndarray] = []  # each document's distinct token ids (int32)
    counts_of: list[np.ndarray] = []  # and their counts (int32)
    lengths: list[int] = []  # each document's tokens after stop words
    for texts in text_batches:
        if not len(texts):
            continue
        tokenized = bm25s.tokenize(
            list(texts), stopwords="en", stemmer=stemmer_for(stemmer), show_progress=False
        )
        local = sorted(tokenized.vocab, key=tokenized.vocab.__getitem__)
        to_global = np.array(
            [vocabulary.setdefault(token, len(vocabulary)) for token in local], np.int32
        )
        for ids in tokenized.ids:
            distinct, counted = np.unique(np.asarray(ids, np.int64), return_counts=True)
            tokens_of.append(to_global[distinct])
            counts_of.append(counted.astype(np.int32))
            lengths.append(len(ids))
    if len(doc_ids) != len(lengths):
        raise ValueError(f"{len(doc_ids)} document ids for {len(lengths)} texts")
    words = np.array(list(vocabulary), dtype=object)  # (V,) by id
    ids_list = doc_ids.tolist()
    terms = {d: compact(t) for d, t in zip(ids_list, tokens_of, strict=True)}
    term_counts = {d: compact(c) for d, c in zip(ids_list, counts_of, strict=True)}
    by_id = dict(zip(ids_list, lengths, strict=True))
    kept = Vocabulary(vocabulary)
    base = int(doc_ids[0]) if len(doc_ids) else 0  # ascending: the smallest
    if not sum(lengths):  # no document holds a word: nothing to post
        return {}, by_id, terms, term_counts, kept, base
    offsets = doc_ids - base  # (D,) >= 0
    frequency = np.zeros(len(words), np.int64)  # (V,) documents holding each token
    for tokens in tokens_of:
        frequency[tokens] += 1  # a document's tokens are distinct
    ends = np.cumsum(frequency)  # (V,) each token's end in the flat postings
    flat_ids = np.empty(int(ends[-1]), compact(offsets).dtype)  # as narrow as the offsets
    flat_counts = np.empty(int(ends[-1]), np.int32)
    cursor = ends - frequency  # (V,) where each token's next document goes
    for s in range(0, len(ids_list), batch):
        tokens = np.concatenate(tokens_of[s : s + batch])  # (p,) documents in id order
        if not len(tokens):  # a batch of documents without a word
            continue
        counts = np.concatenate(counts_of[s : s + batch])
        holders = np.repeat(offsets[s : s + batch], [len(t) for t in tokens_of[s : s + batch]])
        order = np.argsort(tokens, kind="stable")  # by token, then document
        tokens, counts, holders = tokens[order], counts[order], holders[order]
        first = np.flatnonzero(np.r_[True, tokens[1:] != tokens[:-1]])  # (u,)
        run = np.diff(np.r_[first, len(tokens)])  # (u,) this batch's holders of each
        at = cursor[tokens] + np.arange(len(tokens)) - np.repeat(first, run)  # (p,)
        flat_ids[at] = holders
        flat_counts[at] = counts
        cursor[tokens[first]] += run
    starts = ends - frequency
    flat_counts = compact(flat_counts)
    postings = {
        str(words[v]): (flat_ids[starts[v] : ends[v]], flat_counts[starts[v] : ends[v]])
        for v in np.flatnonzero(frequency).tolist()
    }
    return postings, by_id, terms, term_counts, kept, base


def changed_posting(
    old: Posting | None, drop: Iterable[int], put: list[tuple[int, int]]
) -> Posting:
    """`old` without the documents of `drop`, with those of `put` (id, count), by id (all
    three offset from the same base; one below it makes the posting signed and wide)."""
    old_ids, old_counts = old or (np.empty(0, np.int64), np.empty(0, np.int32))
    keep = ~np.isin(old_ids, np.fromiter(drop, np.int64))
    new = np.array(put, dtype=np.int64).reshape(-1, 2)  # (a, 2)
    doc_ids = np.concatenate([old_ids[keep].astype(np.int64), new[:, 0]])
    order = np.argsort(doc_ids, kind="stable")
    counts = np.concatenate([old_counts[keep].astype(np.int64), new[:, 1]])
    return compact(doc_ids[order]), compact(counts[order])


def changed_parts(
    parts: PostingParts, removed: Iterable[int], added: list[tuple[int, list[str]]]
) -> PostingParts:
    """`parts` without the documents `removed` and with the `added` ones (id, its tokens):
    new dicts, the untouched postings and forward entries shared with `parts`."""
    old_postings, old_lengths, old_terms, old_counts, vocabulary, base = parts
    postings, lengths, terms = dict(old_postings), dict(old_lengths), dict(old_terms)
    term_counts = dict(old_counts)
    drop: dict[str, set[int]] = {}
    for doc_id in removed:
        for token in vocabulary.decoded(terms.pop(doc_id)):
            drop.setdefault(token, set()).add(doc_id - base)
        del lengths[doc_id], term_counts[doc_id]
    put: dict[str, list[tuple[int, int]]] = {}
    for doc_id, tokens in added:
        counts = Counter(tokens)
        for token, count in counts.items():
            put.setdefault(token, []).append((doc_id - base, count))
        lengths[doc_id] = len(tokens)
        terms[doc_id] = vocabulary.encoded(counts)
        term_counts[doc_id] = compact(np.fromiter(counts.values(), np.int64, len(counts)))
    for token in drop.keys() | put.keys():
        posting = changed_posting(postings.get(token), drop.get(token, ()), put.get(token, []))
        if len(posting[0]):
            postings[token] = posting
        else:
            postings.pop(token, None)
    return postings, lengths, terms, term_counts, vocabulary, base
