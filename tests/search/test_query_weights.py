"""Query-sentence weights (`query_weighting=rarity`, `search.query_weights`) against brute
force over the stored vectors: the weights themselves, `sdr` and `maxsim` weighted by them in
one process and on shards, and `/explain`'s score, which is the ranking's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from docsim.models.kernels.scoring import sdr_scores
from docsim.protocol.choices import Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.explanations import explain_pair
from docsim.search.searcher import Searcher
from docsim.search.settings import SearchSettings
from docsim.search.shards.coordinator import ShardedLevel, ShardedSdr
from docsim.search.shards.cuts import shards_of
from docsim.search.shards.shard import in_process
from docsim.search.types import Query
from tests.search.test_methods import all_scores, document_sentences, with_config
from tests.search.test_search import query_of

# a posted query, and an indexed document left out of its own: five of coffee-02's sentences
# have both their two nearest in it (the search asks again for those, `nearest` 1)
KINDS = ["posted", "coffee-02"]


def reference_weights(searcher: Searcher, query: Query, source: str | None) -> torch.Tensor:
    """Each query sentence's one minus the mean cosine of its `rprs.sentences` nearest among
    every other document's stored sentences, scaled to mean 1."""
    m = searcher.settings.rprs.sentences
    others = [v for e, v in document_sentences(searcher).items() if e != source]
    cosines = query.sentence_vectors.float() @ torch.cat(others).float().T  # (n, S')
    rarity = 1 - torch.topk(cosines, m, dim=1).values.double().mean(dim=1)  # (n,)
    return rarity / rarity.mean()


@pytest.mark.parametrize("nearest", [1, 10])  # 1: the source's own sentences crowd the search
@pytest.mark.parametrize("kind", KINDS)
def test_weights_are_each_sentences_rarity_among_the_other_documents(
    searcher: Searcher, kind: str, nearest: int
) -> None:
    weighted = with_config(searcher, query_weighting="rarity", rprs={"sentences": nearest})
    query, source = query_of(weighted, kind)
    got = weighted.sentence_weights(query)
    assert got is not None
    torch.testing.assert_close(got, reference_weights(weighted, query, source), rtol=0, atol=1e-5)
    assert float(got.std()) > 0.05  # the sentences differ: the test can tell weights apart
    assert weighted.sentence_weights(query) is got  # kept for the query
    assert with_config(searcher).sentence_weights(query) is None  # `uniform`


@pytest.mark.parametrize("kind", KINDS)
def test_weighted_sdr_is_sdr_with_those_weights(searcher: Searcher, kind: str) -> None:
    """Exhaustive `sdr` of every other document, its paragraphs' P weighted means and its
    document scores weighted by the paragraphs' mean weights (`models.kernels.scoring`)."""
    weighted = with_config(searcher, query_weighting="rarity")
    query, source = query_of(weighted, kind)
    external = weighted.index.external_ids
    others = np.array([d for d, e in enumerate(external) if e != source])
    collection = weighted.context.sdr.sub_collection(others)[0]
    scores, _ = sdr_scores(
        query.sentence_vectors,
        query.paragraph_lengths,
        collection,
        weights=reference_weights(searcher, query, source),
    )
    want = {external[d]: s for d, s in zip(others.tolist(), scores.tolist(), strict=True)}
    found = all_scores(weighted, query, Method.sdr)
    assert found == pytest.approx(want, abs=1e-4)
    uniform = all_scores(with_config(searcher), query, Method.sdr)
    assert max(abs(uniform[e] - want[e]) for e in want) > 1e-3


@pytest.mark.parametrize("kind", KINDS)
def test_weighted_maxsim_is_the_weighted_mean_of_the_best_matches(
    searcher: Searcher, kind: str
) -> None:
    weighted = with_config(searcher, query_weighting="rarity")
    query, source = query_of(weighted, kind)
    weights = reference_weights(searcher, query, source).float()
    sentences = query.sentence_vectors.float()
    found = all_scores(weighted, query, Method.maxsim)
    uniform = all_scores(with_config(searcher), query, Method.maxsim)
    assert found != pytest.approx(uniform, abs=1e-4)
    for external, vectors in document_sentences(searcher).items():
        if external == source:
            continue
        best = (sentences @ vectors.float().T).max(dim=1).values  # (n,)
        want = float((best * weights).sum() / weights.sum())
        assert found[external] == pytest.approx(want, abs=1e-5), external


def sharded_twin(searcher: Searcher, settings: SearchSettings) -> Searcher:
    """`searcher`'s version on three shards in this process, its sentence level searched
    there too (on its own copy of the index's searches)."""
    index = replace(searcher.index, indices=dict(searcher.index.indices))
    twin = Searcher(index, searcher.encoder, searcher.splitter, searcher.engine, settings)
    shards = in_process(shards_of(index, twin.tiebreak, 3))
    level = ShardedLevel(shards, 3, "sentence", index.ids["sentence"])
    twin.use_shards(ShardedSdr(shards, 3, twin.tiebreak), {"sentence": level})
    assert twin.index.indices["sentence"] is level
    return twin


@pytest.mark.parametrize("method", [Method.sdr, Method.maxsim])
@pytest.mark.parametrize("kind", KINDS)
def test_shards_weigh_as_one_process(searcher: Searcher, method: Method, kind: str) -> None:
    settings = SearchSettings(query_weighting="rarity")
    one = with_config(searcher, query_weighting="rarity")
    sharded = sharded_twin(searcher, settings)
    query, _ = query_of(one, kind)
    options = SimilarOptions(
        top_k=48, method=method, mode=ScoringMode.exhaustive, matches_per_result=0
    )
    expected = one.similar(query, options).results
    got = sharded.similar(query, options).results
    assert [h.document_id for h in got] == [h.document_id for h in expected]
    np.testing.assert_allclose(
        [h.score for h in got], [h.score for h in expected], rtol=0, atol=1e-5
    )
    # the shards' float32 cosines are the Flat index's summed in another order (about 1e-7
    # each), and the weights divide by the query's mean rarity
    weights = sharded.sentence_weights(query), one.sentence_weights(query)
    torch.testing.assert_close(*weights, rtol=0, atol=1e-5)
    uniform = with_config(searcher).similar(query, options).results
    assert [h.score for h in uniform] != pytest.approx([h.score for h in got], abs=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_explain_scores_a_pair_as_the_weighted_ranking_did(searcher: Searcher, kind: str) -> None:
    weighted = with_config(searcher, query_weighting="rarity")
    query, _ = query_of(weighted, kind)
    options = SimilarOptions(top_k=5, method=Method.sdr, matches_per_result=0)
    stats = weighted.ranking_stats(query)
    for hit in weighted.similar(query, options).results:
        explained = explain_pair(weighted, query, "q", "query", hit.document_id, stats)
        assert explained.score == pytest.approx(hit.score, abs=1e-4), hit.document_id
