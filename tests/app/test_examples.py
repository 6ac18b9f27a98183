"""`like` and `unlike` on POST /similar, tested by construction: one `like` is the query
itself, several score the mean of their scores, `unlike` subtracts, and units are the
nearest to any `like`."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

POSTED = {"title": "Bread", "text": "Yeast ferments the dough.\n\nThe oven sets the crumb."}
# a pool without the examples: every query ranks the same documents
POOL = [f"{topic}-0{n}" for topic in ("baking", "coffee", "oceans", "running") for n in (2, 3, 4)]
METHODS = ["sdr", "sdr-window", "document", "maxsim", "bm25", "bm25-rm3", "fused", "hybrid"]


def _similar(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/similar", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _scores(answer: dict[str, Any]) -> dict[str, float]:
    return {r["document_id"]: r["score"] for r in answer["results"]}


def test_one_like_is_the_query_itself(client: TestClient) -> None:
    for source in ({"document_id": "baking-01"}, {"document": POSTED}):
        plain = _similar(client, **source, top_k=20)
        liked = _similar(client, like=[source], top_k=20)
        for answer in (plain, liked):
            answer.pop("query_id"), answer.pop("took_ms")
        assert liked == plain


@pytest.mark.parametrize("method", METHODS)
def test_several_likes_score_the_mean_and_unlike_subtracts(client: TestClient, method: str) -> None:
    examples = [{"document_id": "baking-01"}, {"document": POSTED}]
    against = {"document_id": "coffee-01"}
    body = {"method": method, "candidates": POOL, "top_k": 100, "mode": "exhaustive"}
    alone = [_scores(_similar(client, **e, **body)) for e in (*examples, against)]
    liked = _scores(_similar(client, like=examples, **body))
    mixed = _similar(client, like=examples, unlike=[against], **body)
    assert set(liked) == set(POOL)
    for d in POOL:
        assert liked[d] == pytest.approx((alone[0][d] + alone[1][d]) / 2, abs=1e-5), d
        expected = (alone[0][d] + alone[1][d]) / 2 - alone[2][d]
        assert _scores(mixed)[d] == pytest.approx(expected, abs=1e-5), d
    ranked = [r["score"] for r in mixed["results"]]
    assert ranked == sorted(ranked, reverse=True)
    assert mixed["scored_documents"] == len(POOL)


def test_indexed_examples_are_left_out_of_the_ranking(client: TestClient) -> None:
    examples = [{"document_id": "baking-01"}, {"document_id": "baking-02"}]
    answer = _similar(client, like=examples, unlike=[{"document_id": "coffee-01"}], top_k=1000)
    found = {r["document_id"] for r in answer["results"]}
    assert not found & {"baking-01", "baking-02", "coffee-01"}
    assert answer["scored_documents"] == 45


def test_units_are_the_nearest_to_any_like(client: TestClient) -> None:
    examples = [{"document_id": "oceans-01"}, {"document_id": "baking-01"}]
    body = {"granularity": "paragraph", "top_k": 1000}
    sources = {"oceans-01", "baking-01"}
    best: dict[int, float] = {}
    for example in examples:
        for unit in _similar(client, **example, **body)["results"]:
            if unit["document_id"] not in sources:
                best[unit["unit_id"]] = max(best.get(unit["unit_id"], -2.0), unit["score"])
    units = _similar(client, like=examples, **body)["results"]
    assert {u["unit_id"]: u["score"] for u in units} == pytest.approx(best, abs=1e-6)


def test_several_likes_in_candidate_mode_explain_every_hit(client: TestClient) -> None:
    """A hit retrieved only through the second example still gets its paragraph pairs with
    the first."""
    examples = [{"document_id": "baking-01"}, {"document_id": "astronomy-03"}]
    for method in ("sdr", "hybrid"):
        answer = _similar(client, like=examples, method=method, mode="candidate", top_k=30)
        assert answer["results"] and all(r["matches"] for r in answer["results"])


def test_an_indexed_like_after_a_posted_one_is_left_out_of_units(client: TestClient) -> None:
    examples = [{"document": POSTED}, {"document_id": "oceans-01"}]
    units = _similar(client, like=examples, granularity="paragraph", top_k=50)["results"]
    assert units and all(u["document_id"] != "oceans-01" for u in units)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"like": []}, 422, "at least 1 item"),
        ({"like": [{"document_id": "baking-01"}], "document_id": "baking-02"}, 422, "exactly one"),
        ({"like": [{"document_id": "baking-01", "document": POSTED}]}, 422, "one of"),
        ({"like": [{"document_id": "nope"}]}, 404, "'nope'"),
        (
            {"document_id": "baking-01", "unlike": [{"document_id": "coffee-01"}],
             "granularity": "paragraph"},
            422,
            "`unlike` applies to whole documents",
        ),
        ({"unlike": [{"document_id": "coffee-01"}]}, 422, "exactly one"),
    ],
)  # fmt: skip
def test_bad_examples_are_refused_saying_why(
    client: TestClient, body: dict[str, Any], status: int, message: str
) -> None:
    response = client.post("/similar", json=body)
    assert response.status_code == status, response.text
    assert message in response.text
