"""`Searcher` rankings against references computed here, over the sample corpus indexed with
the tiny random encoder: BM25 against bm25s run directly, hybrid against reciprocal-rank
fusion by hand, unit search against brute force, candidate mode against exhaustive mode."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import bm25s
import numpy as np
import pytest
import torch
from sqlalchemy import select

from docsim.indexer.store.tables import LEVEL_TABLES, documents
from docsim.indexer.text.corpus import json_document
from docsim.protocol.answers import UnitResult
from docsim.protocol.choices import Granularity, Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.arrays import concatenated_ranges
from docsim.search.candidates.centroids import CentroidCandidates, probe_depth, searched
from docsim.search.lexical.query_terms import rm3_weights
from docsim.search.lexical.tokens import stemmer_for
from docsim.search.ranking.pool import first_pass, scoring_mode
from docsim.search.scorer_settings import CandidateSettings, ExhaustiveSettings
from docsim.search.searcher import Searcher
from docsim.search.settings import SearchSettings
from docsim.search.types import Query

RRF_K = 60  # reciprocal-rank fusion's constant, as documented for `hybrid`
UNIT_LEVELS = ("section", "paragraph", "sentence")

POSTED = {
    "id": "query",
    "title": "Bread at home",
    "sections": [
        {
            "title": "Dough",
            "text": "Yeast ferments the sugars in flour. The dough doubles in a warm room.\n\n"
            "Knead until the dough is smooth. Gluten gives the loaf its structure.",
        },
        {
            "title": "Oven and sea",
            "text": "A hot oven sets the crumb quickly. Steam keeps the crust soft.\n\n"
            "Ships watched the lighthouse as waves broke on the coast. Zorblax quintessor.",
        },
    ],
}

# the service's BM25 stems (DOCSIM_SEARCH__BM25__STEMMER); the references stem the same way
STEMMER = stemmer_for(SearchSettings().bm25.stemmer)


def test_ranges_equals_concatenated_aranges() -> None:
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 100, size=50)
    ends = starts + rng.integers(0, 9, size=50)
    expected = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends, strict=True)])
    np.testing.assert_array_equal(concatenated_ranges(starts, ends), expected)


# --- fixtures and references ----------------------------------------------------------------


def posted_query(searcher: Searcher) -> Query:
    source = json_document(POSTED, "")
    return searcher.query_from_source(source)  # type: ignore[arg-type]


def stored_texts(searcher: Searcher) -> dict[str, str]:
    """Each document's stored text by external id, read straight from SQL."""
    with searcher.engine.connect() as conn:
        rows = conn.execute(
            select(documents.c.external_id, documents.c.text).where(
                documents.c.version_id == searcher.index.version_id
            )
        ).all()
    return {str(external_id): str(text) for external_id, text in rows}


def unit_documents(searcher: Searcher, level: str) -> dict[int, str]:
    """The external id of the document each unit of `level` belongs to, straight from SQL."""
    table, id_column = LEVEL_TABLES[level]
    with searcher.engine.connect() as conn:
        rows = conn.execute(
            select(id_column, documents.c.external_id)
            .join(documents, table.c.doc_id == documents.c.doc_id)
            .where(documents.c.version_id == searcher.index.version_id)
        ).all()
    return {int(unit): external_id for unit, external_id in rows}


def tie_break_order(searcher: Searcher) -> dict[str, int]:
    """Each document's place in the searcher's fixed random tie-break order: a query of stop
    words scores every document 0 under BM25, so its ranking is that order alone."""
    query = searcher.query_from_source(json_document({"id": "q", "text": "The of and."}, ""))
    hits = searcher.similar(query, SimilarOptions(top_k=48, method=Method.bm25)).results
    assert len(hits) == 48 and {h.score for h in hits} == {0.0}
    return {h.document_id: i for i, h in enumerate(hits)}


def query_of(searcher: Searcher, kind: str) -> tuple[Query, str | None]:
    """The posted query, or an indexed document as the query (and its id: the excluded one)."""
    if kind == "posted":
        return posted_query(searcher), None
    return searcher.query_from_index(kind), kind


# --- BM25 ---------------------------------------------------------------------------------


def whole_queries(searcher: Searcher) -> Searcher:
    """`searcher` with a BM25 term cap above any query here: a whole query is scored (the
    cap itself: `test_methods.test_a_long_query_is_cut_to_its_strongest_terms`)."""
    settings = searcher.settings.replaced(bm25={"query_terms": 100_000})  # every term
    return Searcher(searcher.index, searcher.encoder, searcher.splitter, searcher.engine, settings)


@pytest.mark.parametrize("kind", ["posted", "coffee-02"])
def test_bm25_equals_bm25s_run_directly(searcher: Searcher, kind: str) -> None:
    searcher = whole_queries(searcher)
    texts = stored_texts(searcher)
    external_ids = sorted(texts)
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(
            [texts[e] for e in external_ids], stopwords="en", stemmer=STEMMER, show_progress=False
        ),
        show_progress=False,
    )
    query, source = query_of(searcher, kind)
    text = texts[source] if source is not None else query.text
    tokens = bm25s.tokenize([text], stopwords="en", stemmer=STEMMER, show_progress=False)
    found, values = retriever.retrieve(tokens, k=len(texts), show_progress=False)
    reference = [
        (external_ids[int(d)], float(s))
        for d, s in zip(found[0], values[0], strict=True)
        if external_ids[int(d)] != source
    ]  # best first
    expected = dict(reference)

    hits = searcher.similar(query, SimilarOptions(top_k=48, method=Method.bm25)).results
    assert len(hits) == len(expected) == (48 if source is None else 47)
    assert {h.document_id for h in hits} == set(expected)
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.document_id], abs=1e-6), hit.document_id
    assert sum(s > 0 for _, s in reference[:10]) == 10  # the top 10 are real BM25 matches
    scores = [s for _, s in reference]
    for rank in range(10):  # the order, wherever the reference's scores are distinct
        neighbours = scores[max(rank - 1, 0) : rank] + scores[rank + 1 : rank + 2]
        if all(abs(scores[rank] - s) > 1e-6 for s in neighbours):
            assert hits[rank].document_id == reference[rank][0], rank


@pytest.mark.parametrize("kind", ["posted", "coffee-02"])
def test_bm25_rm3_equals_rm3_over_bm25s(searcher: Searcher, kind: str) -> None:
    """RM3 by hand over bm25s: its first pass, the top documents' token counts from bm25s'
    tokens, `rm3_weights` (tested by hand in test_lexical), and each expanded term's bm25s
    scores weighted and summed."""
    searcher = whole_queries(searcher)
    texts = stored_texts(searcher)
    external_ids = sorted(texts)
    corpus = [texts[e] for e in external_ids]
    options = {"stopwords": "en", "stemmer": STEMMER, "show_progress": False}
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, **options), show_progress=False)
    corpus_tokens = bm25s.tokenize(corpus, return_ids=False, **options)
    query, source = query_of(searcher, kind)
    text = texts[source] if source is not None else query.text
    tokens = bm25s.tokenize([text], return_ids=False, **options)[0]
    first = retriever.get_scores([t for t in tokens if t in retriever.vocab_dict])  # (N,)
    settings = searcher.settings
    allowed = [i for i, e in enumerate(external_ids) if e != source]
    top = sorted(allowed, key=lambda i: -first[i])[: settings.rm3.documents]
    assert len({float(first[i]) for i in top}) == len(top)  # a top set without ties
    weights = rm3_weights(
        tokens,
        [Counter(corpus_tokens[i]) for i in top],
        [float(first[i]) for i in top],
        terms=settings.rm3.terms,
        query_weight=settings.rm3.query_weight,
    )
    expected = np.zeros(len(corpus))
    for token, weight in weights.items():
        if token in retriever.vocab_dict:
            expected += weight * retriever.get_scores([token]).astype(np.float64)

    hits = searcher.similar(query, SimilarOptions(top_k=10, method=Method.bm25_rm3)).results
    assert len(hits) == 10
    for hit in hits:
        assert hit.score == pytest.approx(expected[external_ids.index(hit.document_id)], rel=1e-5)
    ranked = sorted(allowed, key=lambda i: -expected[i])[:10]
    assert [h.document_id for h in hits] == [external_ids[i] for i in ranked]


# --- hybrid ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["posted", "baking-01"])
def test_hybrid_equals_reciprocal_rank_fusion_by_hand(searcher: Searcher, kind: str) -> None:
    """score(d) = 1/(60 + rank_bm25(d)) + 1/(60 + rank_sdr(d)) over every document, ranks from
    1, ties broken by the searcher's fixed random order (the input rankings come from the
    searcher itself, so that their own ties are broken as it breaks them)."""
    query, source = query_of(searcher, kind)
    n = 48 if source is None else 47

    def ranks(method: Method) -> dict[str, int]:
        options = SimilarOptions(top_k=n, method=method, matches_per_result=0)
        hits = searcher.similar(query, options).results
        assert len(hits) == n
        return {h.document_id: position for position, h in enumerate(hits, start=1)}

    bm25, sdr = ranks(Method.bm25), ranks(Method.sdr)
    fused = {d: 1.0 / (RRF_K + bm25[d]) + 1.0 / (RRF_K + sdr[d]) for d in bm25}
    tie_break = tie_break_order(searcher)
    expected = sorted(fused, key=lambda d: (-fused[d], tie_break[d]))

    options = SimilarOptions(top_k=n, method=Method.hybrid, matches_per_result=0)
    hits = searcher.similar(query, options).results
    assert [h.document_id for h in hits] == expected
    for hit in hits:
        assert hit.score == pytest.approx(fused[hit.document_id], abs=1e-9), hit.document_id
    top = searcher.similar(query, SimilarOptions(top_k=5, method=Method.hybrid)).results
    assert [h.document_id for h in top] == expected[:5]


# --- unit search ----------------------------------------------------------------------------


def brute_force_units(
    searcher: Searcher,
    query: Query,
    level: str,
    vectors: torch.Tensor,
    source: str | None,
    pool: set[str] | None = None,
) -> dict[int, float]:
    """Each unit's best cosine over the query's units of `level`, for every unit of `level`
    in `vectors` (rows of `searcher.index.ids[level]`) outside the source document (and
    inside `pool` when given)."""
    best = (searcher.level_vectors(query, level) @ vectors.T).max(dim=0).values  # (n,)
    owner = unit_documents(searcher, level)
    return {
        int(unit): float(score)
        for unit, score in zip(searcher.index.ids[level], best.tolist(), strict=True)
        if owner[int(unit)] != source and (pool is None or owner[int(unit)] in pool)
    }


def unit_mismatches(hits: list[UnitResult], reference: dict[int, float], top_k: int) -> list[str]:
    """How `hits` differ from the best `top_k` of `reference` (1e-5): the score at each rank,
    and each hit's own score (so units may only swap places within near-ties)."""
    expected = sorted(reference.values(), reverse=True)[:top_k]
    problems = []
    if len(hits) != len(expected):
        problems.append(f"{len(hits)} hits, expected {len(expected)}")
    for rank, (hit, score) in enumerate(zip(hits, expected, strict=False), start=1):
        if abs(hit.score - score) > 1e-5:
            problems.append(f"rank {rank}: score {hit.score:.7f}, expected {score:.7f}")
        if hit.unit_id not in reference:
            problems.append(f"rank {rank}: unit {hit.unit_id} may not rank")
        elif abs(hit.score - reference[hit.unit_id]) > 1e-5:
            problems.append(
                f"unit {hit.unit_id}: score {hit.score:.7f}, its own {reference[hit.unit_id]:.7f}"
            )
    if len({h.unit_id for h in hits}) != len(hits):
        problems.append("a unit ranks twice")
    return problems


# FAISS is searched with k = top_k * 4 + 10 per query unit. Without a pool, that cannot miss
# the true top_k: a unit u of the true top_k has its best score s at some query unit q, and
# every unit closer to q than s has a best score above s, so ranks above u, unless it is the
# source's. A posted query has no source, so fewer than top_k units precede u at q. For an
# indexed query the source's own units can fill q's k neighbours; this top_k leaves room for
# 30 of them, and no query of the sample corpus comes close.
@pytest.mark.parametrize("kind", ["posted", "oceans-02"])
@pytest.mark.parametrize("level", UNIT_LEVELS)
def test_unit_search_equals_brute_force_over_the_faiss_vectors(
    searcher: Searcher, level: str, kind: str
) -> None:
    """Best cosine per unit over the query's units, the source's units left out, against the
    vectors the FAISS index holds."""
    query, source = query_of(searcher, kind)
    top_k = 5
    held = torch.from_numpy(searcher.index.indices[level].reconstruct(searcher.index.ids[level]))
    reference = brute_force_units(searcher, query, level, held, source)
    options = SimilarOptions(top_k=top_k, granularity=Granularity(level))
    result = searcher.similar(query, options)
    assert result.mode == "exhaustive"
    assert unit_mismatches(result.results, reference, top_k) == []  # type: ignore[arg-type]
    assert all(h.level == level and h.document_id != source for h in result.results)


def test_unit_search_equals_brute_force_over_the_stored_vectors(searcher: Searcher) -> None:
    """Found by this test: FAISS held the build's float32 vectors while the version stores
    (and SDR, /explain and later additions use) float16-rounded ones; FAISS now holds the
    rounded vectors too."""
    query = posted_query(searcher)
    top_k = 5
    problems = {}
    for level in UNIT_LEVELS:
        reference = brute_force_units(searcher, query, level, searcher.index.vectors[level], None)
        options = SimilarOptions(top_k=top_k, granularity=Granularity(level))
        hits = searcher.similar(query, options).results
        problems[level] = unit_mismatches(hits, reference, top_k)  # type: ignore[arg-type]
    assert problems == dict.fromkeys(UNIT_LEVELS, [])


def test_unit_search_in_a_pool_equals_brute_force(searcher: Searcher) -> None:
    """Found by this test: with candidates, unit search took the top_k*4+10 nearest units of
    the whole collection and only then kept the pool's (fewer than top_k hits, as few as none,
    or scores below a unit's best); it now searches among the pool's units only."""
    query = posted_query(searcher)
    pool = ["running-01", "running-02", "databases-05"]
    top_k = 3
    held = {
        level: torch.from_numpy(
            searcher.index.indices[level].reconstruct(searcher.index.ids[level])
        )
        for level in UNIT_LEVELS
    }
    problems = {}
    for level in UNIT_LEVELS:
        reference = brute_force_units(searcher, query, level, held[level], None, set(pool))
        assert len(reference) > top_k  # the pool has enough units to fill the ranking
        options = SimilarOptions(top_k=top_k, granularity=Granularity(level), candidates=pool)
        hits = searcher.similar(query, options).results
        problems[level] = unit_mismatches(hits, reference, top_k)  # type: ignore[arg-type]
    assert problems == dict.fromkeys(UNIT_LEVELS, [])


# --- candidate mode -------------------------------------------------------------------------


@pytest.mark.parametrize(
    # measured with the tiny random encoder (2026-11-26): mean overlap@10 0.348 (min 0.0, max
    # 0.6) with the nearest units, 0.421 (min 0.2, max 0.7) with the cells and residual codes
    ("generator", "least_overlap"),
    [("neighbours", 0.30), ("centroids", 0.35)],
)
def test_candidate_mode_overlaps_exhaustive_mode_where_it_sees_few_documents(
    searcher: Searcher, generator: str, least_overlap: float
) -> None:
    """Every document as the query: candidate mode scores at most 10 documents of 47, and its
    top 10 still holds a share of exhaustive mode's top 10."""
    small = SearchSettings(
        candidates=CandidateSettings(
            generator=generator, sentence_k=2, paragraph_k=2, document_k=2, max_documents=10
        ),
        stats_sample_documents=16,
    )
    candidate_searcher = Searcher(
        searcher.index, searcher.encoder, searcher.splitter, searcher.engine, small
    )
    overlaps = []
    for external_id in searcher.index.external_ids:
        query = candidate_searcher.query_from_index(external_id)

        def top10(mode: ScoringMode, query: Query = query):  # noqa: ANN202
            options = SimilarOptions(top_k=10, method=Method.sdr, mode=mode, matches_per_result=0)
            return candidate_searcher.similar(query, options)

        exhaustive, candidate = top10(ScoringMode.exhaustive), top10(ScoringMode.candidate)
        assert (exhaustive.mode, candidate.mode) == ("exhaustive", "candidate")
        assert exhaustive.scored_documents == 47
        assert candidate.scored_documents <= 10 < exhaustive.scored_documents
        assert len(exhaustive.results) == len(candidate.results) == 10
        assert external_id not in {h.document_id for h in candidate.results}
        shared = {h.document_id for h in exhaustive.results} & {
            h.document_id for h in candidate.results
        }
        overlaps.append(len(shared) / 10)
    assert np.mean(overlaps) >= least_overlap
    assert min(overlaps) < 1.0  # candidate mode really did miss documents


@pytest.mark.parametrize(
    ("settings", "documents", "paragraphs"),
    [
        (SearchSettings(), True, False),  # fused: bm25-rm3, document, maxsim
        (SearchSettings(default_method="bm25-paragraph"), False, True),
        (SearchSettings(default_method="hybrid"), True, False),
        (SearchSettings(default_method="fused", fusion="document:1,maxsim:1"), False, False),
    ],
)
def test_warm_builds_the_postings_the_default_methods_read(
    searcher: Searcher, settings: SearchSettings, documents: bool, paragraphs: bool
) -> None:
    """What `warm` builds is what the first request with no method would build."""
    fresh = Searcher(searcher.index, searcher.encoder, searcher.splitter, searcher.engine, settings)
    warmed = Searcher(
        searcher.index, searcher.encoder, searcher.splitter, searcher.engine, settings
    )
    warmed.warm()
    fresh.similar(fresh.query_from_index("baking-01"), SimilarOptions())
    for built in (warmed, fresh):
        assert (built.context.postings.built_documents is not None) is documents
        assert (built.context.postings.built_paragraphs is not None) is paragraphs


def test_auto_mode_weighs_the_query_against_the_collection() -> None:
    """`auto` scores exhaustively while the query's sentence products with the collection's
    stay within budget, and in a collection of at most `exhaustive.max_sentences`."""
    budget = SearchSettings(exhaustive=ExhaustiveSettings(max_sentences=1_000, max_products=10_000))
    auto = SimilarOptions()
    assert scoring_mode(auto, 1_000, budget, 10) is ScoringMode.exhaustive
    assert scoring_mode(auto, 1_000, budget, 11) is ScoringMode.candidate
    assert scoring_mode(auto, 100, budget, 100) is ScoringMode.exhaustive
    assert scoring_mode(auto, 1_001, budget, 1) is ScoringMode.candidate
    assert scoring_mode(SimilarOptions(candidates=["a"]), 10**9, budget, 10**3) is (
        ScoringMode.exhaustive  # a pool is always scored whole
    )
    assert scoring_mode(SimilarOptions(mode=ScoringMode.candidate), 1, budget, 1) is (
        ScoringMode.candidate
    )


def test_a_long_query_retrieves_candidates_through_the_cells(searcher: Searcher) -> None:
    """With a budget below a query's products, `auto` ranks `sdr` by candidate mode: the cells
    are fitted on that first query, and the ranking scores at most `candidates.max_documents`."""
    budget = SearchSettings(
        exhaustive=ExhaustiveSettings(max_products=1),
        candidates=CandidateSettings(max_documents=12),
    )
    ranker = Searcher(searcher.index, searcher.encoder, searcher.splitter, searcher.engine, budget)
    assert ranker.context.centroids is not None and not ranker.context.centroids.fitted
    query = ranker.query_from_index(searcher.index.external_ids[0])
    found = ranker.similar(query, SimilarOptions(top_k=5, method=Method.sdr))
    assert found.mode == "candidate" and found.scored_documents == 12
    assert ranker.context.centroids.fitted
    # the default fusion does not weigh `sdr`: no exact pass whose cost grows with the query
    default = ranker.similar(query, SimilarOptions(top_k=5, method=Method.fused))
    assert default.mode == "exhaustive"
    wide = Searcher(searcher.index, searcher.encoder, searcher.splitter, searcher.engine)
    assert wide.similar(query, SimilarOptions(top_k=5, method=Method.sdr)).mode == "exhaustive"


def test_centroid_candidates_are_the_best_by_residual_codes_of_the_best_by_cells(
    searcher: Searcher,
) -> None:
    """The two stages against plain selections (full stable sorts): the `most` best of
    `allowed` by residual codes when the first stage passes everything on; else the `most`
    best by residual codes of the first stage's `wide` best by cells."""
    cells = CentroidCandidates.of_index(searcher.index, dimensions=16, seed=0)
    query = searcher.query_from_index(searcher.index.external_ids[0]).sentence_vectors
    allowed = np.arange(1, searcher.index.n_documents)
    found = cells.candidates(query, allowed, n_probe=4, wide=len(allowed), refine_probe=4, most=10)
    refined = cells.refined(query, allowed, 4)
    assert np.array_equal(found, np.sort(allowed[np.argsort(-refined, kind="stable")[:10]]))
    narrow = cells.candidates(query, allowed, n_probe=4, wide=20, refine_probe=4, most=10)
    scores = cells.scores(query, 4)[allowed]
    first = np.sort(allowed[np.argsort(-scores, kind="stable")[:20]])  # ties: lower position
    second = cells.refined(query, first, 4)
    assert np.array_equal(narrow, np.sort(first[np.argsort(-second, kind="stable")[:10]]))
    assert np.array_equal(
        cells.candidates(query, allowed[:8], n_probe=4, wide=20, refine_probe=4, most=10),
        allowed[:8],
    )


@pytest.mark.parametrize(
    ("settings", "fitted"),
    [
        (SearchSettings(), False),  # the default fusion never needs candidates here
        (SearchSettings(default_method=Method.sdr), True),  # a long query would
        (SearchSettings(exhaustive=ExhaustiveSettings(max_sentences=10)), True),  # every query does
        (
            SearchSettings(
                default_method=Method.sdr, candidates=CandidateSettings(generator="neighbours")
            ),
            False,
        ),
    ],
)
def test_warming_fits_the_cells_where_a_default_query_may_need_them(
    searcher: Searcher, settings: SearchSettings, fitted: bool
) -> None:
    warmed = Searcher(
        searcher.index, searcher.encoder, searcher.splitter, searcher.engine, settings
    )
    warmed.warm()
    assert warmed.context.centroids is not None
    assert warmed.context.centroids.fitted is fitted


def test_a_long_query_probes_within_its_budget_of_cells(searcher: Searcher) -> None:
    """Each sentence probes `candidates.probe` cells while the query's sentences times that
    fit `candidates.probe_cells`, fewer (one at least) beyond; the candidates are those of
    that depth."""
    assert probe_depth(10, 32, 1024) == 32
    assert probe_depth(117, 32, 1024) == 8
    assert probe_depth(5000, 32, 1024) == 1
    assert probe_depth(0, 32, 1024) == 32
    cells = CentroidCandidates.of_index(searcher.index, dimensions=16, seed=0)
    query = searcher.query_from_index(searcher.index.external_ids[0]).sentence_vectors
    allowed = np.arange(1, searcher.index.n_documents)
    tight = SearchSettings(
        candidates=CandidateSettings(probe_cells=len(query) * 2, max_documents=10)
    )
    expected = cells.candidates(
        query,
        allowed,
        n_probe=2,
        wide=tight.candidates.refine,
        refine_probe=tight.candidates.refine_probe,
        most=10,
        refine_products=tight.candidates.refine_products,
    )
    assert np.array_equal(searched(cells, query, allowed, tight), expected)


def test_the_first_pass_of_candidate_mode() -> None:
    auto = SearchSettings(candidates=CandidateSettings(scan_max_sentences=100))
    assert first_pass(auto, True, 100) == "compressed"
    assert first_pass(auto, True, 101) == "centroids"
    assert first_pass(auto, False, 100) == "centroids"
    assert (
        first_pass(SearchSettings(candidates={"generator": "compressed"}), False, 1) == "centroids"
    )
    for generator in ("centroids", "neighbours"):
        assert first_pass(SearchSettings(candidates={"generator": generator}), True, 1) == generator


def test_many_clients_at_once_fit_the_cells_once_and_rank_alike(
    searcher: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen threads ask a fresh searcher for candidate rankings together: the cells are
    fitted by one of them, the others wait for them, and every answer is the same."""
    for kept in searcher.index.path.glob("cells-*.npz"):  # fitted by an earlier test
        kept.unlink()
    fits = []
    fit = CentroidCandidates.of_index

    def counted(*args: object, **kwargs: object) -> CentroidCandidates:
        fits.append(1)
        return fit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(CentroidCandidates, "of_index", counted)
    fresh = Searcher(
        searcher.index,
        searcher.encoder,
        searcher.splitter,
        searcher.engine,
        SearchSettings(candidates=CandidateSettings(generator="centroids", max_documents=12)),
    )
    query = fresh.query_from_index(searcher.index.external_ids[3])
    options = SimilarOptions(top_k=5, method=Method.sdr, mode=ScoringMode.candidate)

    def rank(_: int) -> list[tuple[str, float]]:
        return [(h.document_id, h.score) for h in fresh.similar(query, options).results]

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(rank, range(32)))
    assert len(fits) == 1
    assert all(answer == answers[0] for answer in answers) and len(answers[0]) == 5
