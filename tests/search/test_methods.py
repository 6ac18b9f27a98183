"""The ranking levers of `Searcher.similar` against references computed here from the stored
vectors and texts: sentence matching by brute force, BM25 variants through bm25s run directly,
pseudo-paragraphs against a query posted with those paragraphs, and `fused` by hand."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
import torch
from pydantic import ValidationError

from docsim.indexer.store.reader import document_units
from docsim.indexer.text.corpus import json_document
from docsim.protocol.choices import WHOLE_DOCUMENT_ONLY, Granularity, Method
from docsim.protocol.requests import SimilarOptions
from docsim.search.arrays import Positions, Scores
from docsim.search.errors import QueryError
from docsim.search.lexical.tokens import stemmer_for
from docsim.search.ranking.methods.scorers import top_mean_per_group
from docsim.search.ranking.methods.sdr_rankings import windowed
from docsim.search.ranking.scorer import QueryScratch, Scorer
from docsim.search.searcher import Searcher
from docsim.search.settings import SearchSettings, VerbatimSettings
from docsim.search.types import Query
from tests.models.kernels.test_proportional import rprs_reference
from tests.search.test_search import query_of, stored_texts

# the service's BM25 stems (DOCSIM_SEARCH__BM25__STEMMER); the references stem the same way
STEMMER = stemmer_for(SearchSettings().bm25.stemmer)


def with_config(searcher: Searcher, **values) -> Searcher:  # noqa: ANN003
    return Searcher(
        searcher.index,
        searcher.encoder,
        searcher.splitter,
        searcher.engine,
        SearchSettings(**values),
    )


def as_setting(weights: tuple[tuple[Method, float], ...]) -> str:
    """`DOCSIM_SEARCH__FUSION`'s text of `weights`."""
    return ",".join(f"{method.value}:{weight}" for method, weight in weights)


def all_scores(searcher: Searcher, query, method: Method) -> dict[str, float]:  # noqa: ANN001
    options = SimilarOptions(top_k=48, method=method, matches_per_result=0)
    return {h.document_id: h.score for h in searcher.similar(query, options).results}


def document_sentences(searcher: Searcher) -> dict[str, torch.Tensor]:
    """Each document's sentence vectors `(m, d)`, found through SQL's unit ids."""
    index = searcher.index
    out = {}
    for d, external in enumerate(index.external_ids):
        ids = [u for u, _, _ in document_units(searcher.engine, "sentence", int(index.doc_ids[d]))]
        rows = np.searchsorted(index.ids["sentence"], ids)
        out[external] = index.vectors["sentence"][torch.from_numpy(rows)]
    return out


@pytest.mark.parametrize("kind", ["posted", "lighthouses-03"])
def test_every_method_ranks_every_other_document_best_first(searcher: Searcher, kind: str) -> None:
    query, source = query_of(searcher, kind)
    for method in Method:
        hits = searcher.similar(query, SimilarOptions(top_k=48, method=method)).results
        assert len(hits) == (48 if source is None else 47), method
        assert source not in {h.document_id for h in hits}
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True) and np.isfinite(scores).all(), method


@pytest.mark.parametrize("kind", ["posted", "coffee-04"])
def test_sentence_matching_equals_brute_force(searcher: Searcher, kind: str) -> None:
    query, source = query_of(searcher, kind)
    sentences = query.sentence_vectors.float()
    found = {m: all_scores(searcher, query, m) for m in (Method.maxsim, Method.best_sentence)}
    for external, vectors in document_sentences(searcher).items():
        if external == source:
            continue
        best = (sentences @ vectors.float().T).max(dim=1).values  # (n,)
        assert found[Method.maxsim][external] == pytest.approx(best.mean().item(), abs=1e-5)
        assert found[Method.best_sentence][external] == pytest.approx(best.max().item(), abs=1e-5)


def test_ot_rewards_the_document_itself_most(searcher: Searcher) -> None:
    """A posted copy of an indexed document aligns best with that document."""
    texts = stored_texts(searcher)
    posted = json_document({"id": "copy", "text": texts["medieval-02"]}, "")
    query = searcher.query_from_source(posted)  # type: ignore[arg-type]
    hits = searcher.similar(query, SimilarOptions(top_k=3, method=Method.ot)).results
    assert hits[0].document_id == "medieval-02"


def test_sdr_window_is_sdr_on_a_query_posted_with_those_paragraphs(searcher: Searcher) -> None:
    """With windows of one sentence, the query scores as if each sentence were a paragraph."""
    query, _ = query_of(searcher, "posted")
    one = with_config(searcher, query_window=1)
    sentences = [query.text[a:b] for a, b in query.level_spans["sentence"]]
    split = json_document({"id": "q", "text": "\n\n".join(sentences)}, "")
    per_sentence = searcher.query_from_source(split)  # type: ignore[arg-type]
    assert per_sentence.paragraph_lengths.tolist() == [1] * len(sentences)
    # the same sentence vectors: late chunking reads them in their chunks, and the text split
    # differently may be chunked differently; the scoring is what this compares
    per_sentence.sentence_vectors = query.sentence_vectors
    expected = all_scores(searcher, per_sentence, Method.sdr)
    found = all_scores(one, query, Method.sdr_window)
    for external, score in expected.items():
        assert found[external] == pytest.approx(score, abs=1e-4), external


def test_windowed_cuts_each_paragraph_and_follows_the_sentences(searcher: Searcher) -> None:
    query, _ = query_of(searcher, "posted")
    lengths = query.paragraph_lengths.tolist()  # the posted query: four paragraphs of two
    cut = windowed(query, 3)
    assert cut.paragraph_lengths.tolist() == sum(
        ([min(n, 3)] + ([n - 3] if n > 3 else []) for n in lengths), []
    )
    spans = query.level_spans["sentence"]
    assert cut.paragraphs[0] == (spans[0][0], spans[lengths[0] - 1][1])


def bm25s_scores(texts: list[str], tokens: list[str]) -> np.ndarray:
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=STEMMER, show_progress=False),
        show_progress=False,
    )
    known = [t for t in tokens if t in retriever.vocab_dict]
    return retriever.get_scores(known) if known else np.zeros(len(texts))


def test_bm25_reduced_is_bm25s_on_the_highest_idf_half(searcher: Searcher) -> None:
    texts = stored_texts(searcher)
    external_ids = sorted(texts)
    query, _ = query_of(searcher, "posted")
    tokens = bm25s.tokenize(
        [query.text], stopwords="en", stemmer=STEMMER, return_ids=False, show_progress=False
    )[0]
    n = len(texts)
    df = {
        t: sum(
            t
            in bm25s.tokenize(
                [texts[e]], stopwords="en", stemmer=STEMMER, return_ids=False, show_progress=False
            )[0]
            for e in external_ids
        )
        for t in set(tokens)
    }
    idf = {t: np.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) if df[t] else 0.0 for t in df}
    distinct = sorted(dict.fromkeys(tokens), key=lambda t: -idf[t])
    kept = set(distinct[: int(np.ceil(len(distinct) / 2))])
    expected = bm25s_scores([texts[e] for e in external_ids], [t for t in tokens if t in kept])
    found = all_scores(searcher, query, Method.bm25_reduced)
    for e, score in zip(external_ids, expected, strict=True):
        assert found[e] == pytest.approx(float(score), rel=1e-5, abs=1e-6), e


def test_a_long_query_is_cut_to_its_strongest_terms(searcher: Searcher) -> None:
    """Above `bm25.query_terms` distinct terms, BM25 scores only the query's occurrences of
    the terms of the highest count times idf (found by hand here), as bm25s scores that
    query; RM3 then takes its feedback from it. A cap above the query's terms changes
    nothing."""
    texts = stored_texts(searcher)
    external_ids = sorted(texts)
    query = searcher.query_from_index(external_ids[4])
    tokens = tokens_of(query.bm25_text)
    collection = [set(tokens_of(texts[e])) for e in external_ids]
    n = len(texts)
    df = {t: sum(t in words for words in collection) for t in set(tokens)}
    idf = {t: np.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in df}
    first = {t: i for i, t in reversed(list(enumerate(tokens)))}
    by_strength = sorted(df, key=lambda t: (-tokens.count(t) * idf[t], first[t]))
    cap = len(by_strength) // 3
    kept = set(by_strength[:cap])
    capped = with_config(searcher, bm25={"query_terms": cap})
    found = all_scores(capped, query, Method.bm25)
    expected = bm25s_scores([texts[e] for e in external_ids], [t for t in tokens if t in kept])
    for e, score in zip(external_ids, expected, strict=True):
        if e in found:  # the query's own document is not ranked
            assert found[e] == pytest.approx(float(score), rel=1e-5, abs=1e-6), e
    whole = all_scores(with_config(searcher, bm25={"query_terms": 100_000}), query, Method.bm25_rm3)
    assert all_scores(capped, query, Method.bm25_rm3) != pytest.approx(whole)
    roomy = with_config(searcher, bm25={"query_terms": len(by_strength)})
    assert all_scores(roomy, query, Method.bm25_rm3) == whole


def tokens_of(text: str) -> list[str]:
    """bm25s' tokens of `text`, stemmed as the service stems."""
    return bm25s.tokenize(
        [text], stopwords="en", stemmer=STEMMER, return_ids=False, show_progress=False
    )[0]


def test_bm25_paragraph_is_each_documents_best_paragraph_under_bm25s(searcher: Searcher) -> None:
    texts = stored_texts(searcher)
    paragraphs, owners = [], []
    for d, external in enumerate(searcher.index.external_ids):
        for _, start, end in document_units(
            searcher.engine, "paragraph", int(searcher.index.doc_ids[d])
        ):
            paragraphs.append(texts[external][start:end])
            owners.append(external)
    query, _ = query_of(searcher, "posted")
    tokens = bm25s.tokenize(
        [query.text], stopwords="en", stemmer=STEMMER, return_ids=False, show_progress=False
    )[0]
    per_paragraph = bm25s_scores(paragraphs, tokens)
    expected: dict[str, float] = {}
    for owner, score in zip(owners, per_paragraph, strict=True):
        expected[owner] = max(expected.get(owner, 0.0), float(score))
    found = all_scores(searcher, query, Method.bm25_paragraph)
    assert found.keys() == expected.keys()
    for external, score in expected.items():
        assert found[external] == pytest.approx(score, rel=1e-5, abs=1e-6), external


def test_top_mean_per_group_by_hand() -> None:
    scores = np.array([1.0, 5.0, 3.0, 2.0, 4.0])
    group = np.array([0, 0, 0, 2, 2])
    np.testing.assert_allclose(top_mean_per_group(scores, group, 4, 2), [4.0, 0.0, 3.0, 0.0])
    np.testing.assert_allclose(top_mean_per_group(scores, group, 3, 1), [5.0, 0.0, 4.0])


@pytest.mark.parametrize("how", ["zscore", "minmax"])
@pytest.mark.parametrize("kind", ["posted", "oceans-05"])
def test_fused_equals_normalised_scores_summed_by_hand(
    searcher: Searcher, kind: str, how: str
) -> None:
    weights = ((Method.bm25, 1.0), (Method.maxsim, 0.5), (Method.document, 2.0))
    fused = with_config(searcher, fusion=as_setting(weights), fusion_normaliser=how)
    query, _ = query_of(fused, kind)
    parts = {m: all_scores(searcher, query, m) for m, _ in weights}
    ids = sorted(parts[Method.bm25])
    total = np.zeros(len(ids))
    for method, weight in weights:
        values = np.array([parts[method][i] for i in ids])
        if how == "zscore":
            total += weight * (values - values.mean()) / values.std()
        else:
            total += weight * (values - values.min()) / (values.max() - values.min())
    expected = dict(zip(ids, total, strict=True))
    hits = fused.similar(query, SimilarOptions(top_k=48, method=Method.fused)).results
    assert [h.document_id for h in hits][:5] == sorted(ids, key=lambda i: -expected[i])[:5]
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.document_id], abs=1e-5)
    assert hits[0].matches, "a fused ranking still explains its hits with paragraph pairs"


@pytest.mark.parametrize("gated", [True, False])
def test_fused_counts_the_shingle_channel_by_its_outliers(searcher: Searcher, gated: bool) -> None:
    quoted = (  # coffee-02, word for word: its shingle score stands out
        "Coffea canephora, sold under the name robusta, supplies most of the remainder and is "
        "favoured for instant products and espresso blends that need body and crema."
    )
    weights = ((Method.bm25, 1.0), (Method.maxsim, 1.0), (Method.bm25_shingles, 2.0))
    fused = with_config(
        searcher,
        fusion=as_setting(weights),
        fusion_normaliser="minmax",
        verbatim=VerbatimSettings(fusion_outliers_only=gated, fusion_outlier_z=2.0),
    )
    query = fused.query_from_source(json_document({"id": "q", "text": f"Notes. {quoted}"}, ""))
    parts = {m: all_scores(fused, query, m) for m, _ in weights}
    ids = sorted(parts[Method.bm25])
    total = np.zeros(len(ids))
    for method, weight in weights:
        values = np.array([parts[method][i] for i in ids])
        if gated and method is Method.bm25_shingles:
            z = (values - values.mean()) / values.std()
            assert z.max() > 2.0  # the quoted document is an outlier
            total += weight * np.maximum(z - 2.0, 0) / (z.max() - 2.0)
        else:
            total += weight * (values - values.min()) / (values.max() - values.min())
    expected = dict(zip(ids, total, strict=True))
    hits = fused.similar(query, SimilarOptions(top_k=48, method=Method.fused)).results
    assert hits[0].document_id == "coffee-02"
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.document_id], abs=1e-5)


def test_no_method_means_the_configured_default(searcher: Searcher) -> None:
    query, _ = query_of(searcher, "posted")
    default = with_config(searcher, default_method=Method.maxsim)
    result = default.similar(query, SimilarOptions(top_k=5))
    assert result.method is Method.maxsim
    same = default.similar(query, SimilarOptions(top_k=5, method=Method.maxsim))
    assert [h.document_id for h in result.results] == [h.document_id for h in same.results]


def test_whole_document_methods_refuse_other_granularities(searcher: Searcher) -> None:
    query, _ = query_of(searcher, "posted")
    for method in WHOLE_DOCUMENT_ONLY:
        with pytest.raises(QueryError, match="ranks whole documents"):
            searcher.similar(
                query, SimilarOptions(method=method, granularity=Granularity.paragraph)
            )


def test_bad_search_settings_are_named() -> None:
    for values, message in (
        ({"default_method": "bm26"}, r"default_method\n.*'sdr', 'sdr-window'"),
        ({"fusion": "bm25:1,fused:1"}, "cannot weigh the fusion 'fused'"),
        ({"fusion": "bm26:1"}, "unknown method 'bm26'; valid: sdr, sdr-window"),
        ({"fusion": "bm25"}, "is not 'method:number'"),
    ):
        with pytest.raises(ValidationError, match=message):
            SearchSettings(**values)
    fusion = SearchSettings(fusion="bm25:2,maxsim:1").fusion_weights
    assert fusion == ((Method.bm25, 2.0), (Method.maxsim, 1.0))


def test_a_fused_query_with_matches_off_returns_none(searcher: Searcher) -> None:
    query, _ = query_of(searcher, "posted")
    options = SimilarOptions(top_k=3, method=Method.fused, matches_per_result=0)
    fused = with_config(searcher, fusion="bm25:1")
    assert all(not h.matches for h in fused.similar(query, options).results)


def test_stemming_is_turned_off_by_none_and_a_wrong_language_is_named() -> None:
    assert SearchSettings(bm25={"stemmer": "none"}).bm25.stemmer is None
    with pytest.raises(ValueError, match="no Snowball stemmer for 'klingon'"):
        SearchSettings(bm25={"stemmer": "klingon"})


def test_every_method_is_a_row_of_the_one_table() -> None:
    """Every method, SDR's and the fusions included, is ranked by its row of the method
    table; nothing else files a scorer (no module registers one by being imported)."""
    from docsim.search.ranking.methods.sdr_rankings import SdrRanking
    from docsim.search.ranking.table import SCORERS

    assert set(SCORERS) == set(Method)
    explained = {m for m, row in SCORERS.items() if issubclass(row.local, SdrRanking)}
    assert explained == {Method.sdr, Method.sdr_window, Method.hybrid, Method.fused}


def test_a_method_is_one_class_and_one_row(searcher: Searcher) -> None:
    """What `docs/adding-a-method.md` says: a scorer class and a row in a table of
    `scorers_for` are all a method needs to rank through `Searcher.similar`, in-process and on
    shards, and inside `fused`, which calls the rows of the same table. Here `bm25`'s row is
    given to a new class that scores by document length."""
    from docsim.search.ranking.table import SCORERS, ScorerRow, scorers_for

    class LongestFirst(Scorer):
        def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
            starts = self.context.sdr.doc_sentence_start  # (D + 1,)
            return np.diff(starts).astype(np.float64)  # (D,) each document's sentences

    table = {**SCORERS, Method.bm25: ScorerRow(LongestFirst, sharded=LongestFirst)}
    fusing = with_config(searcher, fusion="bm25:1", fusion_normaliser="minmax")
    for ranking in (searcher, fusing):
        ranking.scorers.update(scorers_for(ranking.context, table))
    try:
        query, _ = query_of(searcher, "astronomy-02")
        found = searcher.similar(query, SimilarOptions(method=Method.bm25, top_k=5)).results
        lengths = np.diff(searcher.context.sdr.doc_sentence_start)
        others = [
            p for p in range(searcher.index.n_documents) if p != searcher.position("astronomy-02")
        ]
        expected = sorted(others, key=lambda p: (-lengths[p], searcher.tiebreak[p]))[:5]
        ids = searcher.index.external_ids
        assert [h.document_id for h in found] == [ids[p] for p in expected]
        assert [h.score for h in found] == [float(lengths[p]) for p in expected]
        fused = fusing.similar(query, SimilarOptions(method=Method.fused, top_k=5)).results
        assert [h.document_id for h in fused] == [ids[p] for p in expected]
        low, high = lengths[others].min(), lengths[others].max()
        minmax = [(lengths[p] - low) / (high - low) for p in expected]
        assert [h.score for h in fused] == pytest.approx(minmax)
    finally:
        searcher.scorers.update(scorers_for(searcher.context))


@pytest.mark.parametrize("kind", ["posted", "astronomy-02"])
def test_document_prf_is_rocchio_on_the_document_vectors_by_hand(
    searcher: Searcher, kind: str
) -> None:
    """`document-prf` against Rocchio computed here in float64: the query's document vector
    and the mean of its 10 nearest other documents, half and half, renormalised."""
    query, source = query_of(searcher, kind)
    index = searcher.index
    vectors = index.vectors["document"].numpy().astype(np.float64)  # (D, d)
    own = searcher.level_vectors(query, "document")[0].numpy().astype(np.float64)  # (d,)
    first = vectors @ own
    others = [d for d, e in enumerate(index.external_ids) if e != source]
    top = sorted(others, key=lambda d: -first[d])[:10]
    moved = 0.5 * own + 0.5 * vectors[top].mean(axis=0)
    moved /= np.linalg.norm(moved)
    expected = {index.external_ids[d]: float(vectors[d] @ moved) for d in others}
    found = all_scores(searcher, query, Method.document_prf)
    assert found.keys() == expected.keys()
    for external, score in expected.items():
        assert found[external] == pytest.approx(score, abs=1e-5), external
    # with the query's whole weight, the feedback changes nothing but the query's norm
    alone = all_scores(with_config(searcher, prf={"query_weight": 1.0}), query, Method.document_prf)
    cosines = all_scores(searcher, query, Method.document)
    norm = float(np.linalg.norm(own))
    assert alone == pytest.approx({e: s / norm for e, s in cosines.items()}, abs=1e-6)


@pytest.mark.parametrize("weighting", ["uniform", "rarity"])
@pytest.mark.parametrize("kind", ["posted", "coffee-04"])
def test_rprs_equals_its_definition_on_the_stored_sentences(
    searcher: Searcher, kind: str, weighting: str
) -> None:
    """Each query sentence's nearest sentences by brute force over every other document's
    stored vectors, then rprs document by document (`rprs_reference`); with `rarity`, each
    query sentence weighs one minus the mean cosine of its nearest, scaled to mean 1."""
    searcher = with_config(searcher, query_weighting=weighting)
    query, source = query_of(searcher, kind)
    settings = searcher.settings
    sentences = document_sentences(searcher)  # collection order
    pool = [e for e in searcher.index.external_ids if e != source]
    rows = torch.cat([sentences[e] for e in pool]).float()  # (S', d)
    full = query.sentence_vectors.float() @ rows.T  # (k, S')
    ranked = torch.sort(full, dim=1, descending=True, stable=True)
    nearest = ranked.indices[:, : settings.rprs.sentences].tolist()
    rarity = [1 - sum(r) / len(r) for r in ranked.values[:, : settings.rprs.sentences].tolist()]
    weights = [r * len(rarity) / sum(rarity) for r in rarity] if weighting == "rarity" else None
    lengths = [len(sentences[e]) for e in pool]
    if source is not None:  # the source's sentences are masked, not dropped: its length counts
        at = searcher.index.external_ids.index(source)
        lengths.insert(at, len(sentences[source]))
        start = sum(lengths[:at])
        nearest = [[s + len(sentences[source]) * (s >= start) for s in r] for r in nearest]
    want = dict(
        zip(searcher.index.external_ids, rprs_reference(
            nearest, lengths, settings.rprs.k1, settings.rprs.b, weights), strict=True)
    )  # fmt: skip
    found = all_scores(searcher, query, Method.rprs)
    assert set(found) == set(pool)
    assert any(score > 0 for score in found.values())
    # rarity's weights come from float32 cosines, multiplied here in another order than the
    # service's blocks: they agree to about 1e-7; the counts alone are exact
    tolerance = 1e-6 if weighting == "rarity" else 1e-9
    for external in pool:
        assert found[external] == pytest.approx(want[external], abs=tolerance), external
