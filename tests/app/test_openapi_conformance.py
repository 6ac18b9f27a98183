"""The OpenAPI description and the answers agree: schemathesis runs every check it has (the
CLI's `--checks all`: status codes, response schemas and headers, valid data accepted and
invalid data refused, `Allow` on 405, the links between operations, ...) over every operation,
in all its phases, in-process against the app. The server has a key of its own and a
collection with a write and a read key; every request carries the server's key (what it
opens), or none (refusals).

What the data decides and no schema can say (a metadata field's type, the fields a filter
may name, a file docsim can read) the generated valid cases are given by
`tests.utils.openapi_fuzz`, as the CLI is with `SCHEMATHESIS_HOOKS` (docs/http-api.md)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events, from_schema

from docsim.app.main import create_app
from tests.utils.openapi_fuzz import register, seed_metadata

SERVER_KEY = "conformance-server-key-0123456789"
COLLECTION_KEYS = {
    "write_key": "conformance-write-key-0123",
    "read_key": "conformance-read-key-0123",
}
# a few cases per operation beyond the coverage phase's own: about 2,500 cases in all
CONFIG = """
seed = 68
request-timeout = 60
[checks]
enabled = true
[generation]
max-examples = 5
"""


def test_every_refusal_is_described_in_one_shape(app: FastAPI) -> None:
    spec = app.openapi()
    shapes = {"#/components/schemas/ErrorAnswer", "#/components/schemas/InvalidAnswer"}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            refusals = {code: r for code, r in operation["responses"].items() if code >= "400"}
            assert "422" in refusals, (method, path)  # a control character in the URL
            for code, response in refusals.items():
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref in shapes and (ref.endswith("InvalidAnswer") == (code == "422"))
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def test_a_405_allows_the_methods_described(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()["paths"]
    for path, template in (
        ("/documents/some-id", "/documents/{document_id}"),
        ("/collections/default/documents/a/b", "/collections/{collection}/documents/{document_id}"),
        ("/jobs/reindex", "/jobs/reindex"),  # not the job `reindex` of /jobs/{job_id}
        ("/collections/default", "/collections/{collection}"),
    ):
        answer = client.request("PATCH", path)
        assert answer.status_code == 405, path
        assert answer.headers["allow"] == ", ".join(sorted(m.upper() for m in spec[template]))


@pytest.mark.parametrize(
    ("body", "valid"),
    [
        ({}, False),  # no query document
        ({"document_id": "coffee-01", "like": [{"document_id": "tea-01"}]}, False),
        (
            {"document": {"text": "Beans."}, "granularity": "document", "group_by": "document"},
            False,
        ),
        ({"document_id": "coffee-01", "group_by": "document", "offset": 2}, False),
        ({"document": {"title": "No text"}}, False),
        ({"document": {"text": "...", "metadata": {"a": "b"}}}, False),  # no sentence
        ({"document_id": "coffee-01", "filter": {"field": "year"}}, False),
        ({"document_id": "coffee-01", "filter": {"field": "y", "gt": 1, "gte": 2}}, False),
        ({"document_id": "coffee-01", "top_k": 3}, True),
        ({"document": {"sections": [{"text": "Beans are roasted."}]}}, True),
    ],
)
def test_the_schema_refuses_what_the_service_refuses(
    client: TestClient, body: dict[str, Any], valid: bool
) -> None:
    """`{}` was valid by the description and refused by the service, and so were others."""
    spec = client.get("/openapi.json").json()
    schema = {"$ref": "#/components/schemas/SimilarRequest", "components": spec["components"]}
    # jsonschema_rs, as schemathesis: its patterns are ECMA-262's (`\p{L}`), not Python's
    assert jsonschema_rs.Draft202012Validator(schema).is_valid(body) is valid
    answer = client.post("/similar", json=body)
    assert (answer.status_code == 200) is valid, answer.text
    assert valid or answer.status_code == 422


@pytest.mark.long
@pytest.mark.heavy_sql
@pytest.mark.parametrize(
    "with_key",
    [
        pytest.param(True, id="with-the-key"),
        # refusals only (401): the keyed run meets them too; `make test-slow` runs it
        pytest.param(False, id="without", marks=pytest.mark.slow),
    ],
)
def test_every_answer_is_as_the_description_says(
    fresh_settings, tiny_encoder_dir: Path, with_key: bool
) -> None:
    app = create_app(fresh_settings(embedded_worker=False, api_key=SERVER_KEY))
    key = {"X-API-Key": SERVER_KEY}
    with TestClient(app) as client:
        body = {"name": "keyed", "encoder": str(tiny_encoder_dir), **COLLECTION_KEYS}
        assert client.post("/collections", json=body, headers=key).status_code == 201
        seed_metadata(client.post, headers=key)
        failures, statuses = _run(app, key if with_key else {})
    assert failures == [], "\n".join(failures)
    assert sum(statuses.values()) > 1000, statuses
    # the key opens what it should, and its absence is refused
    assert statuses[200, "POST /documents"] if with_key else statuses[401, "POST /documents"]


def _run(app: FastAPI, headers: dict[str, str]) -> tuple[list[str], Counter[tuple[int, str]]]:
    """Every check over every operation; the failures found, and the answers' statuses by
    operation."""
    schema = schemathesis.openapi.from_asgi(
        "/openapi.json", app, config=SchemathesisConfig.from_str(CONFIG)
    )
    schema.config.headers = headers
    register(schema)
    failures: list[str] = []
    statuses: Counter[tuple[int, str]] = Counter()
    for event in from_schema(schema).execute():
        if isinstance(event, events.NonFatalError | events.FatalError):
            error = event.value if isinstance(event, events.NonFatalError) else event.exception
            failures.append(f"error: {getattr(event, 'label', '')}: {error!r}")
        recorder = getattr(event, "recorder", None)
        if recorder is None:
            continue
        for case_id, checks in recorder.checks.items():
            case = recorder.cases[case_id].value
            answer = recorder.interactions.get(case_id)
            status = answer.response.status_code if answer and answer.response else 0
            statuses[status, f"{case.method} {case.operation.path}"] += 1
            for check in checks:
                if check.status == Status.FAILURE and check.failure_info is not None:
                    failure = check.failure_info.failure
                    said = answer.response.content[:600] if answer and answer.response else b""
                    failures.append(
                        f"{check.name}: {case.method} {case.formatted_path} {status}: "
                        f"{failure.title}: {failure.message}\n  sent: {str(case.body)[:600]}"
                        f"\n  answered: {said!r}"
                    )
    return failures, statuses
