from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from docsim.app.api.bodies import json_request_body, strict_json
from docsim.app.api.deps import ApiKey, CollectionDep, EngineDep, JobsKey
from docsim.app.api.openapi import errors
from docsim.app.schemas.jobs import ReindexRequest, job_out
from docsim.app.services import jobs as service
from docsim.indexer.api import get_job, list_jobs, request_cancel, retry_job
from docsim.protocol.answers import JobAccepted, JobList, JobOut

router = APIRouter(prefix="/jobs", tags=["jobs"])
JobId = Annotated[int, Path(ge=1, le=2**31 - 1, description="The job's id.")]


def served_version(collection: CollectionDep) -> Callable[[], int | None]:
    """Reads the version this process serves for the collection (None: nothing) when called:
    after the job's row, so that a job read `succeeded` (set once its version is served
    here) is never shown with the version served before it."""

    def now() -> int | None:
        state = collection.runtime.state
        return state.version_id if state is not None else None

    return now


ServedVersion = Annotated[Callable[[], int | None], Depends(served_version)]


@router.post(
    "/reindex",
    status_code=202,
    response_model=JobAccepted,
    dependencies=[ApiKey],
    openapi_extra=json_request_body(ReindexRequest),
    responses=errors(403),
)
def reindex(
    request: Annotated[ReindexRequest, Depends(strict_json(ReindexRequest))],
    engine: EngineDep,
    collection: CollectionDep,
) -> JobAccepted:
    """Queue a rebuild of the collection (a corpus path or `current`) with an encoder; the
    service keeps answering from the active version and swaps when the new one is published.
    Jobs run one at a time, whatever their collection: a second request waits in the queue."""
    job = service.submit_reindex(engine, request, collection.settings)
    return JobAccepted(job_id=job.job_id, status=job.status)


@router.get("", response_model=JobList, dependencies=[JobsKey])
def jobs(
    engine: EngineDep,
    served: ServedVersion,
    collection: CollectionDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    status: Annotated[
        str | None, Query(pattern="^(queued|running|succeeded|failed|cancelled)$")
    ] = None,
) -> JobList:
    """The collection's jobs, newest first."""
    found = list_jobs(engine, limit, status, collection.name)
    serving = served()  # after the rows
    return JobList(jobs=[job_out(j, serving) for j in found])


@router.get("/{job_id:int}", response_model=JobOut, dependencies=[JobsKey])
def job(
    job_id: JobId, engine: EngineDep, served: ServedVersion, collection: CollectionDep
) -> JobOut:
    """Status and progress: done / total sentences, rate, ETA; the version it published and
    whether this process serves it. Another collection's job is not found here."""
    found = get_job(engine, job_id, collection.name)
    return job_out(found, served())


@router.post(
    "/{job_id:int}/cancel", response_model=JobOut, dependencies=[ApiKey], responses=errors(409)
)
def cancel(
    job_id: JobId, engine: EngineDep, served: ServedVersion, collection: CollectionDep
) -> JobOut:
    """Cancel a queued job, or stop a running one (nothing is published); 409 if finished."""
    get_job(engine, job_id, collection.name)  # the collection's job, or 404
    found = request_cancel(engine, job_id)
    return job_out(found, served())


@router.post(
    "/{job_id:int}/retry", response_model=JobOut, dependencies=[ApiKey], responses=errors(409)
)
def retry(
    job_id: JobId, engine: EngineDep, served: ServedVersion, collection: CollectionDep
) -> JobOut:
    """Queue a failed or cancelled job again; a build its dead worker left is resumed."""
    get_job(engine, job_id, collection.name)  # the collection's job, or 404
    found = retry_job(engine, job_id)
    return job_out(found, served())
