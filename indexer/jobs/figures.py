"""What the jobs table says about the work done, for monitoring: jobs per status and the run
times of finished ones (counting jobs run by any worker process)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, func, select

from docsim.indexer.jobs.queue import FINISHED
from docsim.indexer.store.tables import JobStatus, as_utc, jobs


@dataclass(frozen=True)
class JobFigures:
    """`counts`: jobs per status (every status, 0 included); `run_seconds`: per finished
    status, how many jobs ran and their total run time (start to finish), in seconds."""

    counts: dict[JobStatus, int]
    run_seconds: dict[JobStatus, tuple[int, float]]


def job_figures(engine: Engine) -> JobFigures:
    """Jobs per status and the run times of finished ones, read in one connection."""
    with engine.connect() as conn:
        by_status: dict[str, int] = dict(  # the status column is a plain string
            conn.execute(select(jobs.c.status, func.count()).group_by(jobs.c.status)).all()
        )
        finished = conn.execute(
            select(jobs.c.status, jobs.c.started_at, jobs.c.finished_at).where(
                jobs.c.status.in_(FINISHED), jobs.c.started_at.is_not(None)
            )
        ).all()
        statuses = (JobStatus.queued, JobStatus.running, *FINISHED)
        counts = {status: int(by_status.get(status, 0)) for status in statuses}
        totals = dict.fromkeys(FINISHED, (0, 0.0))
        for status, started, ended in finished:
            start, end = as_utc(started), as_utc(ended)
            if start is None or end is None:
                continue
            count, total = totals[JobStatus(status)]
            totals[JobStatus(status)] = (count + 1, total + max((end - start).total_seconds(), 0))
    return JobFigures(counts, totals)
