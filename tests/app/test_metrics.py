"""GET /metrics: request latency per route template, index sizes, jobs and their durations."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from docsim.app.main import create_app, served_runtime, served_state
from docsim.indexer.store.units import count_units
from docsim.indexer.store.versions import active_version
from tests.app.test_jobs import wait_for, wait_for_version


def scrape(client: TestClient) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


DEFAULT = (("collection", "default"),)  # the labels of the default collection's figures


def requests_seen(
    seen: dict, method: str, route: str, status: int, collection: str = "default"
) -> float:
    labels = (("method", method), ("route", route), ("status", str(status)))
    labels = tuple(sorted((*labels, ("collection", collection))))
    return seen.get(("docsim_http_request_duration_seconds_count", labels), 0.0)


def test_metrics_count_requests_index_sizes_and_jobs(
    fresh_settings, tiny_encoder_dir: Path, sample_corpus: Path
) -> None:
    with TestClient(create_app(fresh_settings())) as client:
        for _ in range(2):
            assert client.post("/similar", json={"document_id": "coffee-01"}).status_code == 200
        assert client.get("/jobs/424242").status_code == 404
        assert client.get("/no/such/page").status_code == 404
        assert client.post("/similar", json={"top_k": 0}).status_code == 422
        scoped = "/collections/{collection}/similar"
        assert client.post("/collections/default/similar", json={"top_k": 0}).status_code == 422
        assert client.post("/collections/Bad%20Name/similar", json={}).status_code == 422
        assert client.post("/collections/absent/similar", json={}).status_code == 404
        seen = scrape(client)
        assert requests_seen(seen, "POST", scoped, 422) == 1  # in `default`
        # an invalid or unknown name is no label value
        assert requests_seen(seen, "POST", scoped, 422, collection="") == 1
        assert requests_seen(seen, "POST", scoped, 404, collection="") == 1
        assert requests_seen(seen, "POST", "/similar", 200) == 2
        assert requests_seen(seen, "POST", "/similar", 422) == 1
        assert requests_seen(seen, "GET", "/jobs/{job_id}", 404) == 1  # the template, not the id
        assert requests_seen(seen, "GET", "unmatched", 404, collection="") == 1

        engine = served_runtime(client.app).engine
        version = active_version(engine)
        counts = count_units(engine, version.version_id)
        assert seen[("docsim_index_version", DEFAULT)] == version.version_id
        assert seen[("docsim_index_documents", DEFAULT)] == counts["document"] == 48
        for level in ("document", "section", "paragraph", "sentence", "chunk"):
            assert seen[("docsim_index_vectors", (*DEFAULT, ("level", level)))] == counts[level]
        searcher = served_state(client.app).searcher
        scan = searcher.context.scan  # the service's default: the compressed sentence level
        held = seen[("docsim_index_vector_bytes", (*DEFAULT, ("level", "sentence")))]
        assert scan is not None and held == scan.memory_bytes()
        assert held < counts["sentence"] * searcher.encoder.dim * 4  # less than float32
        assert seen[("docsim_query_cache_bytes", DEFAULT)] > 0  # the two queries are kept
        assert seen[("docsim_jobs", (("status", "succeeded"),))] == 0

        started = time.monotonic()
        job = client.post(
            "/jobs/reindex", json={"source": str(sample_corpus), "encoder": str(tiny_encoder_dir)}
        ).json()["job_id"]
        finished = wait_for(client, job, {"succeeded", "failed"})
        wall = time.monotonic() - started
        assert finished["status"] == "succeeded"
        wait_for_version(client, finished["index_version"])
        seen = scrape(client)
        assert seen[("docsim_jobs", (("status", "succeeded"),))] == 1
        assert seen[("docsim_jobs", (("status", "queued"),))] == 0
        ran = seen[("docsim_job_duration_seconds_sum", (("status", "succeeded"),))]
        assert seen[("docsim_job_duration_seconds_count", (("status", "succeeded"),))] == 1
        assert 0 < ran <= wall
        assert seen[("docsim_index_version", DEFAULT)] == finished["index_version"]


def test_a_read_protected_collection_shows_only_to_its_readers(fresh_settings) -> None:
    """Anonymous /metrics once listed the names and figures of collections that
    `GET /collections` hides; their read key also opens their jobs' listing, as documented."""
    write, read, other = (f"{name}-key-0123456789abcdef" for name in ("write", "read", "other"))
    with TestClient(create_app(fresh_settings())) as client:
        body = {"name": "secret", "write_key": write, "read_key": read}
        assert client.post("/collections", json=body).status_code == 201
        assert client.post("/collections", json={"name": "plain"}).status_code == 201
        for name, key in (("secret", read), ("plain", None)):
            headers = {"X-API-Key": key} if key else {}
            client.get(f"/collections/{name}", headers=headers)

        def shown(key: str | None) -> set[str]:
            headers = {"X-API-Key": key} if key else {}
            text = client.get("/metrics", headers=headers).text
            return {c for c in ("secret", "plain", "default") if f'collection="{c}"' in text}

        assert shown(None) == shown(other) == {"plain", "default"}
        assert shown(read) == shown(write) == {"secret", "plain", "default"}
        for key, status in ((None, 401), (other, 401), (read, 200), (write, 200)):
            headers = {"X-API-Key": key} if key else {}
            assert client.get("/collections/secret/jobs", headers=headers).status_code == status
            assert client.get("/collections/secret/jobs/1", headers=headers).status_code == (
                status if status == 401 else 404
            )
        assert client.get("/collections/plain/jobs").status_code == 200


def _latency_labels(client: TestClient) -> set[tuple]:
    return {
        labels
        for (name, labels) in scrape(client)
        if name == "docsim_http_request_duration_seconds_count"
    }


def test_made_up_methods_and_paths_add_no_label_values(client: TestClient) -> None:
    """3,000 anonymous requests of made-up methods grew /metrics from 0.85 to 6.4 MB."""

    def send(start: int, stop: int) -> None:
        for i in range(start, stop):
            for path in ("/health", f"/made/up/{i}", "/collections/default/similar"):
                client.request(f"FOO{i}", path)
                client.get(f"{path}/{i}")

    send(0, 5)
    client.get("/metrics")  # its own series, before the first look
    before, size = _latency_labels(client), len(client.get("/metrics").content)
    send(5, 205)
    after = _latency_labels(client)
    assert after == before
    assert len(client.get("/metrics").content) < size + 2_000  # counts' digits, not series
    methods = {dict(labels)["method"] for labels in after}
    assert "other" in methods and not any(m.startswith("FOO") for m in methods)
    assert not any("made" in dict(labels)["route"] for labels in after)


def test_a_deleted_protected_collection_shows_to_no_one(fresh_settings) -> None:
    """Once deleted, its series showed to anyone: no read key guarded them any more."""
    write, read = "write-key-0123456789abcdef", "read-key-0123456789abcdef"
    with TestClient(create_app(fresh_settings())) as client:
        body = {"name": "secret", "write_key": write, "read_key": read}
        assert client.post("/collections", json=body).status_code == 201
        assert client.get("/collections/secret", headers={"X-API-Key": read}).status_code == 200
        assert 'collection="secret"' in client.get("/metrics", headers={"X-API-Key": read}).text
        deleted = client.delete("/collections/secret", headers={"X-API-Key": write})
        assert deleted.status_code == 200, deleted.text
        for key in (None, read, write):
            headers = {"X-API-Key": key} if key else {}
            assert 'collection="secret"' not in client.get("/metrics", headers=headers).text
        # a collection of the same name made again starts with no series of the old one
        assert client.post("/collections", json={"name": "secret"}).status_code == 201
        assert not any(dict(labels)["collection"] == "secret" for labels in _latency_labels(client))
