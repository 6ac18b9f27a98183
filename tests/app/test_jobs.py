"""Reindex jobs through the API: swap under load, cancel, queueing, retention, keys, paths."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from docsim.app.main import create_app, served_runtime
from docsim.indexer.jobs.queue import claim_job, create_job, finish_job, set_job_version
from docsim.indexer.jobs.worker import Worker
from docsim.indexer.store.tables import JobStatus
from docsim.indexer.store.versions import create_version, version_row, versions
from docsim.indexer.text.corpus import SAMPLE_CORPUS
from tests.utils.corpora import synthetic_markdown, write_text_corpus


@pytest.fixture()
def served(fresh_settings) -> Iterator[TestClient]:
    with TestClient(create_app(fresh_settings())) as client:
        yield client


def wait_for(client: TestClient, job_id: int, statuses: set[str], timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}").json()
        if job["status"] in statuses:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not reach {statuses}: {job}")


def wait_for_version(client: TestClient, version: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while client.get("/ready").json()["index_version"] != version:
        assert time.monotonic() < deadline, "the service did not swap"
        time.sleep(0.05)


def test_queries_never_fail_while_a_reindex_swaps(served: TestClient, tiny_encoder_dir: Path):
    before = served.get("/ready").json()["index_version"]
    answers: list[tuple[int, int]] = []  # (status, version)
    failures: list[str] = []
    stop = threading.Event()

    def query() -> None:
        while not stop.is_set():
            response = served.post("/similar", json={"document_id": "oceans-01", "top_k": 5})
            body = response.json()
            answers.append((response.status_code, body.get("index_version")))
            if response.status_code != 200:
                failures.append(response.text)
                continue
            explained = served.get(
                "/explain",
                params={"source": body["query_id"], "target": body["results"][0]["document_id"]},
            )
            answers.append((explained.status_code, explained.json().get("index_version")))
            if explained.status_code != 200:
                failures.append(explained.text)

    threads = [threading.Thread(target=query) for _ in range(2)]
    for thread in threads:
        thread.start()
    accepted = served.post(
        "/jobs/reindex", json={"source": "current", "encoder": str(tiny_encoder_dir)}
    )
    assert accepted.status_code == 202, accepted.text
    job = wait_for(served, accepted.json()["job_id"], {"succeeded", "failed"})
    assert job["status"] == "succeeded", job
    after = job["index_version"]
    wait_for_version(served, after)
    time.sleep(0.3)  # and a few more answers from the new version
    stop.set()
    for thread in threads:
        thread.join()
    assert after > before
    assert answers and not failures, failures[:3]
    assert {v for _, v in answers} <= {before, after}
    assert answers[-1][1] == after
    progress = job["progress"]
    assert progress["done"] == progress["total"] > 0 and job["finished_at"]


def test_cancel_a_running_job_publishes_nothing(
    served: TestClient, tmp_path: Path, tiny_encoder_dir: Path
) -> None:
    corpus = write_text_corpus(tmp_path / "big", synthetic_markdown(200, paragraphs=6))
    before = served.get("/ready").json()["index_version"]
    job_id = served.post(
        "/jobs/reindex",
        json={"source": str(corpus), "block_documents": 2, "encoder": str(tiny_encoder_dir)},
    ).json()["job_id"]
    wait_for(served, job_id, {"running"})
    deadline = time.monotonic() + 60
    while served.get(f"/jobs/{job_id}").json()["progress"]["done"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    cancelled = served.post(f"/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["cancel_requested"]
    job = wait_for(served, job_id, {"cancelled", "succeeded", "failed"})
    assert job["status"] == "cancelled"
    assert job["index_version"] is None and job["served"] is False  # nothing went live
    assert job["build_version"] is not None  # the removed build's id
    assert served.get("/ready").json()["index_version"] == before
    data = Path(served.app.state.settings.data_dir)
    assert not list((data / "indexes").glob("*.tmp"))
    again = served.post(f"/jobs/{job_id}/cancel")
    assert again.status_code == 409 and "already finished" in again.json()["detail"]


def test_a_second_reindex_waits_in_the_queue(
    served: TestClient, tmp_path: Path, tiny_encoder_dir: Path
) -> None:
    corpus = write_text_corpus(tmp_path / "c", synthetic_markdown(30, paragraphs=4))
    first = served.post(
        "/jobs/reindex",
        json={"source": str(corpus), "block_documents": 2, "encoder": str(tiny_encoder_dir)},
    ).json()["job_id"]
    second = served.post(
        "/jobs/reindex", json={"source": "current", "encoder": str(tiny_encoder_dir)}
    ).json()["job_id"]
    wait_for(served, first, {"running"})
    seen_second = served.get(f"/jobs/{second}").json()
    assert seen_second["status"] == "queued"  # one build at a time
    one = wait_for(served, first, {"succeeded", "failed"})
    two = wait_for(served, second, {"succeeded", "failed"})
    assert (one["status"], two["status"]) == ("succeeded", "succeeded")
    assert two["index_version"] > one["index_version"]
    assert two["started_at"] >= one["finished_at"]
    wait_for_version(served, two["index_version"])
    listed = served.get("/jobs").json()["jobs"]
    assert [j["job_id"] for j in listed[:2]] == [second, first]
    # retention (just after the job finished): the active version and one before it are
    # kept, older ones retired
    engine = served_runtime(served.app).engine
    first_folder = Path(served.app.state.settings.data_dir) / "indexes" / "000001"
    deadline = time.monotonic() + 30
    while True:
        statuses = {v.version_id: v.status for v in versions(engine)}
        if statuses[1] == "retired" and not first_folder.exists():
            break
        assert time.monotonic() < deadline, statuses
        time.sleep(0.02)
    assert statuses[two["index_version"]] == "ready"
    assert statuses[one["index_version"]] == "ready"


def test_paths_outside_the_allowed_roots_are_403(
    served: TestClient, tmp_path: Path, tiny_encoder_dir: Path
) -> None:
    tiny = str(tiny_encoder_dir)
    outside = tmp_path.parent / "elsewhere"
    outside.mkdir(exist_ok=True)
    link = tmp_path / "link"
    link.symlink_to(outside)
    for source, status in (
        ("/etc", 403),
        (str(tmp_path / ".." / "elsewhere"), 403),
        (str(link), 403),  # a link out of the root
        ("relative/path", 403),
        (str(tmp_path / "missing"), 422),
        (str(SAMPLE_CORPUS), 202),
    ):
        response = served.post("/jobs/reindex", json={"source": source, "encoder": tiny})
        assert response.status_code == status, (source, response.text)
        if status != 202:
            assert response.json()["detail"]


def test_an_unknown_encoder_name_is_422_naming_the_choices(served: TestClient) -> None:
    """It was refused as a path: 403 "must be absolute"."""
    body = {"source": str(SAMPLE_CORPUS), "encoder": "no-such-encoder"}
    response = served.post("/jobs/reindex", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "unknown encoder 'no-such-encoder'" in detail and "minilm" in detail


def test_the_api_key_guards_changes_and_jobs(fresh_settings, tiny_encoder_dir: Path) -> None:
    settings = fresh_settings(api_key="s3cret")
    with TestClient(create_app(settings)) as client:
        body = {"source": "current", "encoder": str(tiny_encoder_dir)}
        assert client.post("/jobs/reindex", json=body).status_code == 401
        assert (
            client.post("/jobs/reindex", json=body, headers={"X-API-Key": "nope"}).status_code
            == 401
        )
        ok = client.post("/jobs/reindex", json=body, headers={"X-API-Key": "s3cret"})
        assert ok.status_code == 202
        job_id = ok.json()["job_id"]
        assert client.post(f"/jobs/{job_id}/cancel").status_code == 401
        bearer = {"Authorization": "Bearer s3cret"}
        assert client.post(f"/jobs/{job_id}/cancel", headers=bearer).status_code in (200, 409)
        # jobs show server paths, the worker's host and its errors: only to the key's holder
        assert client.get(f"/jobs/{job_id}").status_code == 401
        assert client.get("/jobs").status_code == 401
        assert client.get(f"/jobs/{job_id}", headers=bearer).status_code == 200
        assert client.get("/jobs", headers=bearer).status_code == 200
        assert client.post("/similar", json={"document_id": "baking-01"}).status_code == 200


def test_unknown_jobs_are_404(served: TestClient) -> None:
    assert served.get("/jobs/999").status_code == 404
    assert served.post("/jobs/999/cancel").status_code == 404
    assert served.post("/jobs/999/retry").status_code == 404


def test_the_engine_is_checked_recorded_and_its_failure_leaves_the_index(
    served: TestClient, tiny_encoder_dir: Path
) -> None:
    bad = served.post("/jobs/reindex", json={"source": "current", "engine": "spark"})
    assert bad.status_code == 422
    assert "local" in bad.text and "ray" in bad.text
    job_id = served.post(
        "/jobs/reindex",
        json={
            "source": "current",
            "encoder": str(tiny_encoder_dir),
            "engine": "ray",
            "reencode": True,
        },
    ).json()["job_id"]
    job = wait_for(served, job_id, {"succeeded", "failed"})
    assert job["parameters"]["engine"] == "ray"
    # pytest's data directory is too deep for a local Ray's sockets: a clear failure
    assert job["status"] == "failed"
    assert "too long for its sockets" in job["error"]
    assert job["index_version"] is None and job["served"] is False
    assert served.get("/ready").json()["index_version"] == 1


def test_only_a_job_that_published_reports_an_index_version(fresh_settings) -> None:
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        engine = served_runtime(client.app).engine
        built = {}
        for status in (JobStatus.cancelled, JobStatus.failed, JobStatus.succeeded):
            job_id = create_job(engine, "reindex", {"source": "current"}).job_id
            assert claim_job(engine, job_id, "test-worker") is not None
            built[job_id] = create_version(engine, encoder_name="tiny", path="")
            set_job_version(engine, job_id, built[job_id])
            finish_job(engine, job_id, status)
        listed = {j["job_id"]: j for j in client.get("/jobs").json()["jobs"]}
        for job_id, version in built.items():
            job = client.get(f"/jobs/{job_id}").json()
            assert listed[job_id] == job
            published = version if job["status"] == JobStatus.succeeded else None
            assert (job["index_version"], job["build_version"]) == (published, version), job
            assert job["served"] is False  # this service serves version 1


def test_a_succeeded_job_is_already_served(served: TestClient, tiny_encoder_dir: Path) -> None:
    """With the embedded worker, a job reads `succeeded` only once this process serves its
    version: the next request after the last poll answers from it."""
    for _ in range(3):
        job_id = served.post(
            "/jobs/reindex", json={"source": "current", "encoder": str(tiny_encoder_dir)}
        ).json()["job_id"]
        deadline = time.monotonic() + 120
        while (job := served.get(f"/jobs/{job_id}").json())["status"] not in (
            JobStatus.succeeded,
            JobStatus.failed,
        ):
            assert time.monotonic() < deadline, job
            time.sleep(0.01)
        ready = served.get("/ready").json()
        assert job["status"] == JobStatus.succeeded, job
        assert ready["index_version"] == job["index_version"], (job, ready)
        assert job["served"] is True
        answer = served.post("/similar", json={"document_id": "oceans-01", "top_k": 3}).json()
        assert answer["index_version"] == job["index_version"]


def test_served_tells_when_a_separate_workers_version_is_live(
    fresh_settings, tiny_encoder_dir: Path
) -> None:
    """A separate worker cannot know when API processes swap: `served` is the signal."""
    settings = fresh_settings(embedded_worker=False)
    slow = settings.api.model_copy(update={"swap_poll_seconds": 3600})  # swaps on wake only
    with TestClient(create_app(settings.model_copy(update={"api": slow}))) as client:
        job_id = client.post(
            "/jobs/reindex", json={"source": "current", "encoder": str(tiny_encoder_dir)}
        ).json()["job_id"]
        engine = served_runtime(client.app).engine
        assert Worker(settings, engine, name="elsewhere").run_once().job_id == job_id
        job = client.get(f"/jobs/{job_id}").json()
        assert job["status"] == JobStatus.succeeded and job["index_version"] == 2
        assert job["served"] is False  # published, but this process still serves version 1
        assert client.get("/ready").json()["index_version"] == 1
        served_runtime(client.app).wake()  # the watcher's next poll
        deadline = time.monotonic() + 30
        while not (job := client.get(f"/jobs/{job_id}").json())["served"]:
            assert time.monotonic() < deadline, job
            time.sleep(0.02)
        assert client.get("/ready").json()["index_version"] == 2


def test_a_jobs_answer_reads_the_served_version_after_the_jobs_row(
    served: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`served` compares the job's version with the one served when the answer is made, read
    after the job's row: read before it, a swap in between showed a job already `succeeded`
    (set once its version is served here) as not served."""
    from docsim.app.api.routes import jobs as routes

    job_id = served.post("/jobs/reindex", json={"source": "current"}).json()["job_id"]
    wait_for(served, job_id, {"succeeded", "failed"})
    order: list[str] = []
    real_get_job = routes.get_job

    def get_job(*args: object, **kwargs: object) -> object:
        order.append("row")
        return real_get_job(*args, **kwargs)  # type: ignore[arg-type]

    def served_version() -> object:
        def now() -> int:
            order.append("served")
            return served_runtime(served.app).state.version_id

        return now

    monkeypatch.setattr(routes, "get_job", get_job)
    served.app.dependency_overrides[routes.served_version] = served_version
    try:
        assert served.get(f"/jobs/{job_id}").json()["served"] is True
    finally:
        served.app.dependency_overrides.clear()
    assert order == ["row", "served"]


def test_a_reindex_of_the_current_version_reuses_its_vectors_unless_told_to_reencode(
    served: TestClient,
) -> None:
    engine = served_runtime(served.app).engine
    sentences = None
    for body in ({"source": "current"}, {"source": "current", "reencode": True}):
        accepted = served.post("/jobs/reindex", json=body)
        assert accepted.status_code == 202, accepted.text
        job = wait_for(served, accepted.json()["job_id"], {"succeeded", "failed"})
        assert job["status"] == "succeeded", job
        assert job["parameters"]["reencode"] is body.get("reencode", False)
        version = version_row(engine, job["index_version"])
        assert version is not None
        build = version.published_manifest()["build"]
        sentences = version.published_manifest()["counts"]["sentence"]
        if body.get("reencode"):
            assert "reused" not in build
        else:
            assert build["reused"]["sentences"] == sentences
            assert build["reused"]["encoded_sentences"] == 0
    assert sentences
