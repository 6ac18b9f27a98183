"""BM25 postings changed one document at a time equal postings built from scratch, and
untouched postings are shared, not copied."""

from __future__ import annotations

import gc

import bm25s
import numpy as np
import pytest

from docsim.indexer.text.corpus import SAMPLE_CORPUS, read_corpus
from docsim.search.lexical import bm25 as bm25_module
from docsim.search.lexical.bm25 import ROW_TABLE_SLACK, ROW_TABLE_SPAN, Bm25Index, row_lookup
from docsim.search.lexical.query_terms import (
    reduced_query,
    rm3_expansion,
    rm3_weights,
    strongest_terms,
)

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)

TEXTS = [doc.text for doc in read_corpus(SAMPLE_CORPUS)]
QUERIES = [*TEXTS[:6], "sourdough starter flour water", "the of and"]


def bm25s_scores(texts: list[str], query: str) -> np.ndarray:
    """`(N,)` bm25s' own scores of `query` over `texts`, in their order."""
    reference = bm25s.BM25()
    reference.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
    known = [t for t in tokens if t in reference.vocab_dict]
    return reference.get_scores(known) if known else np.zeros(len(texts))


@pytest.mark.parametrize(
    ("step", "rows_by"),
    [(1, "offsets"), (3, "table"), (10**6, "search")],  # ids need not be positions
)
def test_scores_equal_bm25s(step: int, rows_by: str) -> None:
    ids = np.arange(len(TEXTS), dtype=np.int64) * step + (7 << 40)  # a version's ids
    index = Bm25Index.build(ids.tolist(), TEXTS)
    table = index._row_of
    assert rows_by == ("offsets" if table is None else "table" if len(table) else "search")
    reference = bm25s.BM25()
    reference.index(bm25s.tokenize(TEXTS, stopwords="en", show_progress=False), show_progress=False)
    for query in QUERIES:
        tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        known = [t for t in tokens if t in reference.vocab_dict]
        expected = reference.get_scores(known) if known else np.zeros(len(TEXTS))
        # bm25s' arithmetic, to the bit
        np.testing.assert_array_equal(index.scores(query), expected.astype(np.float64))


def test_a_change_equals_a_rebuild_and_shares_untouched_postings() -> None:
    ids = list(range(len(TEXTS)))
    before = Bm25Index.build(ids, TEXTS)
    new_text = "A zeppelin floats over the sourdough bakery; flour dust and zeppelin engines."
    after = before.with_changes(removed=[3, 10], added=[(100, new_text), (101, TEXTS[3])])
    kept = [i for i in ids if i not in (3, 10)]
    texts = {i: TEXTS[i] for i in kept} | {100: new_text, 101: TEXTS[3]}
    order = sorted(texts)
    rebuilt = Bm25Index.build(order, [texts[i] for i in order])
    for query in [*QUERIES, new_text]:
        np.testing.assert_allclose(after.scores(query), rebuilt.scores(query), rtol=1e-12)
    assert after.n_documents == rebuilt.n_documents == len(TEXTS)
    # the old index is unchanged (requests on the old version keep a consistent view)
    np.testing.assert_array_equal(
        before.scores(TEXTS[3]), Bm25Index.build(ids, TEXTS).scores(TEXTS[3])
    )
    touched = set(before.term_counts(3)) | set(before.term_counts(10))
    touched |= set(after.term_counts(100))
    untouched = [t for t in before._postings if t not in touched and t in after._postings]
    assert untouched and all(after._postings[t] is before._postings[t] for t in untouched)
    assert "zeppelin" in after._postings and "zeppelin" not in before._postings


def test_row_lookup_maps_each_offset_to_its_row() -> None:
    assert row_lookup(np.arange(5, 9), 5) is None  # a run from the base: offsets are rows
    table = row_lookup(np.array([5, 7, 8, 12]), 5)
    assert table is not None and table.tolist() == [0, -1, 1, 2, -1, -1, -1, 3]
    below = row_lookup(np.array([3, 7]), 5)  # an id below the base: searched
    spread = row_lookup(np.array([0, ROW_TABLE_SPAN * 2 + ROW_TABLE_SLACK]), 0)
    assert below is not None and spread is not None and len(below) == len(spread) == 0


def test_the_kept_weights_stay_within_their_budget(monkeypatch) -> None:
    """A small budget drops the oldest tokens' terms, holds at most its bytes, and scores
    exactly as an index that keeps every token's."""
    ids = (np.arange(len(TEXTS)) * 2).tolist()  # a table of rows: rows held, not offsets
    roomy = Bm25Index.build(ids, TEXTS)
    expected = [roomy.scores(query) for query in QUERIES]
    monkeypatch.setattr(bm25_module, "WEIGHTS_CACHE_BYTES", 1000)
    tight = Bm25Index.build(ids, TEXTS)
    for query, scores in zip(QUERIES * 2, expected * 2, strict=True):
        np.testing.assert_array_equal(tight.scores(query), scores)
        held = sum(r.nbytes + t.nbytes for r, t in tight._weights._found.values())
        assert held == tight._weights.held_bytes <= 1000
    assert 0 < len(tight._weights) < len(roomy._weights)
    last = tight.tokens(QUERIES[-2])[-1]  # the latest query's last token is kept
    assert last in tight._weights


def test_a_query_without_known_tokens_scores_zero() -> None:
    index = Bm25Index.build([1, 2], ["bread and butter", "stone and mortar"])
    assert index.scores("the of and").tolist() == [0.0, 0.0]
    assert index.scores("").tolist() == [0.0, 0.0]


def test_a_collection_without_a_word_scores_zero() -> None:
    """Every document only stop words: nothing is posted, every score is 0 (no error)."""
    index = Bm25Index.build([7, 3], ["the a", "of"])
    assert index.n_documents == 2 and index.doc_ids.tolist() == [3, 7]
    assert index.scores("the zeppelin").tolist() == [0.0, 0.0]
    later = index.with_changes(removed=[7], added=[(9, "a zeppelin")])
    assert later.scores("zeppelin").tolist()[0] == 0.0 and later.scores("zeppelin")[1] > 0


@pytest.mark.parametrize("removed", [[0], [0, 1]])
def test_removing_every_holder_of_a_token_drops_it(removed: list[int]) -> None:
    index = Bm25Index.build([0, 1], ["unique zeppelin", "plain bread"])
    after = index.with_changes(removed=removed, added=[])
    assert "zeppelin" not in after._postings


@pytest.mark.parametrize("batch", [1024, 7, 1])  # one batch, several, a document each
def test_the_one_pass_build_equals_adding_documents_one_change_at_a_time(batch: int) -> None:
    texts = [*TEXTS, "", "the of and"]  # documents without a token count too
    ids = (np.random.default_rng(0).permutation(len(texts)) * 5 + 1).tolist()  # any id order
    built = Bm25Index.build(ids, texts, batch=batch)
    added = Bm25Index({}, {}, {}, {}).with_changes(removed=(), added=zip(ids, texts, strict=True))
    assert built._postings.keys() == added._postings.keys()
    for token, (_, counts) in built._postings.items():
        np.testing.assert_array_equal(built.holders(token), added.holders(token), token)
        np.testing.assert_array_equal(counts, added._postings[token][1], token)
    assert built._lengths == added._lengths
    assert {d: built.term_counts(d) for d in ids} == {d: added.term_counts(d) for d in ids}


def test_postings_and_forward_entries_are_held_in_the_narrowest_dtypes() -> None:
    """6 bytes a posting entry and 6 a forward one where a version's ids (which start at
    `version_id << 40`) span 32 bits and counts 16; a wider span or count stays exact, an id
    added below the base too, and scores do not depend on the dtypes."""
    base = 7 << 40  # a version's first id
    ids = [base + 1, base + 2, base + 70_000]
    index = Bm25Index.build(ids, ["bread bread crust", "crust", "stone"])
    offsets, counts = index._postings["crust"]
    assert (offsets.dtype, counts.dtype) == (np.uint32, np.uint16)
    assert index.holders("crust").tolist() == ids[:2] and counts.tolist() == [1, 1]
    assert index._counts[base + 1].dtype == np.uint16 and index._terms[base + 1].dtype == np.uint16
    wide = Bm25Index.build([2**40, 5], ["bread " * 70_000, "bread crust"])
    offsets, counts = wide._postings["bread"]
    assert (offsets.dtype, counts.dtype) == (np.int64, np.uint32)
    assert wide.holders("bread").tolist() == [5, 2**40] and counts.tolist() == [1, 70_000]
    assert wide.term_counts(2**40) == {"bread": 70_000}
    changed = index.with_changes(removed=[base + 1], added=[(base + 3, "crust crust")])
    assert changed._postings["crust"][0].dtype == np.uint16  # changed postings compacted too
    assert changed.holders("crust").tolist() == [base + 2, base + 3]
    below = index.with_changes(removed=[], added=[(3, "crust crust")])  # under the base
    assert below.holders("crust").tolist() == [3, *ids[:2]]
    rebuilt = Bm25Index.build([3, *ids], ["crust crust", "bread bread crust", "crust", "stone"])
    np.testing.assert_allclose(below.scores("bread crust"), rebuilt.scores("bread crust"))
    scores = wide.scores("bread crust")
    reference = bm25s_scores(["bread " * 70_000, "bread crust"], "bread crust")  # (id order)
    np.testing.assert_allclose(scores, reference[[1, 0]], rtol=1e-6)


def test_scores_follow_the_order_of_the_ids_not_of_the_texts() -> None:
    ids = np.random.default_rng(1).permutation(len(TEXTS)).astype(np.int64)
    index = Bm25Index.build(ids.tolist(), TEXTS)
    in_order = Bm25Index.build(sorted(ids.tolist()), [TEXTS[i] for i in np.argsort(ids)])
    assert index.doc_ids.tolist() == sorted(ids.tolist())
    np.testing.assert_array_equal(index.scores(TEXTS[0]), in_order.scores(TEXTS[0]))
    assert index.scores(TEXTS[0]).tolist() == index.scores(TEXTS[0]).tolist()  # cached terms


# --- query variants ---------------------------------------------------------------------------


def test_weighted_scores_of_the_query_counts_equal_scores() -> None:
    from collections import Counter

    index = Bm25Index.build(list(range(len(TEXTS))), TEXTS)
    for query in QUERIES:
        weights = {t: float(c) for t, c in Counter(index.tokens(query)).items()}
        # `scores` sums in float32 as bm25s does, `weighted_scores` in float64
        np.testing.assert_allclose(index.weighted_scores(weights), index.scores(query), rtol=1e-5)


def test_idf_is_bm25s_idf() -> None:
    index = Bm25Index.build(list(range(4)), ["apple pie", "apple tart", "pear", "plum pie"])
    assert index.idf("apple") == pytest.approx(np.log(1 + (4 - 2 + 0.5) / (2 + 0.5)))
    assert index.idf("pear") == pytest.approx(np.log(1 + (4 - 1 + 0.5) / (1 + 0.5)))
    assert index.idf("banana") == 0.0


def test_reduced_query_keeps_the_highest_idf_half_with_counts() -> None:
    tokens = ["court", "appeal", "murder", "court", "knife", "appeal"]
    idf = {"court": 0.1, "appeal": 0.5, "murder": 2.0, "knife": 3.0}
    assert reduced_query(tokens, idf, 0.5) == {"knife": 1.0, "murder": 1.0}
    assert reduced_query(tokens, idf, 0.6) == {"knife": 1.0, "murder": 1.0, "appeal": 2.0}
    assert reduced_query(tokens, idf, 1.0) == {"knife": 1, "murder": 1, "appeal": 2, "court": 2}


def test_strongest_terms_by_hand() -> None:
    """Count times idf: c 3 x 1.0 = 3, a 2 x 1.2 = 2.4, b 1 x 3.0 = 3, d 1 x 0.5; two kept,
    c and b tie and c comes first; a query within the cap is kept whole, in order."""
    tokens = ["a", "c", "b", "c", "a", "d", "c"]
    idf = {"a": 1.2, "b": 3.0, "c": 1.0, "d": 0.5}
    assert strongest_terms(tokens, idf, 2) == ["c", "b", "c", "c"]
    assert strongest_terms(tokens, idf, 3) == ["a", "c", "b", "c", "a", "c"]
    assert strongest_terms(tokens, idf, 4) == tokens
    assert strongest_terms([], idf, 1) == []


def test_rm3_weights_by_hand() -> None:
    query = ["a", "b"]
    feedback = [{"a": 1, "c": 2, "d": 1}, {"c": 1, "e": 1}]
    scores = [3.0, 1.0]
    # P(w|R) = sum_d P(w|d) s_d / 4: a 1/4*3/4, c (2/4*3 + 1/2*1)/4, d 1/4*3/4, e 1/2*1/4
    relevance = {"a": 3 / 16, "c": 2 / 4 * 3 / 4 + 1 / 8, "d": 3 / 16, "e": 1 / 8}
    top = {"c": relevance["c"], "a": relevance["a"]}  # two terms; a and d tie, a sorts first
    mass = sum(top.values())
    got = rm3_weights(query, feedback, scores, terms=2, query_weight=0.25)
    expected = {
        "a": 2 * (0.25 * 0.5 + 0.75 * top["a"] / mass),
        "b": 2 * (0.25 * 0.5),
        "c": 2 * (0.75 * top["c"] / mass),
    }
    assert got.keys() == expected.keys()
    for token, weight in expected.items():
        assert got[token] == pytest.approx(weight)


def test_rm3_weights_are_the_query_weighted_plus_the_expansion() -> None:
    query, feedback, scores = ["a", "b", "a"], [{"a": 2, "c": 1}, {"c": 3, "d": 1}], [2.0, 1.0]
    weights = rm3_weights(query, feedback, scores, terms=2, query_weight=0.3)
    expansion = rm3_expansion(query, feedback, scores, terms=2, query_weight=0.3)
    assert expansion.keys() == {"a", "c"}  # the two likeliest words: c, then a
    assert sum(expansion.values()) == pytest.approx(0.7 * 3)  # its share of the query's length
    assert weights == {
        "a": pytest.approx(0.3 * 2 + expansion["a"]),
        "b": pytest.approx(0.3),
        "c": pytest.approx(expansion["c"]),
    }


def test_rm3_with_only_the_query_weight_is_the_query() -> None:
    assert rm3_weights(["a", "a", "b"], [{"c": 1}], [1.0], terms=5, query_weight=1.0) == {
        "a": pytest.approx(2.0),
        "b": pytest.approx(1.0),
        "c": 0.0,
    }


def test_a_stemmed_index_matches_word_forms_and_changes_like_a_rebuild() -> None:
    texts = ["The judges appealed the rulings.", "An appeal was ruled on.", "Bread and butter."]
    index = Bm25Index.build([0, 1, 2], texts, stemmer="english")
    assert index.tokens("appealing rulings") == ["appeal", "rule"]
    assert (index.scores("appealing")[:2] > 0).all()
    assert Bm25Index.build([0, 1, 2], texts).scores("appealing").max() == 0  # unstemmed
    changed = index.with_changes([2], [(5, "Judges appeal.")])
    assert changed.term_counts(5) == {"judg": 1, "appeal": 1}
    rebuilt = Bm25Index.build([0, 1, 5], [texts[0], texts[1], "Judges appeal."], "english")
    for query in ("appeals judged", "rulings"):
        np.testing.assert_allclose(changed.scores(query), rebuilt.scores(query), rtol=1e-12)


def test_term_counts_are_each_documents_tokens_counted_after_any_change() -> None:
    from collections import Counter

    index = Bm25Index.build(list(range(len(TEXTS))), TEXTS)
    changed = index.with_changes([1], [(99, TEXTS[1] + " zeppelin zeppelin")])
    for doc_id, text in [(0, TEXTS[0]), (5, TEXTS[5]), (99, TEXTS[1] + " zeppelin zeppelin")]:
        tokens = bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0]
        assert changed.term_counts(doc_id) == Counter(tokens)
    with pytest.raises(KeyError):
        changed.term_counts(1)


@pytest.mark.parametrize("stemmer", [None, "english"])
def test_shards_with_the_collections_statistics_score_as_one_index(stemmer: str | None) -> None:
    """Exact BM25 over shards: each shard's index, given the summed document counts, lengths
    and document frequencies, scores its documents to the bit as the whole index does."""
    from docsim.search.lexical.bm25 import Bm25Collection

    ids = np.arange(len(TEXTS), dtype=np.int64) * 2 + 1
    whole = Bm25Index.build(ids.tolist(), TEXTS, stemmer)
    cuts = [0, 7, 30, len(TEXTS)]
    parts = [
        Bm25Index.build(ids[a:b].tolist(), TEXTS[a:b], stemmer)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    ]
    collection = Bm25Collection.combine(p.local_collection() for p in parts)
    assert collection == whole.local_collection()
    shards = [p.within(collection) for p in parts]
    for query in QUERIES:
        expected = whole.scores(query)
        got = np.concatenate([s.scores(query) for s in shards])
        np.testing.assert_array_equal(got, expected)
        tokens = whole.tokens(query)
        assert [s.idf(t) for s in shards for t in tokens] == [whole.idf(t) for t in tokens] * 3
        weights = {t: 0.5 + i for i, t in enumerate(dict.fromkeys(tokens))}
        np.testing.assert_array_equal(
            np.concatenate([s.weighted_scores(weights) for s in shards]),
            whole.weighted_scores(weights),
        )
    # without the collection's statistics a shard scores differently: the test can fail
    assert not np.array_equal(
        np.concatenate([p.scores(QUERIES[0]) for p in parts]), whole.scores(QUERIES[0])
    )


def test_the_postings_leave_the_garbage_collectors_walk() -> None:
    """A full collection pauses every thread for each object it tracks: after one, no posting
    is tracked any more, built or changed (CPython untracks a tuple of untracked objects)."""
    built = Bm25Index.build([1, 2, 3], TEXTS[:3])
    changed = built.with_changes(removed=[2], added=[(9, "zeppelin over the lake")])
    gc.collect()
    for index in (built, changed):
        assert index._postings
        assert not any(gc.is_tracked(posting) for posting in index._postings.values())


def test_a_long_query_paces_every_few_thousand_tokens(monkeypatch) -> None:
    """Scoring calls the request's pacing hook (`models.inference.pacing`) every `PACED_TOKENS`
    tokens, so that a query of two million characters yields and meets its deadline."""
    from docsim.models.inference.pacing import paced
    from docsim.search.lexical import bm25 as lexical

    index = Bm25Index.build([1, 2], ["bread and butter", "stone and mortar"])
    tokens = index.tokens("bread butter stone mortar " * 5)  # 20 tokens
    expected = index.token_scores(tokens)
    monkeypatch.setattr(lexical, "PACED_TOKENS", 8)
    seen: list[int] = []
    with paced(seen.append):
        np.testing.assert_array_equal(index.token_scores(tokens), expected)
    assert seen == [8, 8, 4]
