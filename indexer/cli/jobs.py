"""`docsim reindex` (one job in the foreground) and `docsim worker` (queued jobs)."""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from docsim.indexer.choices import CURRENT, CorpusFormat, EngineName
from docsim.indexer.cli.common import (
    DataDir,
    EncoderOption,
    EngineOption,
    FormatOption,
    ProgressOption,
    ReencodeOption,
    cli,
    cli_settings,
    fail,
    fail_with,
    in_collection,
    user_errors,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from docsim.indexer.jobs.queue import JobRow

logger = logging.getLogger("docsim")


@cli.command()
def reindex(
    source: Annotated[
        str,
        typer.Argument(
            help="A corpus path, or `current` to re-encode the stored documents of the active "
            "version."
        ),
    ] = CURRENT,
    encoder: EncoderOption = None,
    fmt: FormatOption = CorpusFormat.auto,
    chunk_tokens: Annotated[int | None, typer.Option(help="Tokens per chunk.")] = None,
    block_documents: Annotated[int | None, typer.Option(help="Documents per block.")] = None,
    encode_engine: EngineOption = EngineName.local,
    reencode: ReencodeOption = False,
    retry: Annotated[
        int | None,
        typer.Option(help="Run this failed or cancelled job again (resuming its build)."),
    ] = None,
    data_dir: DataDir = None,
    progress: ProgressOption = True,
) -> None:
    """Run a reindex job in the foreground: the same job as POST /jobs/reindex, recorded in
    the jobs table, with a progress bar. A running service swaps to the result."""
    from docsim.indexer.errors import CorpusError
    from docsim.indexer.jobs.queue import create_job, get_job, retry_job
    from docsim.indexer.jobs.reindex_job import ReindexParameters
    from docsim.indexer.jobs.worker import execute, worker_name
    from docsim.indexer.store.db import make_engine, upgrade
    from docsim.indexer.store.tables import JobStatus

    settings = cli_settings(data_dir)
    try:
        if settings.db.auto_migrate:
            upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        settings = in_collection(settings, engine, create=True)
        if retry is not None:
            get_job(engine, retry, settings.collection)  # the collection's job, or not found
            job = retry_job(engine, retry)
        else:
            if source != CURRENT:
                source = str(Path(source).resolve())
                if not Path(source).exists():
                    raise CorpusError(f"corpus path {source!r} does not exist")
            params = ReindexParameters(
                source=source,
                encoder=encoder,
                format=fmt.value,
                chunk_tokens=chunk_tokens,
                block_documents=block_documents,
                engine=encode_engine.value,
                reencode=reencode,
            )
            job = create_job(engine, "reindex", vars(params), settings.collection)
        name = worker_name()
        claimed = _claimed(engine, job.job_id, name)
        status = execute(claimed, settings, engine, worker=name, show_progress=progress)
    except user_errors() as error:
        fail_with(error)
    except KeyboardInterrupt:
        fail(
            f"interrupted: job {job.job_id} failed and its build was kept; "
            f"`docsim reindex --retry {job.job_id}` resumes it",
            code=130,
        )
    final = get_job(engine, job.job_id)
    typer.echo(
        json.dumps(
            {
                "job_id": final.job_id,
                "status": final.status,
                "index_version": final.published_version,
                "build_version": final.version_id,
                "error": final.error,
            }
        )
    )
    if status != JobStatus.succeeded:
        raise typer.Exit(1)


def _claimed(engine: Engine, job_id: int, name: str) -> JobRow:
    """The job `job_id`, claimed by the worker `name`, or the command's failure: another job
    is running (this one stays queued for a worker)."""
    from docsim.indexer.jobs.queue import claim_job, running_job

    claimed = claim_job(engine, job_id, name)
    if claimed is None:
        running = running_job(engine)
        fail(
            f"job {running.job_id} is running; job {job_id} stays queued for a worker"
            if running is not None
            else f"job {job_id} could not be claimed"
        )
    return claimed


@cli.command()
def worker(data_dir: DataDir = None) -> None:
    """Run queued jobs until stopped (SIGTERM or Ctrl-C: a running job's build is kept and
    its job failed; retrying it resumes the build)."""
    from docsim.indexer.jobs.worker import Worker
    from docsim.indexer.store.db import make_engine, upgrade

    settings = cli_settings(data_dir)
    if settings.db.auto_migrate:
        upgrade(settings.database_url)
    runner = Worker(settings, make_engine(settings.database_url))

    def stop(signum: int, _frame: Any) -> None:
        logger.info("Signal %d: stopping after the current block", signum)
        runner.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    runner.run()
