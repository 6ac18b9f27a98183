from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app, served_state
from docsim.indexer.text.corpus import json_document
from docsim.models.kernels.scoring import RaggedCollection, sdr_scores
from docsim.protocol.choices import Granularity, Method, ScoringMode
from docsim.protocol.requests import SimilarOptions
from docsim.search.scorer_settings import CandidateSettings
from docsim.search.searcher import Searcher
from docsim.search.settings import SearchSettings
from docsim.search.types import Query

POSTED = {
    "title": "Yeast and dough",
    "sections": [
        {
            "title": "Fermentation",
            "text": "Yeast ferments sugars in the dough. Carbon dioxide makes bread rise.",
        },
        {
            "title": "Baking",
            "text": "The oven sets the crumb.\n\nA crust forms as the surface dries.",
        },
    ],
}


def test_health_and_ready(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready").json()
    assert ready["status"] == "ready" and ready["documents"] == 48


@pytest.mark.parametrize("method", [m.value for m in Method])
def test_every_method_ranks_documents(client: TestClient, method: str) -> None:
    response = client.post(
        "/similar", json={"document_id": "baking-01", "top_k": 7, "method": method}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (
        body["index_version"] >= 1 and body["encoder"] and body["took_ms"] > 0 and body["query_id"]
    )
    results = body["results"]
    assert [r["rank"] for r in results] == list(range(1, 8))
    assert "baking-01" not in [r["document_id"] for r in results]  # the source never ranks itself
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    if method in ("sdr", "hybrid"):
        for result in results:
            assert result["matches"]
            for match in result["matches"]:
                assert match["source_text"] and match["target_text"]
                assert match["source_end"] - match["source_start"] == len(match["source_text"])


def test_posted_document_and_match_offsets(client: TestClient) -> None:
    body = client.post("/similar", json={"document": POSTED, "top_k": 3}).json()
    assert len(body["results"]) == 3
    match = body["results"][0]["matches"][0]
    assert match["source_text"] in {
        "Yeast ferments sugars in the dough. Carbon dioxide makes bread rise.",
        "The oven sets the crumb.",
        "A crust forms as the surface dries.",
    }
    doc = client.post(
        "/similar", json={"document_id": body["results"][0]["document_id"], "top_k": 1}
    )
    assert doc.status_code == 200


@pytest.mark.parametrize("granularity", ["section", "paragraph", "sentence"])
def test_unit_granularities(client: TestClient, granularity: str) -> None:
    body = client.post(
        "/similar", json={"document_id": "oceans-02", "top_k": 5, "granularity": granularity}
    ).json()
    assert len(body["results"]) == 5
    for result in body["results"]:
        assert result["level"] == granularity and result["document_id"] != "oceans-02"
        assert result["text"] and result["end"] - result["start"] == len(result["text"])
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)


def test_candidates_restrict_the_ranking(client: TestClient) -> None:
    pool = ["running-01", "running-02", "coffee-03", "oceans-02"]
    body = client.post(
        "/similar", json={"document_id": "running-01", "candidates": pool, "top_k": 10}
    ).json()
    assert sorted(r["document_id"] for r in body["results"]) == sorted(pool[1:])


@pytest.mark.parametrize(
    ("payload", "status", "detail"),
    [
        ({"document": {"text": "   "}}, 422, "document is empty or invalid: empty text"),
        (
            {"document": {"title": "t", "text": "....\n\n* * *"}},
            422,
            "document 'query' has no sentences",
        ),
        ({"document": {"text": "## Only a heading"}}, 422, "document 'query' has no sentences"),
        ({"document_id": "nope"}, 404, "document 'nope' is not in the active index"),
        (
            {"document_id": "baking-01", "candidates": ["baking-02", "zzz"]},
            404,
            "1 candidate(s) not in the active index, e.g. ['zzz']",
        ),
        (
            {"document_id": "baking-01", "granularity": "sentence", "method": "bm25"},
            422,
            "method 'bm25' ranks whole documents; "
            "use granularity 'document' or method 'sdr' / 'document'",
        ),
    ],
)
def test_bad_input(client: TestClient, payload: dict, status: int, detail: str) -> None:
    response = client.post("/similar", json=payload)
    assert response.status_code == status
    assert response.json()["detail"] == detail


def test_enum_errors_list_the_valid_values(client: TestClient) -> None:
    response = client.post("/similar", json={"document_id": "baking-01", "method": "foo"})
    assert response.status_code == 422
    message = response.json()["detail"][0]["msg"]
    assert "'sdr', 'sdr-window', 'document'" in message and "'hybrid' or 'fused'" in message
    response = client.post("/similar", json={"document_id": "a", "document": POSTED})
    assert response.status_code == 422 and "exactly one of" in response.text


def test_size_limits(indexed_settings: ServiceSettings) -> None:
    settings = indexed_settings.model_copy(deep=True)
    settings.api.max_document_bytes = 100
    settings.api.max_sentences = 3
    with TestClient(create_app(settings)) as client:
        big = client.post("/similar", json={"document": {"text": "word " * 50}})
        assert (
            big.status_code == 413
            and big.json()["detail"]
            == "document has 250 characters; the limit is 100 (DOCSIM_API__MAX_DOCUMENT_BYTES)"
        )
        many = client.post("/similar", json={"document": {"text": "One. Two. Three. Four. Five."}})
        assert many.status_code == 413
        assert (
            many.json()["detail"]
            == "document has 5 sentences; the limit is 3 (DOCSIM_API__MAX_SENTENCES)"
        )


def test_no_active_index_is_503(tmp_path: Path) -> None:
    with TestClient(create_app(ServiceSettings(data_dir=tmp_path / "empty"))) as client:
        for response in (client.get("/ready"), client.post("/similar", json={"document_id": "x"})):
            assert response.status_code == 503
            assert "run `docsim index`" in response.json()["detail"]


def test_candidate_mode_equals_exhaustive_when_it_sees_everything(app) -> None:
    base: Searcher = served_state(app).searcher
    everything = SearchSettings(
        candidates=CandidateSettings(sentence_k=1000, document_k=1000), stats_sample_documents=1000
    )
    searcher = Searcher(base.index, base.encoder, base.splitter, base.engine, everything)
    query: Query = searcher.query_from_index("databases-03")
    exhaustive = searcher.similar(query, SimilarOptions(top_k=47, mode=ScoringMode.exhaustive))
    candidate = searcher.similar(query, SimilarOptions(top_k=47, mode=ScoringMode.candidate))
    assert candidate.mode == "candidate"
    assert [h.document_id for h in candidate.results] == [h.document_id for h in exhaustive.results]
    np.testing.assert_allclose(
        [h.score for h in candidate.results], [h.score for h in exhaustive.results], atol=1e-5
    )


def test_exhaustive_sdr_equals_direct_scoring(app) -> None:
    """The service's scores equal the scorer run by hand on the stored vectors, with every
    document but the source (excluded from its own ranking) as a candidate."""
    searcher: Searcher = served_state(app).searcher
    index = searcher.index
    query = searcher.query_from_index("medieval-02")
    result = searcher.similar(
        query, SimilarOptions(top_k=47, granularity=Granularity.document, method=Method.sdr)
    )
    others = [d for d in range(index.n_documents) if d != query.source_index]
    sentence_start = index.paragraph_sentence_start[index.doc_paragraph_start]
    rows = np.concatenate([np.arange(sentence_start[d], sentence_start[d + 1]) for d in others])
    paragraphs = np.concatenate(
        [np.arange(index.doc_paragraph_start[d], index.doc_paragraph_start[d + 1]) for d in others]
    )
    collection = RaggedCollection(
        sentences=index.collection.sentences[torch.from_numpy(rows)],
        paragraph_lengths=index.collection.paragraph_lengths[torch.from_numpy(paragraphs)],
        document_lengths=index.collection.document_lengths[torch.tensor(others)],
    )
    direct, _ = sdr_scores(query.sentence_vectors, query.paragraph_lengths, collection)
    expected = {index.external_ids[d]: float(s) for d, s in zip(others, direct, strict=True)}
    assert len(result.results) == 47
    for hit in result.results:
        assert hit.score == pytest.approx(expected[hit.document_id], abs=1e-5)


@pytest.mark.parametrize(
    ("text", "method"),
    [
        ("the", "bm25"),
        ("the of and", "bm25"),
        ("the", "hybrid"),
        ("the of and", "hybrid"),
        ("Zorblax quintessor.", "bm25"),  # words that no document has
        ("The zorblax.", "hybrid"),
    ],
)
def test_a_query_without_indexed_words_ranks_by_the_tie_break(
    client: TestClient, text: str, method: str
) -> None:
    """BM25 scores every document 0 when the query has no word of the BM25 vocabulary (only
    stop words, or unseen words): the ranking falls back to the tie-break order, never a 500."""
    response = client.post(
        "/similar", json={"document": {"text": text}, "method": method, "top_k": 7}
    )
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == 7
    if method == "bm25":
        assert [r["score"] for r in results] == [0.0] * 7
    searcher: Searcher = served_state(client.app).searcher
    query = searcher.query_from_source(json_document({"id": "q", "text": text}, ""))
    scores = searcher.similar(query, SimilarOptions(top_k=48, method=Method.bm25)).results
    assert len(scores) == 48 and all(hit.score == 0.0 for hit in scores)


def test_a_stored_document_of_stop_words_is_a_bm25_query(fresh_settings) -> None:
    stop_words = {
        "id": "stop-01",
        "title": "The",
        "text": "It is not that.\n\nThey are, and this was it.",
    }
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        added = client.post("/documents", json={"documents": [stop_words]})
        assert added.status_code == 200, added.text
        for method in ("bm25", "hybrid"):
            response = client.post(
                "/similar", json={"document_id": "stop-01", "method": method, "top_k": 5}
            )
            assert response.status_code == 200, response.text
            results = response.json()["results"]
            assert len(results) == 5 and "stop-01" not in [r["document_id"] for r in results]
            if method == "bm25":
                assert [r["score"] for r in results] == [0.0] * 5
        # the stop-word document is in the BM25 index and ranks, with a score of 0
        posted = client.post(
            "/similar", json={"document": POSTED, "method": "bm25", "top_k": 49}
        ).json()["results"]
        assert {r["document_id"]: r["score"] for r in posted}["stop-01"] == 0.0


def test_bm25_over_a_collection_without_indexed_words(app, monkeypatch) -> None:
    """bm25s cannot index a collection in which no document has a word: every score is 0."""
    import docsim.search.lexical.postings

    base: Searcher = served_state(app).searcher
    searcher = Searcher(base.index, base.encoder, base.splitter, base.engine, base.settings)
    monkeypatch.setattr(
        docsim.search.lexical.postings,  # where the BM25 postings read the texts
        "document_texts",
        lambda engine, ids: {int(d): "The of and." for d in ids},
    )
    # built from these texts, neither read from the version's kept postings (built from its
    # real texts, which a version never changes) nor kept for the tests after this one
    monkeypatch.setattr(docsim.search.lexical.postings, "load_postings", lambda *a: None)
    monkeypatch.setattr(docsim.search.lexical.postings, "save_postings", lambda *a: False)
    query = searcher.query_from_index("baking-01")
    result = searcher.similar(query, SimilarOptions(top_k=47, method=Method.bm25))
    assert len(result.results) == 47 and all(hit.score == 0.0 for hit in result.results)


@pytest.mark.parametrize("method", [m.value for m in Method])
def test_scored_documents_counts_what_was_ranked(client: TestClient, method: str) -> None:
    """The pool (without the source document), or the collection (without the source)."""

    def scored(**body) -> int:
        response = client.post("/similar", json={"method": method, **body})
        assert response.status_code == 200, response.text
        return response.json()["scored_documents"]

    pool = ["baking-01", "baking-02", "oceans-01"]
    assert scored(document_id="baking-01", candidates=pool) == 2
    assert scored(document=POSTED, candidates=pool) == 3
    assert scored(document_id="baking-01") == 47
    assert scored(document=POSTED) == 48


@pytest.mark.parametrize("granularity", ["section", "paragraph", "sentence"])
def test_scored_documents_of_unit_rankings(client: TestClient, granularity: str) -> None:
    """Unit rankings count the documents they chose units from, as document rankings do."""
    pool = ["baking-01", "baking-02", "oceans-01"]
    for body, expected in (
        ({"document_id": "baking-01", "candidates": pool}, 2),
        ({"document": POSTED, "candidates": pool}, 3),
        ({"document_id": "baking-01"}, 47),
        ({"document": POSTED}, 48),
    ):
        response = client.post("/similar", json={**body, "granularity": granularity})
        assert response.status_code == 200, response.text
        assert response.json()["scored_documents"] == expected, body


def test_a_posted_document_is_encoded_once_per_level(app) -> None:  # noqa: ANN001
    """Every text goes through the model once: with late chunking (the default) only the
    chunks, every level coming from that pass; with two passes its sentences for SDR, then
    the chunks on top. The vectors equal a full encoding of the document."""
    import copy
    from collections import Counter

    from docsim.indexer.text.chunking import add_chunks
    from docsim.indexer.text.split import split_document

    base: Searcher = served_state(app).searcher
    encoder = copy.deepcopy(base.encoder)
    encoded: list[tuple[int, ...]] = []  # the token ids of every input the model ran on
    forward = encoder.backend.hidden_states

    def counted(batches):  # noqa: ANN001, ANN202
        for batch, hidden in forward(batches):
            ids, mask = batch.input_ids, batch.attention_mask.bool()
            encoded.extend(tuple(row[keep].tolist()) for row, keep in zip(ids, mask, strict=True))
            yield batch, hidden

    encoder.backend.hidden_states = counted
    searcher = Searcher(base.index, encoder, base.splitter, base.engine, base.settings)
    query = searcher.query_from_source(json_document({**POSTED, "id": "q"}, ""))
    levels = {lv: searcher.level_vectors(query, lv) for lv in ("document", "section", "chunk")}
    assert max(Counter(encoded).values()) == 1, Counter(encoded).most_common(3)
    document = add_chunks(
        [split_document(json_document({**POSTED, "id": "q"}, ""), base.splitter)],
        base.encoder,
        int(base.index.manifest["chunk_tokens"]),
    )[0]
    sentences = len(document.encoder_input().sentences)
    late = encoder.chunk_vectors == "late"
    assert len(encoded) == (0 if late else sentences) + len(document.chunks)
    full = base.encoder.encode_documents([document.encoder_input()])[0]
    torch.testing.assert_close(query.sentence_vectors, full.sentences, atol=1e-6, rtol=0)
    torch.testing.assert_close(levels["document"], full.document[None], atol=1e-6, rtol=0)
    torch.testing.assert_close(levels["section"], full.sections, atol=1e-6, rtol=0)
    torch.testing.assert_close(levels["chunk"], full.chunks, atol=1e-6, rtol=0)


@pytest.mark.parametrize("granularity", ["document", "paragraph"])
def test_pages_put_together_are_the_whole_ranking(client: TestClient, granularity: str) -> None:
    query = {"document_id": "coffee-01", "granularity": granularity, "method": "sdr"}
    whole = client.post("/similar", json={**query, "top_k": 47}).json()
    pages, offset = [], 0
    while offset is not None:
        page = client.post("/similar", json={**query, "top_k": 10, "offset": offset}).json()
        assert len(page["results"]) <= 10
        pages += page["results"]
        offset = page["next_offset"]
    assert [(r["document_id"], r["rank"], r["score"]) for r in pages][: len(whole["results"])] == [
        (r["document_id"], r["rank"], r["score"]) for r in whole["results"]
    ]
    if granularity == "document":  # 47 other documents: five pages, the last one short
        assert len(pages) == 47 and whole["next_offset"] is None
    grouped = client.post(
        "/similar", json={**query, "granularity": "paragraph", "group_by": "document", "offset": 5}
    )
    assert grouped.status_code == 422 and "raise top_k" in grouped.text


@pytest.mark.parametrize("method", ["sdr", "bm25", "fused", "bm25-shingles"])
def test_results_carry_the_passages_they_share_with_the_query(client: TestClient, method) -> None:
    from docsim.search.lexical.passages import shared_passages
    from tests.app.test_explain import QUOTED

    text = f"As the planters' manual puts it, {QUOTED}. We agree."
    body = client.post(
        "/similar",
        json={
            "document": {"text": text},
            "top_k": 3,
            "method": method,
            "shared_passages": 2,
            "candidates": ["coffee-01", "coffee-02", "baking-01"],
        },  # fmt: skip
    ).json()
    by_id = {r["document_id"]: r for r in body["results"]}
    assert by_id["coffee-02"]["shared_passages"][0]["text"] == QUOTED
    for result in body["results"]:  # each the pure function's passages of the stored text
        stored = client.get(f"/documents/{result['document_id']}").json()["text"]
        expected = shared_passages(text, stored, min_words=8, limit=2)
        assert result["shared_passages"] == [vars(p) for p in expected]
    plain = client.post("/similar", json={"document": {"text": text}, "top_k": 5, "method": method})
    assert all(r["shared_passages"] == [] for r in plain.json()["results"])  # asked for only


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"shared_passages": 11}, "shared_passages"),
        ({"shared_passages": -1}, "shared_passages"),
        ({"shared_passages": 1, "granularity": "paragraph"}, "granularity 'document'"),
    ],
)
def test_shared_passages_are_bounded(client: TestClient, payload: dict, named: str) -> None:
    response = client.post("/similar", json={"document_id": "coffee-02", **payload})
    assert response.status_code == 422 and named in response.text


def test_excluded_documents_leave_the_ranking_and_its_population(client: TestClient) -> None:
    query = {"document_id": "coffee-02", "top_k": 48, "method": "bm25"}
    whole = client.post("/similar", json=query).json()["results"]
    left_out = [whole[0]["document_id"], whole[3]["document_id"], "not-indexed"]
    fewer = client.post("/similar", json={**query, "exclude": left_out}).json()["results"]
    kept = [(r["document_id"], r["score"]) for r in whole if r["document_id"] not in left_out]
    assert [(r["document_id"], r["score"]) for r in fewer] == kept  # bm25 needs no population
    fused = {**query, "method": "fused", "exclude": left_out}
    everyone = [r["document_id"] for r in whole if r["document_id"] not in left_out]
    pool = {**query, "method": "fused", "candidates": everyone}  # the same population, named
    by_exclude = client.post("/similar", json=fused).json()["results"]
    by_pool = client.post("/similar", json=pool).json()["results"]
    assert [r["document_id"] for r in by_exclude] == [r["document_id"] for r in by_pool]


def test_exclude_is_bounded(indexed_settings: ServiceSettings) -> None:
    api = indexed_settings.api.model_copy(update={"max_candidates": 2})
    with TestClient(create_app(indexed_settings.model_copy(update={"api": api}))) as client:
        response = client.post("/similar", json={"document_id": "coffee-02", "exclude": ["a"] * 3})
    assert response.status_code == 422 and "MAX_CANDIDATES" in response.text
