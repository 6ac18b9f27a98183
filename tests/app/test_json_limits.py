"""Issue 68: JSON read within documented limits in one place (`app.api.json_reader`), and a
filter counted against its limits as it is read, before any model validates it.

Numbers past Python's 4,300 digits and nestings of hundreds were a 500 (and the connection
reset); a filter of 1,000 `in` lists of 1,000 values (7.9 MB) was refused only after seconds
of validation."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from docsim.app.api.json_reader import JsonBounds, JsonError, json_depth, read_json
from docsim.app.core.errors import LimitExceededError
from docsim.app.core.settings import ApiSettings
from docsim.app.main import create_app
from docsim.app.services.limits import check_filter_size
from tests.utils.live import live_server

BOUNDS = JsonBounds(max_depth=5, max_number_chars=40)
LONG_INT = "9" * 5_000  # past Python's own 4,300 digits
UPLOAD = {"file": ("q.txt", b"Espresso is brewed under pressure from finely ground beans.")}


def _nested_not(depth: int) -> str:
    return '{"not": ' * depth + '{"field": "source", "exists": true}' + "}" * depth


def _post_raw(client: TestClient, path: str, raw: str) -> httpx.Response:
    return client.post(path, content=raw, headers={"content-type": "application/json"})


def test_json_depth_counts_nested_arrays_and_objects() -> None:
    assert [json_depth(v) for v in (1, "x", [], {}, [[]], {"a": [1, {"b": 2}]})] == [
        0,
        0,
        1,
        1,
        2,
        3,
    ]
    assert json_depth(json.loads("[" * 300 + "]" * 300), stop_past=10) == 11


def test_read_json_refuses_past_its_bounds_naming_the_setting() -> None:
    assert read_json('{"a": [[[{"b": 1}]]]}', BOUNDS) == {"a": [[[{"b": 1}]]]}
    assert read_json("[" + "1" * 40 + ", -" + "2" * 39 + ", 1.5]", BOUNDS)[2] == 1.5
    for text, setting in (
        ('{"a": [[[[{"b": 1}]]]]}', "DOCSIM_API__MAX_JSON_DEPTH"),
        ("[" * 5_000 + "]" * 5_000, "DOCSIM_API__MAX_JSON_DEPTH"),  # past Python's recursion
        ("[" + "1" * 41 + "]", "DOCSIM_API__MAX_JSON_NUMBER_CHARS"),
        ("[0." + "1" * 40 + "]", "DOCSIM_API__MAX_JSON_NUMBER_CHARS"),
    ):
        with pytest.raises(JsonError, match=setting) as refused:
            read_json(text, BOUNDS)
        assert refused.value.limit
    past_python = JsonBounds(max_depth=5, max_number_chars=10_000)
    with pytest.raises(JsonError, match="too long to read") as refused:
        read_json(LONG_INT, past_python)
    with pytest.raises(JsonError, match="NaN or Infinity"):
        read_json("[NaN]", BOUNDS)
    with pytest.raises(JsonError) as refused:
        read_json('{"a": 1,', BOUNDS)
    assert not refused.value.limit and refused.value.position == 8


def test_a_number_past_its_limit_is_a_422_naming_it(client: TestClient) -> None:
    for path, raw in (
        ("/similar", f'{{"document_id": "coffee-01", "top_k": {LONG_INT}}}'),
        ("/similar", f'{{"document_id": "coffee-01", "top_k": {"9" * 1_001}}}'),
        ("/documents", f'{{"documents": [{{"id": "x", "text": "A b.", "metadata": {LONG_INT}}}]}}'),
        ("/jobs/reindex", f'{{"source": "current", "chunk_tokens": {LONG_INT}}}'),
        ("/collections", f'{{"name": "n", "settings": {{"x": {LONG_INT}}}}}'),
    ):
        response = _post_raw(client, path, raw)
        assert response.status_code == 422, (path, response.text[:500])
        assert "DOCSIM_API__MAX_JSON_NUMBER_CHARS" in response.json()["detail"][0]["msg"]


def test_json_nested_past_its_limit_is_a_422_naming_it(client: TestClient) -> None:
    """500 deep: under the parser's own limit, past the models' validators' recursion."""
    deep_list = "[" * 500 + "]" * 500
    for path, raw, message in (
        (
            "/similar",
            f'{{"document_id": "coffee-01", "filter": {_nested_not(500)}}}',
            "arrays and objects nest deeper than 100 levels (DOCSIM_API__MAX_JSON_DEPTH)",
        ),
        (
            "/documents",
            f'{{"documents": [{{"id": "x", "text": "A b.", "metadata": {{"m": {deep_list}}}}}]}}',
            "DOCSIM_API__MAX_JSON_DEPTH",
        ),
        # a JSON body's filter is an object: its JSON text is read from a form only
        (
            "/similar",
            json.dumps({"document_id": "coffee-01", "filter": _nested_not(500)}),
            "Input should be an object",
        ),
    ):
        response = _post_raw(client, path, raw)
        assert response.status_code == 422, (path, response.text[:500])
        assert message in response.json()["detail"][0]["msg"]


def test_an_uploads_filter_past_the_json_limits_is_a_422_naming_them(client: TestClient) -> None:
    for text, setting in (
        (_nested_not(500), "DOCSIM_API__MAX_JSON_DEPTH"),
        ('{"field": "n", "eq": ' + LONG_INT + "}", "DOCSIM_API__MAX_JSON_NUMBER_CHARS"),
    ):
        response = client.post("/similar", data={"filter": text}, files=UPLOAD)
        assert response.status_code == 422, response.text[:500]
        assert "the filter is not JSON" in response.text and setting in response.text


def test_the_json_limits_are_settings(fresh_settings) -> None:
    settings = fresh_settings(embedded_worker=False, max_json_depth=8, max_json_number_chars=32)
    with TestClient(create_app(settings)) as client:
        eight = '{"document_id": "coffee-01", "filter": ' + _nested_not(6) + "}"
        assert _post_raw(client, "/similar", eight).status_code == 200
        nine = '{"document_id": "coffee-01", "filter": ' + _nested_not(7) + "}"
        refused = _post_raw(client, "/similar", nine)
        assert refused.status_code == 422 and "deeper than 8 levels" in refused.text
        number = '{"document_id": "coffee-01", "top_k": %s}'
        read = _post_raw(client, "/similar", number % ("1" * 32))  # read, then over its limit
        assert read.status_code == 422 and "DOCSIM_API__MAX_TOP_K" in read.text
        refused = _post_raw(client, "/similar", number % ("1" * 33))
        assert refused.status_code == 422 and "33 characters; the limit is 32" in refused.text


def test_a_server_answers_the_next_request_on_the_connection(fresh_settings) -> None:
    """Against a running server: each was a 500, and the connection was reset after it."""
    with (
        live_server(fresh_settings(embedded_worker=False)) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        for _ in range(2):
            number = http.post(
                "/similar",
                content=f'{{"document_id": "coffee-01", "top_k": {LONG_INT}}}',
                headers={"content-type": "application/json"},
            )
            assert number.status_code == 422, number.text[:500]
            nested = http.post("/similar", data={"filter": _nested_not(500)}, files=UPLOAD)
            assert nested.status_code == 422, nested.text[:500]
            assert http.get("/health").status_code == 200


def _wide_filter(lists: int, values: int, **extra: Any) -> dict[str, Any]:
    clause = {"field": "topic", "in": [f"v{i}" for i in range(values)], **extra}
    return {"and": [clause] * lists}


def test_check_filter_size_stops_at_the_first_count_past_its_limit() -> None:
    limits = ApiSettings(max_filter_clauses=1_024, max_filter_values=65_536)
    with pytest.raises(LimitExceededError, match=r"values is 66,000 or more.*MAX_FILTER_VALUES"):
        check_filter_size(_wide_filter(1_000, 1_000), limits)
    with pytest.raises(LimitExceededError, match=r"clauses is 1,025 or more.*MAX_FILTER_CLAUSES"):
        check_filter_size(_wide_filter(5_000, 1), limits)
    # what is not shaped like a filter counts, and is left to validation
    with pytest.raises(LimitExceededError, match="clauses is 1,025 or more"):
        check_filter_size({"or": [1] * 2_000}, limits)
    for fine in (_wide_filter(1_000, 65), None, [], "x", {"not": {"not": 3}}, {"and": 5}):
        check_filter_size(fine, limits)


def test_a_filter_past_its_limits_is_refused_before_it_is_validated(client: TestClient) -> None:
    """Each clause holds a field no filter has: validated first, the answer would name it;
    counted first, the answer names the limit (and costs no validation of 1,000,000 values)."""
    too_wide = _wide_filter(1_000, 1_000, like="x")
    response = client.post("/similar", json={"document_id": "coffee-01", "filter": too_wide})
    assert response.status_code == 422, response.text[:500]
    assert "DOCSIM_API__MAX_FILTER_VALUES" in response.json()["detail"]
    wide = {"and": [{"field": "topic", "in": [0] * 1_000, "like": "x"}] * 70}  # under 1 MiB
    upload = client.post("/similar", data={"filter": json.dumps(wide)}, files=UPLOAD)
    assert upload.status_code == 422, upload.text[:500]
    assert "DOCSIM_API__MAX_FILTER_VALUES" in upload.json()["detail"]
    too_many = _wide_filter(2_000, 1, like="x")
    response = client.post("/similar", json={"document_id": "coffee-01", "filter": too_many})
    assert response.status_code == 422 and "DOCSIM_API__MAX_FILTER_CLAUSES" in response.text
