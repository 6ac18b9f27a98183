"""Running reindex jobs: claim, build with heartbeats and progress, publish, clean up.

`Worker.run` is the loop behind `docsim worker` and the service's embedded worker;
`run_reindex` runs one claimed job (also used by `docsim reindex` in the foreground).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

from sqlalchemy import Engine

from docsim.indexer.builder.engines import make_encode_engine
from docsim.indexer.builder.lifecycle import failure_reason
from docsim.indexer.builder.pipeline import BuildHooks, BuildResult, prepare_data_dir
from docsim.indexer.jobs.queue import (
    JobRow,
    claim_next,
    finish_job,
    heartbeat,
    reap_stale,
    set_job_message,
    set_job_version,
    update_progress,
)
from docsim.indexer.jobs.reindex_job import (
    ReindexParameters,
    build_source,
    job_settings,
    reindex_encoder_name,
    reindex_settings,
    resumable_version,
)
from docsim.indexer.settings import Settings, load_configured_encoder
from docsim.indexer.store.tables import JobStatus
from docsim.indexer.store.versions import collect_garbage

logger = logging.getLogger(__name__)


class JobCancelledError(Exception):
    """The job was cancelled while it ran."""


class WorkerStoppingError(Exception):
    """The worker is shutting down; the job's build is kept to resume."""


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def run_reindex(
    job: JobRow,
    settings: Settings,
    engine: Engine,
    *,
    worker: str,
    stop: threading.Event | None = None,
    show_progress: bool = False,
) -> BuildResult:
    """Run one claimed reindex job to the end; the caller records the outcome.

    Raises:
        JobCancelledError: a cancel was requested (the build was removed).
        WorkerStoppingError: `stop` was set (the build is suspended, a retry resumes it).
        Exception: any build error (the build is suspended, a retry resumes it).
    """
    params = ReindexParameters.from_dict(job.parameters)
    settings = reindex_settings(job_settings(job, settings, engine), params)
    cancel = threading.Event()  # set by the heartbeats when a cancel is requested
    progress = JobProgress(engine, job.job_id, cancel=cancel, stop=stop or threading.Event())
    hooks = BuildHooks(
        on_version=lambda v: set_job_version(engine, job.job_id, v),
        on_progress=progress,
        resume_version=resumable_version(engine, job),
        keep_on_failure=lambda error: not isinstance(error, JobCancelledError),
    )
    encoder = load_configured_encoder(
        settings, reindex_encoder_name(engine, params, settings.collection)
    )
    encode_engine = make_encode_engine(
        params.engine, settings, encoder, settings.index.block_documents
    )
    with heartbeats(engine, job.job_id, worker, settings.jobs.heartbeat_seconds, cancel):
        update_progress(engine, job.job_id, done=0, total=None, message="reading the source")
        return build_source(
            params,
            settings,
            engine,
            encoder,
            hooks=hooks,
            show_progress=show_progress,
            encode_engine=encode_engine,
        )


class JobProgress:
    """A job's `BuildHooks.on_progress`: records the build's progress on the job (at most
    every `REPORT_SECONDS`, and at the end), with the rate and time left measured from the
    first committed block, then stops the build if the job was cancelled (`cancel`) or the
    worker is stopping (`stop`)."""

    REPORT_SECONDS = 0.5

    def __init__(
        self, engine: Engine, job_id: int, *, cancel: threading.Event, stop: threading.Event
    ) -> None:
        self.engine = engine
        self.job_id = job_id
        self.cancel = cancel
        self.stop = stop
        self.first: tuple[float, int] | None = None  # (time, done) at the first block
        self.last_report = 0.0

    def __call__(self, done: int, total: int) -> None:
        """`done` of `total` sentences are committed.

        Raises:
            JobCancelledError: the job was cancelled.
            WorkerStoppingError: the worker is stopping.
        """
        now = time.monotonic()
        first = self.first = self.first or (now, done)
        if now - self.last_report >= self.REPORT_SECONDS or done >= total:
            self.last_report = now
            self._report(first, now, done, total)
        if self.cancel.is_set():
            raise JobCancelledError(f"job {self.job_id} was cancelled")
        if self.stop.is_set():
            raise WorkerStoppingError("the worker is stopping; retry the job to resume")

    def _report(self, first: tuple[float, int], now: float, done: int, total: int) -> None:
        since, base = first
        rate = (done - base) / (now - since) if now > since and done > base else None
        eta = (total - done) / rate if rate else None
        update_progress(
            self.engine,
            self.job_id,
            done=done,
            total=total,
            rate=round(rate, 1) if rate else None,
            eta_seconds=round(eta, 1) if eta is not None else None,
            message="encoding",
        )


@contextlib.contextmanager
def heartbeats(
    engine: Engine, job_id: int, worker: str, seconds: float, cancel: threading.Event
) -> Iterator[None]:
    """Send the job's heartbeats from a thread while the block runs; `cancel` is set when a
    cancel is requested."""
    beating = threading.Event()

    def beat() -> None:
        while not beating.wait(seconds):
            try:
                if heartbeat(engine, job_id, worker):
                    cancel.set()
            except Exception:  # a transient database error must not kill the heartbeat
                logger.exception("heartbeat of job %d failed", job_id)

    thread = threading.Thread(target=beat, name=f"heartbeat-{job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        beating.set()
        thread.join()


def after_publishing(
    job: JobRow,
    version_id: int,
    settings: Settings,
    engine: Engine,
    *,
    worker: str,
    on_published: Callable[[str, int], None],
) -> str:
    """Call `on_published` (the embedded worker: load the version into the service) while the
    job still runs, with heartbeats, as loading may outlast `stale_after_seconds`. Its failure
    is logged, not raised (the version is live all the same). Returns the job's final message."""
    message = f"published version {version_id}"
    set_job_message(engine, job.job_id, f"{message}; loading it")
    try:
        with heartbeats(
            engine, job.job_id, worker, settings.jobs.heartbeat_seconds, threading.Event()
        ):
            on_published(job.collection, version_id)
    except Exception as error:
        logger.exception("Job %d: loading version %d failed", job.job_id, version_id)
        return f"{message}; loading it failed ({type(error).__name__}: {error})"
    return message


def execute(
    job: JobRow,
    settings: Settings,
    engine: Engine,
    *,
    worker: str,
    stop: threading.Event | None = None,
    show_progress: bool = False,
    on_published: Callable[[str, int], None] | None = None,
) -> str:
    """Run a claimed job and record how it ended; returns the final status.

    `on_published` runs before the job turns `succeeded`: the embedded worker passes the
    service's `Runtime.serve_published`, so that once a job reads succeeded, its process
    already answers from the version. A separate worker cannot know when API processes swap
    (`JobOut.served` tells)."""
    try:
        result = run_reindex(
            job, settings, engine, worker=worker, stop=stop, show_progress=show_progress
        )
    except JobCancelledError:
        finish_job(
            engine, job.job_id, JobStatus.cancelled, message="cancelled; nothing was published"
        )
        logger.info("Job %d cancelled", job.job_id)
        return JobStatus.cancelled
    except BaseException as error:  # noqa: BLE001 - every failure is recorded on the job
        reason = failure_reason(error)
        finish_job(engine, job.job_id, JobStatus.failed, error=reason, message="failed")
        logger.error("Job %d failed: %s", job.job_id, reason, exc_info=error)
        if not isinstance(error, Exception):
            raise  # KeyboardInterrupt / SystemExit: stop the process after recording it
        return JobStatus.failed
    message = f"published version {result.version_id}"
    if on_published is not None:
        message = after_publishing(
            job, result.version_id, settings, engine, worker=worker, on_published=on_published
        )
    finish_job(engine, job.job_id, JobStatus.succeeded, message=message)
    logger.info("Job %d published version %d", job.job_id, result.version_id)
    indexes_dir = result.path.parent  # the job's collection's folder of versions
    collect_garbage(
        engine,
        prepare_data_dir(indexes_dir),
        keep_versions=settings.jobs.keep_versions,
        grace_seconds=settings.jobs.retire_grace_seconds,
        collection=job.collection,
    )
    return JobStatus.succeeded


class Worker:
    """Claims queued jobs and runs them, one at a time."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        *,
        name: str | None = None,
        on_published: Callable[[str, int], None] | None = None,
        show_progress: bool = False,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.name = name or worker_name()
        self.on_published = on_published
        self.show_progress = show_progress
        self.stop = threading.Event()

    def run_once(self) -> JobRow | None:
        """Fail dead workers' jobs, then run the next queued job if there is one."""
        for job_id in reap_stale(self.engine, self.settings.jobs.stale_after_seconds):
            logger.warning("Job %d lost its worker; marked failed (retry to resume)", job_id)
        job = claim_next(self.engine, self.name)
        if job is None:
            return None
        logger.info("Worker %s runs job %d (attempt %d)", self.name, job.job_id, job.attempts)
        execute(
            job,
            self.settings,
            self.engine,
            worker=self.name,
            stop=self.stop,
            show_progress=self.show_progress,
            on_published=self.on_published,
        )
        return job

    def run(self) -> None:
        """Until `stop` is set: run jobs as they come, polling when idle."""
        logger.info("Worker %s started", self.name)
        while not self.stop.is_set():
            try:
                if self.run_once() is None:
                    self.stop.wait(self.settings.jobs.poll_seconds)
            except Exception:
                logger.exception("Worker %s: unexpected error; continuing", self.name)
                self.stop.wait(self.settings.jobs.poll_seconds)
        logger.info("Worker %s stopped", self.name)
