"""No input may produce a 500: requests generated from the OpenAPI spec (schemathesis)."""

from __future__ import annotations

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings

from docsim.app.main import create_app


@pytest.mark.slow  # `make test` has the same check over every operation (the conformance test)
def test_no_input_gives_a_server_error(fresh_settings) -> None:
    """On its own index (the fuzzer may queue jobs and change documents)."""
    app = create_app(fresh_settings(embedded_worker=False))
    with TestClient(app):
        _fuzz(app)


@pytest.mark.slow
@pytest.mark.parametrize("with_key", [True, False], ids=["with-the-key", "without"])
def test_no_input_gives_a_server_error_on_a_keyed_server(fresh_settings, with_key: bool) -> None:
    """Every route again, on a server with a key of its own: every request carrying it (so
    that the fuzzer reaches what the key opens), or none (refusals: 401, never 5xx)."""
    app = create_app(fresh_settings(embedded_worker=False, api_key=FUZZ_KEY))
    with TestClient(app):
        cases = _fuzz(app, {"X-API-Key": FUZZ_KEY} if with_key else {})
    print(f"{cases} cases {'with' if with_key else 'without'} the key: no 5xx")


FUZZ_KEY = "fuzz-server-key-0123456789"


def _fuzz(app, headers: dict[str, str] | None = None) -> int:  # noqa: ANN001
    """Fuzz every operation; the number of cases run."""
    cases = 0
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {f"{op.method.upper()} {op.path}" for op in operations} >= {
        "POST /similar",
        "GET /ready",
        "POST /collections",
        "DELETE /collections/{collection}",
        "POST /collections/{collection}/similar",
        "POST /collections/{collection}/documents",
    }
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
        def check(case) -> None:
            nonlocal cases
            cases += 1
            response = case.call(headers=headers or None)
            assert response.status_code < 500, (case.body, response.text)
            if response.status_code >= 400:
                assert "detail" in response.json()

        check()
    return cases


def test_document_changes_link_to_the_documents_they_name(client: TestClient) -> None:
    """OpenAPI links lead from POST and DELETE /documents to the named document (read, delete,
    post again), for clients and stateful fuzzers; the targets are real operations."""
    spec = client.get("/openapi.json").json()
    operations = {op["operationId"] for path in spec["paths"].values() for op in path.values()}
    for path, method, source in (
        ("/documents", "post", "added"),
        ("/documents/{document_id}", "delete", "deleted"),
    ):
        links = spec["paths"][path][method]["responses"]["200"]["links"]
        assert {link["operationId"] for link in links.values()} <= operations
        assert links["DeleteDocument"]["parameters"] == {
            "document_id": f"$response.body#/{source}/0"
        }


def test_every_collection_route_is_mounted_twice_with_its_own_operation_ids(
    client: TestClient,
) -> None:
    """The routers are written once and mounted at the root and under
    `/collections/{collection}` (FastAPI's prefix): every operation id is unique, a scoped
    operation is named after its root one, and its links stay in the collection."""
    spec = client.get("/openapi.json").json()
    ids = [op["operationId"] for path in spec["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))
    prefix = "/collections/{collection}"
    scoped = 0
    for path, operations in spec["paths"].items():
        root = (
            spec["paths"].get(path.removeprefix(prefix)) if path.startswith(prefix + "/") else None
        )
        for method, operation in operations.items() if root else ():
            scoped += 1
            assert operation["operationId"] == root[method]["operationId"] + "_in_collection"
            for link in operation["responses"].get("200", {}).get("links", {}).values():
                assert link["operationId"].endswith("_in_collection")
                assert link["parameters"]["collection"] == "$request.path.collection"
    assert scoped >= 10
    root_links = spec["paths"]["/documents"]["post"]["responses"]["200"]["links"]
    assert all("collection" not in link.get("parameters", {}) for link in root_links.values())
