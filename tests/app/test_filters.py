"""`filter` and `group_by` on POST /similar, against plain references: a filtered ranking is
the unfiltered one with the other documents taken out by hand (same scores), grouped units
are the ungrouped list post-processed, and bad filters are 422s naming the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.settings import DatabaseSettings, JobSettings
from docsim.indexer.text.corpus import SAMPLE_CORPUS
from docsim.search.settings import SearchSettings
from tests.utils.indexes import publish
from tests.utils.postgres import PostgresServer

TOPICS = ["astronomy", "baking", "coffee", "databases", "lighthouses", "medieval", "oceans"]


def _metadata(name: str) -> dict[str, Any]:
    """Metadata of every type for a sample document (`baking-03`), made up from its name."""
    topic, number = name.rsplit("-", 1)
    n = int(number)
    metadata: dict[str, Any] = {
        "topic": topic,
        "number": n,
        "published": f"20{10 + n:02d}-0{n}-15",
        "tags": [topic[0], "odd" if n % 2 else "even"],
        "review": {"stars": (n * 7 + len(topic)) % 5 + 1},
    }
    if n <= 3:
        metadata["featured"] = n == 1
    return metadata


DOCUMENTS = {
    path.stem: _metadata(path.stem)
    for path in sorted(SAMPLE_CORPUS.glob("*.md"))
    if path.stem.rsplit("-", 1)[0] in TOPICS
}


@pytest.fixture(scope="module")
def settings(
    tmp_path_factory: pytest.TempPathFactory,
    tiny_encoder_dir: Path,
    _postgres: PostgresServer | None,
) -> ServiceSettings:
    root = tmp_path_factory.mktemp("filters")
    corpus = root / "corpus.jsonl"
    with corpus.open("w") as out:
        for name, metadata in DOCUMENTS.items():
            text = (SAMPLE_CORPUS / f"{name}.md").read_text(encoding="utf-8")
            title, _, body = text.partition("\n")
            record = {"id": name, "title": title.lstrip("# "), "text": body, "metadata": metadata}
            out.write(json.dumps(record) + "\n")
    settings = ServiceSettings(
        data_dir=root / "data",
        # a database of its own: a module's fixture outlives the per-test database of the
        # test that first asks for it, and must not publish into the session's
        db=DatabaseSettings(url=_postgres.database() if _postgres is not None else None),
        jobs=JobSettings(embedded_worker=False),
    )
    publish(corpus, settings, tiny_encoder_dir)
    return settings


@pytest.fixture(scope="module")
def client(settings: ServiceSettings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


def _similar(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/similar", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _ranking(answer: dict[str, Any]) -> list[tuple[str, float]]:
    return [(r["document_id"], round(r["score"], 5)) for r in answer["results"]]


RECENT_BAKING_OR_COFFEE = {
    "and": [
        {"field": "topic", "in": ["baking", "coffee", "oceans"]},
        {"field": "published", "gte": "2012-01-01"},
        {"not": {"field": "tags", "eq": "even"}},
    ]
}


def _kept(name: str) -> bool:
    """`RECENT_BAKING_OR_COFFEE`, by hand."""
    m = DOCUMENTS[name]
    return m["topic"] in ("baking", "coffee", "oceans") and m["number"] >= 2 and m["number"] % 2


@pytest.mark.parametrize(
    "method", ["sdr", "sdr-window", "document", "maxsim", "bm25", "bm25-rm3", "fused", "hybrid"]
)
@pytest.mark.parametrize("source", ["posted", "stored"])
def test_a_filter_equals_the_unfiltered_ranking_taken_out_by_hand(
    client: TestClient, method: str, source: str
) -> None:
    query: dict[str, Any] = (
        {"document_id": "baking-02"}
        if source == "stored"
        else {"document": {"title": "Bread", "text": "Yeast and flour rise in a warm oven."}}
    )
    everything = _similar(client, **query, method=method, top_k=1000)
    filtered = _similar(client, **query, method=method, top_k=1000, filter=RECENT_BAKING_OR_COFFEE)
    expected = [(d, s) for d, s in _ranking(everything) if _kept(d)]
    assert expected, "the filter keeps some documents"
    if method in ("hybrid", "bm25-rm3", "fused"):
        # rank fusion and RM3's feedback documents are computed over the documents ranked:
        # the same documents, other scores
        assert sorted(d for d, _ in _ranking(filtered)) == sorted(d for d, _ in expected)
    else:
        assert _ranking(filtered) == expected
    assert filtered["scored_documents"] == len(expected)


def test_the_filtered_population_normalises_over_what_the_filter_keeps(
    settings: ServiceSettings,
) -> None:
    """`filter_population=filtered` ranks as a pool of the same documents does."""
    pool = [name for name in DOCUMENTS if _kept(name) and name != "baking-02"]
    search = SearchSettings(filter_population="filtered")
    with TestClient(create_app(settings.model_copy(update={"search": search}))) as client:
        for method in ("sdr", "document"):
            filtered = _similar(
                client, document_id="baking-02", method=method, filter=RECENT_BAKING_OR_COFFEE
            )
            pooled = _similar(client, document_id="baking-02", method=method, candidates=pool)
            assert _ranking(filtered) == _ranking(pooled)
        explained = client.get(
            "/explain", params={"source": filtered["query_id"], "target": pool[0]}
        )
        assert explained.status_code == 200, explained.text


def test_explain_after_a_filtered_query_uses_its_statistics(client: TestClient) -> None:
    answer = _similar(client, document_id="coffee-03", method="sdr", filter=RECENT_BAKING_OR_COFFEE)
    top = answer["results"][0]
    explained = client.get(
        "/explain", params={"source": answer["query_id"], "target": top["document_id"]}
    )
    assert explained.status_code == 200, explained.text
    assert explained.json()["score"] == pytest.approx(top["score"], abs=1e-4)


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"field": "review.stars", "gte": 4}, lambda m: m["review"]["stars"] >= 4),
        ({"field": "featured", "eq": False}, lambda m: m.get("featured") is False),
        ({"field": "featured", "exists": False}, lambda m: "featured" not in m),
        ({"field": "published", "lt": "2013-01-01"}, lambda m: m["number"] < 3),
    ],
)
def test_each_type_filters_as_its_values_say(client: TestClient, condition, expected) -> None:  # noqa: ANN001
    answer = _similar(
        client, document_id="oceans-01", method="document", top_k=1000, filter=condition
    )
    found = {r["document_id"] for r in answer["results"]}
    assert found == {n for n, m in DOCUMENTS.items() if expected(m) and n != "oceans-01"}


@pytest.mark.parametrize("granularity", ["section", "paragraph", "sentence"])
def test_units_are_filtered_before_they_are_ranked(client: TestClient, granularity: str) -> None:
    query = {"document_id": "coffee-02", "granularity": granularity}
    everything = _similar(client, **query, top_k=1000)
    filtered = _similar(client, **query, top_k=40, filter=RECENT_BAKING_OR_COFFEE)
    assert filtered["results"], "units are found within the filter"
    assert all(_kept(u["document_id"]) for u in filtered["results"])
    expected = [u for u in everything["results"] if _kept(u["document_id"])][:40]
    units = [(u["document_id"], u["start"], round(u["score"], 5)) for u in filtered["results"]]
    assert units == [(u["document_id"], u["start"], round(u["score"], 5)) for u in expected]


@pytest.mark.parametrize(("top_k", "group_size"), [(3, 1), (4, 2), (20, 3), (5, 100)])
def test_grouped_units_equal_the_ungrouped_list_post_processed(
    client: TestClient, top_k: int, group_size: int
) -> None:
    query = {"document_id": "lighthouses-02", "granularity": "paragraph"}
    everything = _similar(client, **query, top_k=1000)["results"]
    grouped = _similar(client, **query, top_k=top_k, group_by="document", group_size=group_size)
    expected, taken = [], {}
    for unit in everything:  # the first top_k documents, each with its best group_size units
        d = unit["document_id"]
        if taken.get(d, 0) >= group_size or (d not in taken and len(taken) >= top_k):
            continue
        taken[d] = taken.get(d, 0) + 1
        expected.append((d, unit["unit_id"], round(unit["score"], 5)))
    found = [(u["document_id"], u["unit_id"], round(u["score"], 5)) for u in grouped["results"]]
    assert found == expected
    assert len({d for d, _, _ in found}) == min(top_k, len(DOCUMENTS) - 1)


def test_a_filter_reaches_candidate_retrieval(client: TestClient) -> None:
    """Candidate mode searches the FAISS indices within the filter: a filter keeping one
    document far from the query still finds it (the collection's nearest units lie
    elsewhere)."""
    far = {"field": "topic", "eq": "databases"}
    answer = _similar(
        client,
        document={"title": "Bread", "text": "Yeast and flour rise in a warm oven."},
        method="sdr",
        mode="candidate",
        filter={"and": [far, {"field": "number", "eq": 4}]},
    )
    assert [r["document_id"] for r in answer["results"]] == ["databases-04"]
    assert answer["mode"] == "candidate"


@pytest.mark.parametrize(
    ("filter", "message"),
    [
        ({"field": "topik", "eq": "baking"}, "'topik' is in no document's metadata"),
        ({"field": "number", "eq": "4"}, "'number' holds number values"),
        ({"field": "topic", "gte": 2}, "'topic' holds keyword values: 'gte' takes a string"),
        ({"field": "featured", "lt": 1}, "'featured' holds boolean values; ranges"),
        ({"field": "published", "gte": "last year"}, "ISO 8601"),
        ({"field": "topic", "eq": "a", "in": ["b"]}, "takes one of"),
        ({"field": "topic", "like": "a"}, "Extra inputs are not permitted"),
        ({"and": []}, "non-empty list"),
        ({"field": "number", "eq": 10**400}, "finite number"),
    ],
)
def test_a_bad_filter_is_a_422_naming_what_is_wrong(
    client: TestClient, filter: dict[str, Any], message: str
) -> None:
    for granularity in ("document", "paragraph"):
        response = client.post(
            "/similar",
            json={"document_id": "baking-01", "granularity": granularity, "filter": filter},
        )
        assert response.status_code == 422, response.text
        assert message in response.text


def test_an_upload_takes_the_filter_as_json_text(client: TestClient) -> None:
    fields = {"filter": json.dumps({"field": "topic", "eq": "coffee"}), "method": "document"}
    files = {"file": ("q.txt", b"Espresso is brewed under pressure from finely ground beans.")}
    response = client.post("/similar", data=fields, files=files)
    assert response.status_code == 200, response.text
    assert {r["document_id"].split("-")[0] for r in response.json()["results"]} == {"coffee"}
    for text in ("{not json", "[" * 100_000):
        bad = client.post("/similar", data={"filter": text}, files=files)
        assert bad.status_code == 422 and "the filter is not JSON" in bad.text


def test_group_by_is_refused_for_whole_documents(client: TestClient) -> None:
    response = client.post("/similar", json={"document_id": "baking-01", "group_by": "document"})
    assert response.status_code == 422
    assert "group_by groups the units" in response.json()["detail"]


@pytest.mark.parametrize("method", ["sdr", "fused", "bm25", "maxsim", "hybrid"])
def test_a_filter_that_keeps_nothing_ranks_nothing(client: TestClient, method: str) -> None:
    """As a search engine answers a query that matches no document: 200 and no results,
    whether the filter keeps no document at all or only the query's own."""
    nothing = {"field": "topic", "eq": "no-such-topic"}
    only_itself = {"and": [{"field": "topic", "eq": "baking"}, {"field": "number", "eq": 1}]}
    for keeps in (nothing, only_itself):
        answer = _similar(client, document_id="baking-01", method=method, filter=keeps)
        assert answer["results"] == [] and answer["next_offset"] is None, answer
