"""Exact SDR over shards equals the one-process ranking (`Searcher`, exhaustive mode) on the
sample corpus: the same documents in the same order, scores within 1e-5."""

from __future__ import annotations

import numpy as np
import pytest

from docsim.protocol.choices import Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.errors import ShardUnavailableError
from docsim.search.ranking.scorer import QueryScratch
from docsim.search.searcher import Searcher
from docsim.search.served.sentence_scan import ScanShape, SentenceScan
from docsim.search.shards.coordinator import ShardedLevel, ShardedSdr
from docsim.search.shards.cuts import shard_ranges, shards_of
from docsim.search.shards.shard import SEARCHED_ON_SHARDS, ShardQuery, in_process
from docsim.search.types import Query
from tests.search.test_search import posted_query

POOL = ["coffee-01", "coffee-02", "baking-01", "oceans-03", "medieval-01", "running-04"]


def shard_query(searcher: Searcher, query: Query, key: str, pool: list[str] | None) -> ShardQuery:
    return ShardQuery(
        key=key,
        sentences=query.sentence_vectors,
        paragraph_lengths=query.paragraph_lengths,
        exclude=query.source_index,
        allowed=None if pool is None else np.array([searcher.position(d) for d in pool]),
    )


@pytest.mark.parametrize("n_shards", [1, 2, 3, 7])
@pytest.mark.parametrize("source", ["posted", "coffee-02"])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("pool", [None, POOL])
def test_sharded_sdr_equals_in_process(
    searcher: Searcher, n_shards: int, source: str, normalize: bool, pool: list[str] | None
) -> None:
    query = posted_query(searcher) if source == "posted" else searcher.query_from_index(source)
    options = SimilarOptions(
        top_k=48,
        method=Method.sdr,
        normalize=normalize,
        mode=ScoringMode.exhaustive,
        candidates=pool,
        matches_per_result=0,
    )
    expected = searcher.similar(query, options)
    tiebreak = searcher.tiebreak  # the same fixed tie order
    shards = shards_of(searcher.index, tiebreak, n_shards)
    assert len(shards) == n_shards and sum(s.n_documents for s in shards) == 48
    sharded = ShardedSdr(in_process(shards), n_shards, tiebreak)
    hits, stats, scored = sharded.rank(
        shard_query(searcher, query, f"q-{source}", pool), 48, normalize
    )
    ids = [searcher.index.external_ids[p] for p in hits.positions]
    assert ids == [h.document_id for h in expected.results]
    np.testing.assert_allclose(hits.scores, [h.score for h in expected.results], rtol=0, atol=1e-5)
    assert scored == expected.scored_documents
    if normalize:
        np.testing.assert_allclose(
            stats.mean.numpy(), expected.stats.stats.mean.numpy(), rtol=0, atol=1e-6
        )
        np.testing.assert_allclose(
            stats.std.numpy(), expected.stats.stats.std.numpy(), rtol=0, atol=1e-6
        )
    else:
        assert stats is None


@pytest.mark.parametrize("normalize", [True, False])
def test_every_score_comes_back_for_the_fusions(searcher: Searcher, normalize: bool) -> None:
    """`hybrid` and `fused` fuse SDR's scores of every document: k None returns them all,
    equal to the in-process scorer's, including a `sdr-window` query's regrouped paragraphs."""
    from docsim.search.ranking.methods.sdr_rankings import windowed

    tiebreak = searcher.tiebreak
    sharded = ShardedSdr(in_process(shards_of(searcher.index, tiebreak, 3)), 3, tiebreak)
    for query in (posted_query(searcher), windowed(posted_query(searcher), 3)):
        everything = np.arange(searcher.index.n_documents)
        expected = searcher.context.sdr.score(
            query, everything, normalize=normalize, mode=ScoringMode.exhaustive, pooled=False
        ).scores
        hits, _, scored = sharded.rank(shard_query(searcher, query, "all", None), None, normalize)
        assert scored == len(hits.positions) == 48
        got = np.full(48, -np.inf)
        got[hits.positions] = hits.scores
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_a_second_round_without_a_first_is_refused(searcher: Searcher) -> None:
    shard = shards_of(searcher.index, searcher.tiebreak, 2)[0]
    with pytest.raises(ShardUnavailableError, match="no first round"):
        shard.top("never-asked", None, 5)


def test_ranges_hold_about_equal_sentences() -> None:
    counts = np.array([10, 1, 1, 1, 30, 2, 2, 2, 2, 10])
    cuts = shard_ranges(counts, 3)
    assert cuts[0] == 0 and cuts[-1] == 10 and cuts == sorted(cuts)
    sums = [counts[a:b].sum() for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    assert max(sums) <= 30 + 10 and sum(sums) == counts.sum()
    assert all(s > 0 for s in sums)
    assert shard_ranges(counts, 1) == [0, 10]
    assert shard_ranges(counts, 10) == list(range(11))  # one document each
    few = shard_ranges(np.array([5, 5]), 3)  # more shards than documents: some stay empty
    assert len(few) == 4 and few == sorted(few) and few[0] == 0 and few[-1] == 2


@pytest.mark.parametrize("method", [Method.maxsim, Method.best_sentence, Method.ot])
@pytest.mark.parametrize("source", ["posted", "coffee-02"])
@pytest.mark.parametrize("pool", [None, POOL])
def test_sentence_methods_on_shards_equal_in_process(
    searcher: Searcher, method: Method, source: str, pool: list[str] | None
) -> None:
    from docsim.search.shards.coordinator import sentence_method_scores

    query = posted_query(searcher) if source == "posted" else searcher.query_from_index(source)
    tiebreak = searcher.tiebreak
    allowed = searcher.pipeline.allowed(
        query, SimilarOptions(candidates=pool)
    )  # what the searcher scores
    expected = searcher.scorers[method].scores(query, allowed, QueryScratch())
    config = searcher.settings
    got = sentence_method_scores(
        in_process(shards_of(searcher.index, tiebreak, 3)),
        3,
        shard_query(searcher, query, "s", pool),
        method.value,
        48,
        ot_reg=config.ot.reg,
        ot_iterations=config.ot.iterations,
    )
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    assert np.array_equal(np.isfinite(got), np.isfinite(expected))


@pytest.mark.parametrize("n_shards", [1, 3])
@pytest.mark.parametrize("restricted", [False, True])
@pytest.mark.parametrize("level", SEARCHED_ON_SHARDS)
def test_unit_search_on_shards_equals_the_flat_index(
    searcher: Searcher, n_shards: int, restricted: bool, level: str
) -> None:
    """`ShardedLevel` answers as the version's Flat index of the level: the same ids in the
    same order, scores to 1e-5, over everything or within a set of ids."""
    index = searcher.index
    shards = shards_of(index, searcher.tiebreak, n_shards)
    ids = index.ids[level]
    sharded = ShardedLevel(in_process(shards), n_shards, level, ids)
    queries = searcher.level_vectors(posted_query(searcher), level).numpy()  # (m, d)
    within = ids[::3] if restricted else None
    assert sharded.count == len(ids)
    for got, expected in zip(
        sharded.search(queries, 25, within),
        index.indices[level].search(queries, 25, within),
        strict=True,
    ):
        assert np.array_equal(got.ids, expected.ids)
        np.testing.assert_allclose(got.scores, expected.scores, rtol=0, atol=1e-5)
        if restricted:
            assert np.isin(got.ids, within).all()


COMPRESSED = ScanShape(dimensions=16, group=0, seed=0)  # half the tiny encoder's 32


def compressed_pair(searcher: Searcher, rescored: int) -> tuple[Searcher, Searcher]:
    """A searcher in one process and one on three compressed shards (in this process), both
    rescoring `rescored` documents exactly after the compressed pass."""
    settings = searcher.settings.replaced(scan={"rescore": rescored, "rescore_share": 0.0})
    parts = (searcher.index, searcher.encoder, searcher.splitter, searcher.engine, settings)
    one, sharded = Searcher(*parts), Searcher(*parts)
    shards = shards_of(searcher.index, sharded.tiebreak, 3, COMPRESSED)
    assert all(s.scan is not None and s.scan.basis.shape == (32, 16) for s in shards)
    sharded.use_shards(ShardedSdr(in_process(shards), 3, sharded.tiebreak, compressed=True))
    return one, sharded


@pytest.mark.parametrize("method", [Method.maxsim, Method.best_sentence])
@pytest.mark.parametrize("source", ["posted", "coffee-02"])
@pytest.mark.parametrize("pool", [None, POOL])
@pytest.mark.parametrize("rescored", [1, 4, 48])
def test_compressed_shards_score_as_one_compressed_process(
    searcher: Searcher, method: Method, source: str, pool: list[str] | None, rescored: int
) -> None:
    """Three compressed shards score a sentence-set method as one process's compressed
    level does (`SentenceSets` over a scan of the whole collection): the same estimates, the
    same `rescored` best of all the documents scored exactly, the others capped below those;
    within 1e-5. Every score exact where `rescored` covers the documents."""
    one, sharded = compressed_pair(searcher, rescored)
    query = posted_query(searcher) if source == "posted" else searcher.query_from_index(source)
    docs = np.sort(one.pipeline.allowed(query, SimilarOptions(candidates=pool)))
    scorer = one.scorers[method]
    exact = scorer.scores(query, docs, QueryScratch())  # no scan in `one`: every one exact
    scan = SentenceScan.of_index(searcher.index, COMPRESSED)  # the whole collection's
    approximate = len(docs) > rescored
    expected = scorer._two_passes(query, docs, scan, QueryScratch()) if approximate else exact
    got = sharded.scorers[method].scores(query, docs, QueryScratch())
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    finite = np.isfinite(exact)
    assert np.array_equal(np.isfinite(got), finite)
    assert approximate == (not np.allclose(got[finite], exact[finite], rtol=0, atol=1e-5))
    best = np.argsort(-got, kind="stable")[: min(rescored, len(docs))]
    np.testing.assert_allclose(got[best], exact[best], rtol=0, atol=1e-5)  # rescored exactly


def test_compressed_shards_and_one_process_rank_every_query_alike(searcher: Searcher) -> None:
    """Every document as the query: `maxsim`'s ranking on three compressed shards (4
    documents rescored of all) is the one process's compressed ranking, place for place."""
    one, sharded = compressed_pair(searcher, 4)
    scan = SentenceScan.of_index(searcher.index, COMPRESSED)
    for document_id in searcher.index.external_ids:
        query = searcher.query_from_index(document_id)
        docs = np.sort(one.pipeline.allowed(query, SimilarOptions()))
        expected = one.scorers[Method.maxsim]._two_passes(query, docs, scan, QueryScratch())
        got = sharded.scorers[Method.maxsim].scores(query, docs, QueryScratch())
        ranked = one.context.top(expected, docs, len(docs))
        assert np.array_equal(sharded.context.top(got, docs, len(docs)), ranked), document_id


def test_a_fusion_refines_its_best_exactly_on_compressed_shards(searcher: Searcher) -> None:
    """On compressed shards `refine` asks them for exact scores of the documents given, and
    the default fusion's top 3 agree with float32's over every document as the query
    (4 documents rescored per shard and refined: measured 0.924; bound 0.85)."""
    settings = searcher.settings.replaced(scan={"rescore": 4, "rescore_share": 0.0})
    parts = (searcher.index, searcher.encoder, searcher.splitter, searcher.engine, settings)
    exact, sharded = Searcher(*parts), Searcher(*parts)
    shards = shards_of(searcher.index, sharded.tiebreak, 3, COMPRESSED)
    sharded.use_shards(ShardedSdr(in_process(shards), 3, sharded.tiebreak, compressed=True))
    query = posted_query(searcher)
    everything = np.arange(48)
    reference = exact.scorers[Method.maxsim].scores(query, everything, QueryScratch())
    scorer = sharded.scorers[Method.maxsim]
    first = scorer.scores(query, everything, QueryScratch())
    assert not np.allclose(first, reference, rtol=0, atol=1e-5)  # approximate below the best
    chosen = np.array([3, 17, 40, 41])
    refined = scorer.refine(query, chosen, first, QueryScratch())
    np.testing.assert_allclose(refined[chosen], reference[chosen], rtol=0, atol=1e-5)
    others = np.setdiff1d(everything, chosen)
    assert np.array_equal(refined[others], first[others])
    overlaps = []
    options = SimilarOptions(top_k=3, method=Method.fused, matches_per_result=0)
    for document_id in searcher.index.external_ids:
        ref = {
            h.document_id
            for h in exact.similar(exact.query_from_index(document_id), options).results
        }
        got = sharded.similar(sharded.query_from_index(document_id), options).results
        overlaps.append(len(ref & {h.document_id for h in got}) / 3)
    print(f"fused overlap {np.mean(overlaps):.3f}")
    assert np.mean(overlaps) >= 0.85


def test_shards_health_names_the_missing_and_counts_per_node() -> None:
    """The health a sharded service reports: green only when every shard answered, the
    missing ones named by their index, the answering counted per node."""
    from docsim.search.shards.ray_shards import ShardsHealth

    whole = ShardsHealth(("10.0.0.3", "10.0.0.4", "10.0.0.3"))
    assert whole.colour == "green" and whole.missing == []
    assert whole.per_node() == {"10.0.0.3": 2, "10.0.0.4": 1}
    lost = ShardsHealth(("10.0.0.3", None, "10.0.0.3", None))
    assert lost.colour == "red" and lost.missing == [1, 3]
    assert lost.per_node() == {"10.0.0.3": 2}
    assert lost.describe() == "2 of 4 shards do not answer (shard 1, 3)"
