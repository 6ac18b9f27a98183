"""BM25 over hashed shingles against a plain reference: shingles as tuples of words in a
dictionary, BM25's formula written out; changes and merges against an index built anew."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from docsim.search.lexical.shingles import (
    MAX_N,
    MAX_PARTS,
    ShingleIndex,
    shingle_hashes,
    text_shingles,
    token_hashes,
)
from docsim.search.lexical.tokens import tokenize

WORDS = (
    "court appeal section act held that the petitioner respondent high evidence witness "
    "accused bail order judgment under article constitution fundamental right murder trial "
    "sentence conviction police report statement dowry property land tenant rent"
).split()


def random_texts(count: int, seed: int, quote: str = "") -> list[str]:
    """Texts of random words, some quoting `quote` verbatim."""
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(0, 60))]
        if quote and i % 3 == 0:
            words[len(words) // 2 : len(words) // 2] = quote.split()
        texts.append(" ".join(words))
    return texts


def reference_scores(texts: list[str], query: str, n: int) -> np.ndarray:
    """BM25 (Lucene's idf, k1 = 1.5, b = 0.75) over shingles kept as word tuples."""
    docs = [tokenize([t])[0] if t else [] for t in texts]
    grams = [Counter(tuple(d[i : i + n]) for i in range(len(d) - n + 1)) for d in docs]
    lengths = [sum(g.values()) for g in grams]
    average = sum(lengths) / len(lengths)
    q = tokenize([query])[0] if query else []
    wanted = [tuple(q[i : i + n]) for i in range(len(q) - n + 1)]
    out = np.zeros(len(texts))
    for shingle in wanted:
        df = sum(shingle in g for g in grams)
        idf = math.log(1 + (len(texts) - df + 0.5) / (df + 0.5))
        for d, g in enumerate(grams):
            tf = g.get(shingle, 0)
            if tf:
                norm = 1.5 * (1 - 0.75 + 0.75 * lengths[d] / average)
                out[d] += idf * tf / (tf + norm)
    return out


def built(texts: list[str], n: int, ids: list[int] | None = None) -> ShingleIndex:
    doc_ids = np.array(ids if ids is not None else range(len(texts)), np.int64)
    return ShingleIndex.build_sorted(doc_ids, [texts[:7], texts[7:]], n)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_scores_equal_bm25_over_word_tuples(n: int) -> None:
    quote = "the accused was held in custody under section of the act without bail"
    texts = random_texts(40, seed=n, quote=quote)
    index = built(texts, n)
    for query in (texts[4], quote, "murder trial " * 30, "", "unknown words only"):
        np.testing.assert_allclose(index.scores(query), reference_scores(texts, query, n),
                                   rtol=1e-12, atol=1e-12)  # fmt: skip
    assert index.scores(quote)[0] > 0  # a quoting document shares the quotation's shingles


def test_shingles_follow_word_order_and_tokenisation() -> None:
    a, b = text_shingles(["Court held appeal", "appeal held court"], 2, None)
    assert len(a) == len(b) == 2 and not set(a.tolist()) & set(b.tolist())
    same, upper = text_shingles(["the court held", "The COURT, held!"], 2, None)
    np.testing.assert_array_equal(same, upper)  # case, punctuation and stop words as BM25's
    tokens = token_hashes(["x", "y", "z"])
    assert len(shingle_hashes(tokens, 3)) == 1 and len(shingle_hashes(tokens, 4)) == 0
    with pytest.raises(ValueError, match=f"1 to {MAX_N}"):
        shingle_hashes(tokens, MAX_N + 1)


def test_changes_score_as_an_index_built_from_the_live_documents() -> None:
    texts = random_texts(30, seed=7, quote="rent of the land to the tenant under the act")
    index = built(texts, 2)
    live = dict(enumerate(texts))
    rng = random.Random(3)
    next_id = 30
    for step in range(2 * MAX_PARTS):  # enough changes to merge the parts at least once
        removed = rng.sample(sorted(live), 2)
        added = [(next_id + i, t) for i, t in enumerate(random_texts(3, seed=100 + step))]
        next_id += 3
        changed = index.with_changes(removed, added)
        before = index.scores(texts[0])  # the old index is untouched
        for doc_id in removed:
            del live[doc_id]
        live.update(added)
        ids = sorted(live)
        fresh = built([live[d] for d in ids], 2, ids)
        np.testing.assert_array_equal(changed.doc_ids, ids)
        for query in (texts[0], added[0][1]):
            np.testing.assert_allclose(changed.scores(query), fresh.scores(query), rtol=1e-12)
        np.testing.assert_array_equal(index.scores(texts[0]), before)
        assert len(changed.parts) <= MAX_PARTS
        index = changed
    merged = index.compacted()
    assert len(merged.parts) == 1 and len(merged.row_ids) == len(live)
    np.testing.assert_allclose(merged.scores(texts[0]), index.scores(texts[0]), rtol=1e-12)
