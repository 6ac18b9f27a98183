"""Claiming jobs under contention, and what a finished job reports, on the run's database
(SQLite or PostgreSQL)."""

from __future__ import annotations

import threading

from sqlalchemy import Engine

from docsim.indexer.jobs.queue import (
    claim_job,
    claim_next,
    create_job,
    finish_job,
    get_job,
    list_jobs,
    reap_stale,
    request_cancel,
    set_job_message,
    set_job_version,
    update_progress,
)
from docsim.indexer.store.tables import JobStatus
from docsim.indexer.store.versions import create_version, publish_version, version_row


def _race(engine: Engine, workers: int) -> list[int]:
    """`workers` threads call `claim_next` at once; the ids of the jobs they got."""
    start = threading.Barrier(workers)
    won: list[int] = []
    lock = threading.Lock()

    def claim(name: str) -> None:
        start.wait()
        job = claim_next(engine, name)
        if job is not None:
            with lock:
                won.append(job.job_id)

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return won


def test_concurrent_workers_start_one_job_at_a_time_in_order(engine: Engine) -> None:
    created = [create_job(engine, "reindex", {"n": i}).job_id for i in range(4)]
    for expected in created:
        won = _race(engine, workers=6)
        assert won == [expected]  # exactly one claim succeeds, and it is the oldest job
        statuses = {j.job_id: j.status for j in list_jobs(engine)}
        assert [s for s in statuses.values() if s == JobStatus.running] == [JobStatus.running]
        assert _race(engine, workers=3) == []  # nothing starts while one runs
        finish_job(engine, expected, JobStatus.succeeded)
    assert {j.status for j in list_jobs(engine)} == {JobStatus.succeeded}
    assert JobStatus.queued not in {j.status for j in list_jobs(engine)}


def test_a_job_whose_worker_died_after_publishing_is_reaped_as_succeeded(engine: Engine) -> None:
    """Its version went live: the job published it, and a retry would only build it again."""
    job_id = create_job(engine, "reindex", {"source": "current"}).job_id
    assert claim_job(engine, job_id, "gone") is not None
    version = create_version(engine, encoder_name="tiny", path="")
    set_job_version(engine, job_id, version)
    publish_version(engine, version, path="/nowhere", manifest={})
    assert reap_stale(engine, stale_after_seconds=0) == [job_id]
    job = get_job(engine, job_id)
    assert job.status == JobStatus.succeeded and job.published_version == version, job
    assert job.error is None and job.finished_at is not None
    assert version_row(engine, version).status == "ready"


def test_only_a_succeeded_job_has_a_published_version(engine: Engine) -> None:
    for status in (JobStatus.cancelled, JobStatus.failed, JobStatus.succeeded):
        job_id = create_job(engine, "reindex", {}).job_id
        assert claim_job(engine, job_id, "w") is not None
        assert get_job(engine, job_id).published_version is None  # running
        version = create_version(engine, encoder_name="tiny", path="")
        set_job_version(engine, job_id, version)
        finish_job(engine, job_id, status)
        job = get_job(engine, job_id)
        assert job.version_id == version
        assert job.published_version == (version if status == JobStatus.succeeded else None)


def test_a_cancelling_job_keeps_saying_so(engine: Engine) -> None:
    """Issue 26: the running job's next progress report put "encoding" back for seconds."""
    job = create_job(engine, "reindex", {"source": "current"})
    assert claim_job(engine, job.job_id, "w1") is not None
    update_progress(engine, job.job_id, done=1, total=10, message="encoding")
    assert request_cancel(engine, job.job_id).message == "cancelling"
    update_progress(engine, job.job_id, done=2, total=10, message="encoding")
    set_job_message(engine, job.job_id, "writing the indexes")
    shown = get_job(engine, job.job_id)
    assert shown.message == "cancelling" and shown.done == 2
    finish_job(engine, job.job_id, JobStatus.cancelled, message="cancelled; nothing was published")
    assert get_job(engine, job.job_id).message == "cancelled; nothing was published"
