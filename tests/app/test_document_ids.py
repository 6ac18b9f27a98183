"""Document ids with slashes (DOIs, path-like ids) reach every endpoint that takes an id, and
documents posted to the API meet the same limits as documents posted to /similar."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from docsim.app.main import create_app

SLASHED = {
    "10.1000/xyz-1": "Zeppelins rose above the lake. Their hulls held hydrogen cells.",
    "a/b/c": "Glaciers carve valleys over thousands of years. Moraines mark where ice stopped.",
}


@pytest.fixture()
def client(fresh_settings) -> Iterator[TestClient]:
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        yield client


def post(client: TestClient) -> None:
    documents = [{"id": i, "title": i, "text": text} for i, text in SLASHED.items()]
    response = client.post("/documents", json={"documents": documents})
    assert response.status_code == 200, response.text
    assert sorted(response.json()["added"]) == sorted(SLASHED)


@pytest.mark.parametrize("encode", [False, True], ids=["raw", "percent-encoded"])
def test_slashed_ids_reach_every_endpoint(client: TestClient, encode: bool) -> None:
    post(client)
    for document_id, text in SLASHED.items():
        path = "/documents/" + (quote(document_id, safe="") if encode else document_id)
        shown = client.get(path)
        assert shown.status_code == 200, (path, shown.text)
        assert shown.json()["id"] == document_id and shown.json()["text"] == text

        similar = client.post("/similar", json={"document_id": document_id, "top_k": 100})
        assert similar.status_code == 200, similar.text
        other = next(i for i in SLASHED if i != document_id)
        assert other in [r["document_id"] for r in similar.json()["results"]]
        explained = client.get("/explain", params={"source": document_id, "target": other})
        assert explained.status_code == 200, explained.text

    for document_id in SLASHED:
        path = "/documents/" + (quote(document_id, safe="") if encode else document_id)
        deleted = client.delete(path)
        assert deleted.status_code == 200, (path, deleted.text)
        assert deleted.json()["deleted"] == [document_id]
        assert client.get(path).status_code == 404
        assert client.delete(path).status_code == 404
    assert client.get("/ready").json()["documents"] == 48


def test_unknown_slashed_id_is_the_documents_404(client: TestClient) -> None:
    response = client.get("/documents/no/such/document")
    assert response.status_code == 404
    assert "no/such/document" in response.json()["detail"]  # not the router's "Not Found"


def sentences(n: int) -> str:
    return " ".join(f"Sentence number {i} talks about zeppelins over the lake." for i in range(n))


@pytest.fixture()
def limited(fresh_settings) -> Iterator[TestClient]:
    settings = fresh_settings(embedded_worker=False, max_sentences=5)
    with TestClient(create_app(settings)) as client:
        yield client


def test_posted_documents_meet_the_sentence_limit(limited: TestClient) -> None:
    fits = {"id": "fits", "text": sentences(5)}
    too_long = {"id": "too/long", "text": sentences(6)}
    for documents in ([too_long], [fits, too_long]):  # all or nothing
        response = limited.post("/documents", json={"documents": documents})
        assert response.status_code == 413, response.text
        assert (
            response.json()["detail"]
            == "document 'too/long' has 6 sentences; the limit is 5 (DOCSIM_API__MAX_SENTENCES)"
        )
        assert limited.get("/ready").json()["documents"] == 48
        assert limited.get("/documents/too/long").status_code == 404
        assert limited.get("/documents/fits").status_code == 404
    # /similar keeps the same limit and message for a posted document
    refused = limited.post("/similar", json={"document": {"text": sentences(6)}})
    assert refused.status_code == 413
    assert (
        refused.json()["detail"]
        == "document has 6 sentences; the limit is 5 (DOCSIM_API__MAX_SENTENCES)"
    )

    response = limited.post("/documents", json={"documents": [fits]})
    assert response.status_code == 200, response.text
    assert limited.get("/ready").json()["documents"] == 49
    assert limited.get("/documents/fits").json()["text"] == fits["text"]


@pytest.mark.parametrize("doc_id", [".", ".."])
def test_dot_segments_are_no_document_ids(client: TestClient, doc_id: str) -> None:
    """`.` and `..` were stored, then could not be read or deleted: clients resolve them out
    of a URL's path (JSONDecodeError, 405)."""
    added = client.post("/documents", json={"documents": [{"id": doc_id, "text": "Dots. Here."}]})
    assert added.status_code == 422 and "cannot be a document id" in added.text
    upload = client.post(
        "/documents", files={"file": (f"{doc_id}.txt", b"Dots. Here.", "text/plain")}
    )
    assert upload.status_code == 422 and "cannot be a document id" in upload.text
