"""The `jobs` table: reindex jobs queued by the API or the CLI and run by workers.

A job moves `queued -> running -> succeeded | failed | cancelled`. Workers claim a job with a
compare-and-set update (one worker per job, on SQLite and PostgreSQL alike; on PostgreSQL the
candidate is picked with `SELECT ... FOR UPDATE SKIP LOCKED` and claims are serialised by a
transaction-scoped advisory lock, so that two workers never start two builds), send heartbeats
while they run it, and report progress. A running job whose heartbeats stop is failed by the
next worker that looks (`reap_stale`); its build is suspended, so that a retry resumes it.

A job's `version_id` is the version its build creates (or resumes), live or not; the job
published it if and only if the job succeeded (`JobRow.published_version`). A worker marks a
job succeeded after publishing (and, in the service's embedded worker, after serving) it; a
job whose worker died after publishing is reaped as succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Connection, Engine, Exists, and_, case, exists, func, insert, select, update

from docsim.indexer.choices import DEFAULT_COLLECTION
from docsim.indexer.errors import JobNotFoundError, JobStateError
from docsim.indexer.store.db import insert_one
from docsim.indexer.store.tables import JobStatus, VersionStatus, as_utc, index_versions, jobs

FINISHED = (JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled)


@dataclass(frozen=True)
class JobRow:
    job_id: int
    collection: str  # the collection whose version the job builds
    kind: str
    parameters: dict[str, Any]
    status: JobStatus
    done: int
    total: int | None
    unit: str
    rate: float | None
    eta_seconds: float | None
    message: str | None
    error: str | None
    cancel_requested: bool
    worker: str | None
    attempts: int
    version_id: int | None  # the version the job builds or built, published or not
    created_at: datetime
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None

    @property
    def published_version(self) -> int | None:
        """The version this job published (made active); None unless it succeeded."""
        return self.version_id if self.status == JobStatus.succeeded else None


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _row(row: Any) -> JobRow:
    values = dict(row._mapping)
    values["status"] = JobStatus(values["status"])
    for key in ("created_at", "started_at", "heartbeat_at", "finished_at"):
        values[key] = as_utc(values[key])
    return JobRow(**values)


def create_job(
    engine: Engine, kind: str, parameters: dict[str, Any], collection: str = DEFAULT_COLLECTION
) -> JobRow:
    """Queue a job for `collection` (one job runs at a time, whatever its collection: a
    build takes the machine's cores)."""
    with engine.begin() as conn:
        job_id = insert_one(
            conn,
            insert(jobs).values(
                collection=collection,
                kind=kind,
                parameters=parameters,
                status=JobStatus.queued,
                done=0,
                unit="sentences",
                cancel_requested=False,
                attempts=0,
                created_at=_now(),
            ),
        )
    return get_job(engine, job_id)


def get_job(engine: Engine, job_id: int, collection: str | None = None) -> JobRow:
    """The job `job_id` (of `collection`, when given: another collection's is not found).

    Raises:
        JobNotFoundError: there is none.
    """
    query = select(jobs).where(jobs.c.job_id == job_id)
    if collection is not None:
        query = query.where(jobs.c.collection == collection)
    with engine.connect() as conn:
        row = conn.execute(query).first()
    if row is None:
        where = f" in collection {collection!r}" if collection is not None else ""
        raise JobNotFoundError(f"job {job_id} does not exist{where}")
    return _row(row)


def list_jobs(
    engine: Engine, limit: int = 100, status: str | None = None, collection: str | None = None
) -> list[JobRow]:
    """The newest `limit` jobs (with `status`, of `collection`, when given)."""
    query = select(jobs).order_by(jobs.c.job_id.desc()).limit(limit)
    if status is not None:
        query = query.where(jobs.c.status == status)
    if collection is not None:
        query = query.where(jobs.c.collection == collection)
    with engine.connect() as conn:
        return [_row(r) for r in conn.execute(query).all()]


CLAIM_LOCK = 0x646F6373696D  # PostgreSQL advisory lock key for claims ("docsim")


def _serialise_claims(conn: Connection) -> None:
    """Make this transaction's claim wait for any other claim in flight (PostgreSQL).

    Under READ COMMITTED two concurrent claims could each see no running job and start two
    builds; with the lock the second one's statements see the first one's committed claim.
    SQLite serialises writers by itself."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(CLAIM_LOCK)))


def claim_next(engine: Engine, worker: str) -> JobRow | None:
    """Atomically take the oldest queued job, unless a job is already running (one build at
    a time: the others wait in the queue)."""
    with engine.begin() as conn:
        _serialise_claims(conn)
        candidate = conn.execute(
            select(jobs.c.job_id)
            .where(jobs.c.status == JobStatus.queued)
            .order_by(jobs.c.job_id)
            .limit(1)
            .with_for_update(skip_locked=True)  # PostgreSQL; SQLite renders no locking clause
        ).scalar()
        if candidate is None:
            return None
        claimed = conn.execute(
            update(jobs)
            .where(and_(jobs.c.job_id == candidate, jobs.c.status == JobStatus.queued, ~_running()))
            .values(**_claimed(worker, _now()))
        ).rowcount
    return get_job(engine, candidate) if claimed == 1 else None


def claim_job(engine: Engine, job_id: int, worker: str) -> JobRow | None:
    """Atomically take one given queued job (the foreground `docsim reindex`), unless another
    job is running."""
    with engine.begin() as conn:
        _serialise_claims(conn)
        claimed = conn.execute(
            update(jobs)
            .where(and_(jobs.c.job_id == job_id, jobs.c.status == JobStatus.queued, ~_running()))
            .values(**_claimed(worker, _now()))
        ).rowcount
    return get_job(engine, job_id) if claimed == 1 else None


def _running() -> Exists:
    others = jobs.alias("others")  # not correlated with the row being updated
    return exists().where(others.c.status == JobStatus.running)


def _claimed(worker: str, now: datetime) -> dict[str, Any]:
    """The columns a claim sets (a compare-and-set from `queued`)."""
    return {
        "status": JobStatus.running,
        "worker": worker,
        "started_at": now,
        "heartbeat_at": now,
        "attempts": jobs.c.attempts + 1,
        "message": "starting",
        "error": None,
        "finished_at": None,
    }


def heartbeat(engine: Engine, job_id: int, worker: str) -> bool:
    """Record that `worker` is alive; returns whether a cancel was requested."""
    with engine.begin() as conn:
        conn.execute(
            update(jobs)
            .where(and_(jobs.c.job_id == job_id, jobs.c.worker == worker))
            .values(heartbeat_at=_now())
        )
        return bool(
            conn.execute(select(jobs.c.cancel_requested).where(jobs.c.job_id == job_id)).scalar()
        )


def update_progress(
    engine: Engine,
    job_id: int,
    *,
    done: int,
    total: int | None,
    rate: float | None = None,
    eta_seconds: float | None = None,
    message: str | None = None,
) -> None:
    _set(
        engine,
        job_id,
        done=done,
        total=total,
        rate=rate,
        eta_seconds=eta_seconds,
        message=_unless_cancelling(message),
        heartbeat_at=_now(),
    )


def set_job_version(engine: Engine, job_id: int, version_id: int) -> None:
    _set(engine, job_id, version_id=version_id)


def set_job_message(engine: Engine, job_id: int, message: str) -> None:
    _set(engine, job_id, message=_unless_cancelling(message[:4000]), heartbeat_at=_now())


def _unless_cancelling(message: str | None) -> Any:
    """A running job's new message, except while a cancel is pending: that keeps saying
    "cancelling" until the job ends (its progress must not say it went back to work)."""
    if message is None:
        return None
    return case((jobs.c.cancel_requested.is_(True), "cancelling"), else_=message)


def _set(engine: Engine, job_id: int, **values: Any) -> None:
    """Update columns of one job row."""
    with engine.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.job_id == job_id).values(**values))


def finish_job(
    engine: Engine,
    job_id: int,
    status: str,
    *,
    error: str | None = None,
    message: str | None = None,
) -> None:
    _set(
        engine,
        job_id,
        status=status,
        error=error[:4000] if error else None,
        message=message,
        finished_at=_now(),
        eta_seconds=None,
    )


def request_cancel(engine: Engine, job_id: int) -> JobRow:
    """Cancel a queued job now, or ask the worker of a running one to stop.

    Raises:
        JobNotFoundError, JobStateError: the job has already finished.
    """
    with engine.begin() as conn:
        now = _now()
        cancelled = conn.execute(
            update(jobs)
            .where(and_(jobs.c.job_id == job_id, jobs.c.status == JobStatus.queued))
            .values(
                status=JobStatus.cancelled,
                cancel_requested=True,
                finished_at=now,
                message="cancelled",
            )
        ).rowcount
        if not cancelled:
            conn.execute(
                update(jobs)
                .where(and_(jobs.c.job_id == job_id, jobs.c.status == JobStatus.running))
                .values(cancel_requested=True, message="cancelling")
            )
    job = get_job(engine, job_id)
    if job.status in FINISHED and not cancelled:
        raise JobStateError(f"job {job_id} has already finished ({job.status})")
    return job


def retry_job(engine: Engine, job_id: int) -> JobRow:
    """Queue a failed or cancelled job again; its suspended build, if any, is resumed.

    Raises:
        JobNotFoundError, JobStateError: the job is queued, running or succeeded.
    """
    with engine.begin() as conn:
        changed = conn.execute(
            update(jobs)
            .where(
                and_(
                    jobs.c.job_id == job_id,
                    jobs.c.status.in_((JobStatus.failed, JobStatus.cancelled)),
                )
            )
            .values(
                status=JobStatus.queued,
                cancel_requested=False,
                message="queued again",
                finished_at=None,
                worker=None,
            )
        ).rowcount
    job = get_job(engine, job_id)
    if not changed:
        raise JobStateError(
            f"only failed or cancelled jobs can be retried; job {job_id} is {job.status}"
        )
    return job


def reap_stale(engine: Engine, stale_after_seconds: float) -> list[int]:
    """Finish running jobs whose worker stopped sending heartbeats: failed, with their builds
    suspended so that a retry resumes them; or succeeded, if the worker died after publishing.
    Returns the ids of the jobs finished."""
    cutoff = _now() - timedelta(seconds=stale_after_seconds)
    reaped = []
    with engine.begin() as conn:
        stale = conn.execute(
            select(
                jobs.c.job_id,
                jobs.c.worker,
                jobs.c.heartbeat_at,
                jobs.c.version_id,
                index_versions.c.published_at,
            )
            .select_from(jobs.outerjoin(index_versions))
            .where(jobs.c.status == JobStatus.running)
        ).all()
        for job_id, worker, beat, version_id, published_at in stale:
            beat = as_utc(beat)
            if beat is not None and beat >= cutoff:
                continue
            last = beat.isoformat() if beat else "never"
            if published_at is not None:  # the build went live: the job did its work
                outcome = {
                    "status": JobStatus.succeeded,
                    "message": f"published version {version_id} (worker {worker!r} stopped "
                    f"sending heartbeats afterwards, last at {last})",
                }
            else:
                outcome = {
                    "status": JobStatus.failed,
                    "error": f"worker {worker!r} stopped sending heartbeats (last at {last}); "
                    "retry the job to resume",
                    "message": "worker lost",
                }
            changed = conn.execute(
                update(jobs)
                .where(and_(jobs.c.job_id == job_id, jobs.c.status == JobStatus.running))
                .values(finished_at=_now(), eta_seconds=None, **outcome)
            ).rowcount
            if changed and published_at is None and version_id is not None:
                conn.execute(
                    update(index_versions)
                    .where(
                        and_(
                            index_versions.c.version_id == version_id,
                            index_versions.c.status == VersionStatus.building,
                        )
                    )
                    .values(status=VersionStatus.suspended, error="its worker died")
                )
            if changed:
                reaped.append(int(job_id))
    return reaped


def running_job(engine: Engine) -> JobRow | None:
    with engine.connect() as conn:
        row = conn.execute(select(jobs).where(jobs.c.status == JobStatus.running).limit(1)).first()
    return _row(row) if row is not None else None
