"""Claiming jobs under contention, on the run's database (SQLite or PostgreSQL)."""

from __future__ import annotations

import threading

from sqlalchemy import Engine

from indexer.jobs import QUEUED, RUNNING, SUCCEEDED, claim_next, create_job, finish_job, list_jobs


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
        assert [s for s in statuses.values() if s == RUNNING] == [RUNNING]
        assert _race(engine, workers=3) == []  # nothing starts while one runs
        finish_job(engine, expected, SUCCEEDED)
    assert {j.status for j in list_jobs(engine)} == {SUCCEEDED}
    assert QUEUED not in {j.status for j in list_jobs(engine)}
