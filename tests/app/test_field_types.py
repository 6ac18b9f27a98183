"""Metadata field types are fixed at first write, like a mapping: a later document whose value
conflicts is refused (422) naming the field, its type and the value, and writes nothing; they
are declared at creation or taken from the first write, and shown with the collection."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from docsim.app.main import create_app


def _post(client: TestClient, doc_id: str, metadata: dict[str, Any], prefix: str = ""):
    document = {"id": doc_id, "text": "Airships rose. They carried mail.", "metadata": metadata}
    return client.post(f"{prefix}/documents", json={"documents": [document]})


def test_a_conflicting_document_is_refused_and_changes_no_filter(fresh_settings) -> None:
    """`"date": 2020` once turned every date filter into a 422 ("mixed values"), and
    `"date": "yesterday"` silently made the field a keyword field."""
    with TestClient(create_app(fresh_settings())) as client:
        assert _post(client, "first", {"date": "2020-01-01", "stars": 3}).status_code == 200
        types = client.get("/collections/default").json()["field_types"]
        assert types["date"] == "date" and types["stars"] == "number"

        for doc_id, metadata, shown in [
            ("number", {"date": 2020}, "2020"),
            ("word", {"date": "yesterday"}, "'yesterday'"),
            ("list", {"tags": ["a", 1]}, "1"),
            ("stars", {"stars": "many"}, "'many'"),
        ]:
            refused = _post(client, doc_id, metadata)
            assert refused.status_code == 422, refused.text
            detail = refused.json()["detail"]
            assert f"document {doc_id!r}" in detail and shown in detail
            assert client.get(f"/documents/{doc_id}").status_code == 404

        assert _post(client, "second", {"date": "2021-06-01"}).status_code == 200
        recent = {"document_id": "first", "filter": {"field": "date", "gte": "2021-01-01"}}
        answer = client.post("/similar", json=recent)
        assert answer.status_code == 200, answer.text
        assert [hit["document_id"] for hit in answer.json()["results"]] == ["second"]
        assert "tags" not in client.get("/collections/default").json()["field_types"]  # refused


def test_types_declared_at_creation_hold_from_the_first_document(fresh_settings) -> None:
    with TestClient(create_app(fresh_settings())) as client:
        declared = {"name": "typed", "field_types": {"year": "number", "court": "keyword"}}
        created = client.post("/collections", json=declared)
        assert created.status_code == 201, created.text
        assert created.json()["field_types"] == {"court": "keyword", "year": "number"}
        bad = {"name": "bad", "field_types": {"year": "integer"}}
        assert client.post("/collections", json=bad).status_code == 422
        untyped = client.post("/collections", json={"name": "untyped"}).json()
        assert untyped["field_types"] == {}


def test_a_declared_keyword_field_of_date_strings_compares_as_strings(
    fresh_settings, tiny_encoder_dir
) -> None:
    """A field declared `keyword` whose values look like dates was filtered as a date field:
    `{"gte": "2002"}` on it answered 422 "holds dates". It compares strings, in code point
    order; an undeclared field of dates stays a date field."""
    with TestClient(create_app(fresh_settings())) as client:
        body = {
            "name": "typed",
            "encoder": str(tiny_encoder_dir),
            "field_types": {"docket": "keyword"},
        }
        assert client.post("/collections", json=body).status_code == 201
        prefix = "/collections/typed"
        for doc_id, docket in [("a", "2001-03-04"), ("b", "2002-05-06"), ("c", "2003-07-08")]:
            metadata = {"docket": docket, "decided": docket}
            assert _post(client, doc_id, metadata, prefix).status_code == 200
        types = client.get(prefix).json()["field_types"]
        assert types == {"decided": "date", "docket": "keyword"}

        def found(condition: dict[str, Any]) -> set[str]:
            query = {"document": {"text": "Airships rose. Mail came."}, "filter": condition}
            answer = client.post(f"{prefix}/similar", json=query)
            assert answer.status_code == 200, (condition, answer.text)
            return {hit["document_id"] for hit in answer.json()["results"]}

        assert found({"field": "docket", "gte": "2002"}) == {"b", "c"}
        assert found({"field": "docket", "lt": "2002-05-06"}) == {"a"}
        assert found({"field": "docket", "eq": "2003-07-08"}) == {"c"}
        assert found({"field": "decided", "gte": "2002-01-01"}) == {"b", "c"}
        as_date = {"document_id": "a", "filter": {"field": "decided", "gte": "2002"}}
        refused = client.post(f"{prefix}/similar", json=as_date)
        assert refused.status_code == 422 and "holds dates" in refused.text
