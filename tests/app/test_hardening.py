"""One regression test per defect of issue 26's review: bad input, the writer path, security
headers, confined encoder paths, jobs behind the key."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from docsim.app.core.errors import UnreadableFileError
from docsim.app.main import create_app, served_runtime, served_state
from docsim.app.schemas.jobs import without_server_paths
from docsim.app.services.uploads import UploadedFile, read_upload
from docsim.indexer.store.data_lock import hold_data_dir
from docsim.indexer.text.readers.registry import FileLimits

DOC = {"id": "hardening-01", "title": "Tides", "text": "The tide turns. The moon pulls the sea."}


@pytest.fixture()
def client(fresh_settings) -> Iterator[TestClient]:
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        yield client


def _post_raw(client: TestClient, path: str, raw: str) -> object:
    return client.post(path, content=raw, headers={"content-type": "application/json"})


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_a_422_not_a_500(client: TestClient, constant: str) -> None:
    for path, raw in (
        ("/similar", f'{{"document_id": "coffee-01", "top_k": {constant}}}'),
        (
            "/documents",
            f'{{"documents": [{{"id": "x", "text": "A b.", "metadata": {{"n": {constant}}}}}]}}',
        ),
        ("/jobs/reindex", f'{{"source": "current", "chunk_tokens": {constant}}}'),
    ):
        response = _post_raw(client, path, raw)
        assert response.status_code == 422, (path, response.text)
        assert "NaN or Infinity" in response.text


def test_a_lone_surrogate_is_a_422_not_a_500(client: TestClient) -> None:
    for path, raw in (
        ("/similar", '{"document": {"text": "broken \\ud800 text"}}'),
        ("/documents", '{"documents": [{"id": "x\\udfff", "text": "A b."}]}'),
        ("/similar", '{"document": {"text": "A b."}, "\\ud800": 1}'),
    ):
        response = _post_raw(client, path, raw)
        assert response.status_code == 422, (path, response.text)
        response.json()  # valid JSON, whatever the input echoed


def test_deeply_nested_json_is_a_422_not_a_500(client: TestClient) -> None:
    nested_filter = '{"not": ' * 5000 + '{"field": "source", "exists": true}' + "}" * 5000
    for path, raw in (
        ("/similar", '{"document_id": "coffee-01", "candidates": ' + "[" * 100_000 + "]"),
        ("/documents", '{"documents": [{"id": "x", "text": "A b.", "metadata": ' + "[" * 100_000),
        ("/similar", '{"document_id": "coffee-01", "filter": ' + nested_filter + "}"),
        ("/similar", '{"document_id": "coffee-01", "filter": ' + nested_filter[-400:]),
    ):
        response = _post_raw(client, path, raw)
        assert response.status_code == 422, (path, response.text[:500])
        response.json()
    forty = '{"not": ' * 40 + '{"field": "source", "exists": true}' + "}" * 40
    response = _post_raw(
        client, "/similar", '{"document_id": "coffee-01", "filter": ' + forty + "}"
    )
    assert response.status_code == 422 and "nests at most 32" in response.text


def test_json_bodies_refuse_unknown_fields_and_loose_types(client: TestClient) -> None:
    for body, field in (
        ({"document_id": "coffee-01", "topk": 1}, "topk"),
        ({"document_id": "coffee-01", "top_k": True}, "top_k"),
        ({"document_id": "coffee-01", "top_k": 1.0}, "top_k"),
        ({"document_id": "coffee-01", "top_k": "3"}, "top_k"),
        ({"document_id": "coffee-01", "normalize": "yes"}, "normalize"),
        ({"document": {"text": "A b.", "tilte": "typo"}}, "tilte"),
    ):
        response = client.post("/similar", json=body)
        assert response.status_code == 422, (body, response.text)
        assert field in json.dumps(response.json()["detail"]), response.text
    documents = client.post("/documents", json={"documents": [DOC], "upsert": True})
    assert documents.status_code == 422 and "upsert" in documents.text
    ok = client.post("/similar", json={"document_id": "coffee-01", "top_k": 3, "method": "bm25"})
    assert ok.status_code == 200 and len(ok.json()["results"]) == 3
    # form fields are text by nature: a multipart body still takes "3"
    form = client.post(
        "/similar", files={"file": ("q.txt", b"Coffee beans. Roasting.")}, data={"top_k": "3"}
    )
    assert form.status_code == 200 and len(form.json()["results"]) == 3


@pytest.mark.parametrize("bad", ["new\nline", "tab\there", "esc\x1bape", "del\x7f", "c1\x85"])
def test_ids_with_control_characters_are_refused(client: TestClient, bad: str) -> None:
    response = client.post("/documents", json={"documents": [{**DOC, "id": bad}]})
    assert response.status_code == 422 and "control characters" in response.text
    upload = client.post(
        "/documents", files={"file": ("tides.txt", b"A tide. A moon.")}, data={"id": bad}
    )
    assert upload.status_code == 422 and "control characters" in upload.text
    with pytest.raises(UnreadableFileError, match="control characters"):  # from a file name
        read_upload(UploadedFile(f"x{bad}y.txt", b"A tide. A moon."), FileLimits())
    by_id = client.post("/similar", json={"document_id": bad})
    assert by_id.status_code == 422
    assert client.get("/ready").json()["documents"] == 48


def test_two_changes_at_once_both_succeed(client: TestClient) -> None:
    """Before: both ran `prepare_data_dir` on one probe file and took the build lock without
    waiting: one answered 500 or 409 "another build is running"."""
    answers: list[int] = []
    barrier = threading.Barrier(4)

    def post(i: int) -> None:
        barrier.wait()
        body = {"documents": [{**DOC, "id": f"together-{i}"}]}
        answers.append(client.post("/documents", json=body).status_code)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [200] * 4
    assert client.get("/ready").json()["documents"] == 52


def test_a_change_behind_a_long_one_is_a_429_that_names_no_build(fresh_settings) -> None:
    settings = fresh_settings(embedded_worker=False, change_wait_seconds=0.2)
    with TestClient(create_app(settings)) as client:
        indexes = served_runtime(client.app).indexes_dir
        with hold_data_dir(indexes, "change", 0):  # another change, holding on
            queued = client.post("/documents", json={"documents": [DOC]})
        assert queued.status_code == 429, queued.text
        assert "build" not in queued.json()["detail"] and queued.headers["retry-after"]
        with hold_data_dir(indexes, "build", 0):
            building = client.post("/documents", json={"documents": [DOC]})
        assert building.status_code == 409 and "build is running" in building.json()["detail"]
        assert int(building.headers["retry-after"]) > 0
        assert str(indexes) not in building.text  # no server path
        assert client.post("/documents", json={"documents": [DOC]}).status_code == 200


def test_responses_carry_security_headers_and_pages_a_csp(client: TestClient) -> None:
    for response in (client.get("/ready"), client.get("/"), client.post("/similar", json={})):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
    page = client.get("/")
    explained = client.get(
        "/explain", params={"source": "coffee-01", "target": "coffee-02", "format": "html"}
    )
    assert explained.status_code == 200
    for response in (page, explained):
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
        assert (
            "'sha256-" in policy
            and "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
        )


def test_encoder_paths_are_confined_like_sources(
    fresh_settings, tmp_path: Path, tiny_encoder_dir: Path
) -> None:
    settings = fresh_settings(embedded_worker=False)
    link = tmp_path / "etc-link"
    link.symlink_to("/etc")
    with TestClient(create_app(settings)) as client:
        for encoder, status in (
            ("/etc", 403),
            ("../../../etc", 403),
            (str(tmp_path / ".." / ".." / "etc"), 403),
            (str(link), 403),
            (str(tmp_path / "no-such-model"), 422),
            (str(tiny_encoder_dir), 202),
            ("minilm", 202),
        ):
            response = client.post("/jobs/reindex", json={"source": "current", "encoder": encoder})
            assert response.status_code == status, (encoder, response.text)
            if status == 403:
                assert "/etc" not in response.json()["detail"].replace(encoder, "")


def test_jobs_need_the_key_and_show_no_server_paths(fresh_settings) -> None:
    with TestClient(create_app(fresh_settings(embedded_worker=False, api_key="k"))) as client:
        key = {"X-API-Key": "k"}
        job = client.post("/jobs/reindex", json={"source": "current"}, headers=key).json()
        assert client.get("/jobs").status_code == 401
        assert client.get(f"/jobs/{job['job_id']}").status_code == 401
        assert client.get("/jobs", headers=key).status_code == 200
        assert client.get(f"/jobs/{job['job_id']}", headers=key).status_code == 200
    assert (
        without_server_paths(
            "cannot read '/srv/docsim/data/indexes/v3/sentence.npy': no such file; see /var/log/x"
        )
        == "cannot read '<path>': no such file; see <path>"
    )
    assert without_server_paths("3/4 blocks done") == "3/4 blocks done"


def test_a_server_file_gone_missing_is_a_503_naming_no_server_path(tmp_path: Path) -> None:
    """A file of the server's own that is missing is the server's fault (503 with a retry
    hint), not the client's bad input; the answer names the file, never where it lives."""
    from fastapi import FastAPI

    from docsim.app.core.errors import register_error_handlers

    gone = tmp_path / "secret-root" / "sentence.f16.npy"
    app = FastAPI()
    register_error_handlers(app)

    @app.get("/read")
    def read() -> str:
        return gone.read_text()  # the operating system's own FileNotFoundError

    response = TestClient(app).get("/read")
    assert response.status_code == 503, response.text
    detail = response.json()["detail"]
    assert "sentence.f16.npy" in detail and "secret-root" not in detail
    assert response.headers["Retry-After"]


def test_a_query_without_a_document_is_a_query_error(client: TestClient) -> None:
    """What the request schema guarantees is still checked, as an error, not an assert: an
    upload's options without the file, or a body naming no document."""
    from docsim.app.schemas.similar import SimilarUpload
    from docsim.app.services.similar import build_query
    from docsim.protocol.requests import SimilarRequest
    from docsim.search.errors import QueryError

    state, settings = served_state(client.app), served_runtime(client.app).settings
    for options in (
        SimilarUpload.model_construct(top_k=3),
        SimilarRequest.model_construct(document=None, document_id=None),
    ):
        with pytest.raises(QueryError, match="a query needs a `document`"):
            build_query(state, options, settings)
