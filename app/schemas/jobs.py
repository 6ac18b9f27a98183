"""POST /jobs/reindex and GET /jobs."""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import Field

from docsim.indexer.api import CorpusFormat, EngineName, JobRow
from docsim.protocol.answers import JobOut
from docsim.protocol.bodies import RequestModel

# an absolute path at the start of a text or after a space, quote, bracket or '='
_SERVER_PATH = re.compile(r"""(?:(?<=^)|(?<=[\s'"(\[=]))/[^\s'"()\[\],;]+""")


def without_server_paths(text: str | None) -> str | None:
    """A job's error or message as clients see it: the server's file paths in it (of the
    data directory, the encoder, a corpus) replaced by `<path>`; the worker's log keeps them."""
    return _SERVER_PATH.sub("<path>", text) if text is not None else None


class ReindexRequest(RequestModel):
    source: str = Field(
        description="A corpus folder or JSONL file under the allowed roots, or `current` to "
        "re-encode the stored documents of the active version.",
        min_length=1,
        max_length=4096,
    )
    encoder: str | None = Field(
        default=None,
        description="`minilm` or a model directory; default: the active version's encoder "
        "for `current`, else the configured encoder.",
        max_length=4096,
    )
    format: CorpusFormat = CorpusFormat.auto
    chunk_tokens: int | None = Field(default=None, ge=8, le=100_000)
    block_documents: int | None = Field(default=None, ge=1, le=100_000)
    engine: EngineName = Field(
        default=EngineName.local,
        description="Where the encode stage runs: the worker, or Ray Data.",
    )
    reencode: bool = Field(
        default=False,
        description="Encode every document. By default a document the active version holds "
        "unchanged (same id, text and split, with the same encoder and chunk size) keeps its "
        "vectors, and only new and changed documents are encoded.",
    )


def job_out(job: JobRow, served_version: int | None) -> JobOut:
    """The job as the API shows it; `served_version` is the version this process serves."""

    def iso(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment is not None else None

    return JobOut(
        job_id=job.job_id,
        kind=job.kind,
        parameters=job.parameters,
        status=job.status,
        progress={
            "done": job.done,
            "total": job.total,
            "unit": job.unit,
            "rate": job.rate,
            "eta_seconds": job.eta_seconds,
            "message": without_server_paths(job.message),
        },
        error=without_server_paths(job.error),
        cancel_requested=job.cancel_requested,
        worker=job.worker,
        attempts=job.attempts,
        index_version=job.published_version,
        build_version=job.version_id,
        served=job.published_version is not None and job.published_version == served_version,
        created_at=job.created_at.isoformat(),
        started_at=iso(job.started_at),
        heartbeat_at=iso(job.heartbeat_at),
        finished_at=iso(job.finished_at),
    )
