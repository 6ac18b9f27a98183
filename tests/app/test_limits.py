"""Every input bounded by a documented setting, checked before the work starts: request bodies
in bytes (refused before they are read whole, over a real connection), and what a search asks
for (filter clauses and values, examples, `top_k`, `offset`, candidates), each refusal naming
its setting."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from docsim.app.main import create_app
from docsim.app.services.limits import filter_size
from tests.utils.live import live_server

LIMIT = 1 << 20
CHUNK = 1 << 16


def test_a_body_over_its_limit_is_refused_before_it_is_read_whole(fresh_settings) -> None:
    """A 64 MiB chunked body (no Content-Length) was once read whole before its 413."""
    pulled = 0

    def body() -> Iterator[bytes]:
        nonlocal pulled
        for _ in range(64 * 2**20 // CHUNK):
            pulled += CHUNK
            yield b" " * CHUNK

    with live_server(fresh_settings(max_body_bytes=LIMIT)) as url:
        declared = httpx.post(f"{url}/similar", content=b" " * (LIMIT + 1), timeout=60)
        assert declared.status_code == 413
        assert "DOCSIM_API__MAX_BODY_BYTES" in declared.json()["detail"]
        try:
            chunked = httpx.post(
                f"{url}/similar",
                content=body(),
                headers={"content-type": "application/json"},
                timeout=60,
            )
            assert chunked.status_code == 413, chunked.text
            assert "DOCSIM_API__MAX_BODY_BYTES" in chunked.json()["detail"]
        except httpx.TransportError:
            pass  # the server answered and closed while the client still sent: also refused
        assert pulled < 16 * 2**20  # the limit and what the sockets buffer, not 64 MiB
        ordinary = {"document": {"text": "Coffee beans roast. Water boils."}, "top_k": 2}
        assert httpx.post(f"{url}/similar", json=ordinary, timeout=60).status_code == 200


def _and_of_in_lists(clauses: int, values: int) -> dict[str, Any]:
    return {"and": [{"field": "topic", "in": [f"v{i}" for i in range(values)]}] * clauses}


@pytest.mark.parametrize(
    "options, setting",
    [
        ({"top_k": 1_001}, "DOCSIM_API__MAX_TOP_K"),
        ({"offset": 9_001}, "DOCSIM_API__MAX_OFFSET"),
        ({"filter": _and_of_in_lists(1_024, 1)}, "DOCSIM_API__MAX_FILTER_CLAUSES"),
        ({"filter": _and_of_in_lists(2, 40_000)}, "DOCSIM_API__MAX_FILTER_VALUES"),
        ({"candidates": [f"d{i}" for i in range(100_001)]}, "DOCSIM_API__MAX_CANDIDATES"),
    ],
    ids=["top_k", "offset", "clauses", "values", "candidates"],
)
def test_a_search_over_a_limit_is_422_naming_the_setting(
    client: TestClient, options: dict[str, Any], setting: str
) -> None:
    answer = client.post("/similar", json={"document_id": "coffee-01", **options})

    assert answer.status_code == 422, answer.text
    assert setting in json.dumps(answer.json())


def test_examples_over_the_limit_are_422(client: TestClient) -> None:
    like = [{"document_id": "coffee-01"}] * 11
    answer = client.post("/similar", json={"like": like})
    assert answer.status_code == 422 and "DOCSIM_API__MAX_EXAMPLES" in answer.text
    answer = client.post("/similar", json={"like": like[:1], "unlike": like})
    assert answer.status_code == 422 and "DOCSIM_API__MAX_EXAMPLES" in answer.text


def test_limits_are_settings_not_constants(fresh_settings) -> None:
    settings = fresh_settings(max_top_k=12, max_filter_values=3)
    with TestClient(create_app(settings)) as client:
        assert client.post("/similar", json={"document_id": "coffee-01", "top_k": 12}).is_success
        assert (
            client.post("/similar", json={"document_id": "coffee-01", "top_k": 13}).status_code
            == 422
        )
        wide = {"field": "topic", "in": ["a", "b", "c", "d"]}
        answer = client.post("/similar", json={"document_id": "coffee-01", "filter": wide})
        assert answer.status_code == 422 and "the filter's values is 4" in answer.text


def test_filter_size_counts_every_node_and_value() -> None:
    data = {
        "or": [
            {"field": "a", "in": [1, 2, 3]},
            {"not": {"and": [{"field": "b", "eq": 1}, {"field": "c", "in": ["x"]}]}},
        ]
    }
    assert filter_size(data) == (6, 4)


def test_a_document_of_too_many_sentence_marks_is_refused_before_it_is_split(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 KB of `x. ` cost Punkt seconds (2 MB: 19 s) before any limit was checked."""
    from docsim.app.services import limits

    split = []
    monkeypatch.setattr(limits, "split_document", lambda *a: split.append(1))
    text = "x. " * 100_001
    for body in ({"document": {"text": text}}, {"documents": [{"id": "x", "text": text}]}):
        route = "/similar" if "document" in body else "/documents"
        answer = client.post(route, json=body)
        assert answer.status_code == 413, answer.text
        assert "DOCSIM_API__MAX_SENTENCE_MARKS" in answer.json()["detail"]
    assert split == []
