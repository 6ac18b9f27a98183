"""What the service answers, one model per shape: `POST /similar` (`SimilarResponse` with its
`DocumentResult`s or `UnitResult`s), the document routes (`DocumentsChanged`,
`StoredDocument`), jobs (`JobOut`), collections (`CollectionOut`), health and readiness, and
refusals (`ErrorAnswer`, a 422's `InvalidAnswer`). `/explain`'s answer is
`docsim.protocol.explanations`. The service builds them from its results (`app.schemas`); the
client reads the answers into them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from docsim.protocol.choices import Granularity, Method


class MatchOut(BaseModel):
    source_paragraph: int
    source_start: int
    source_end: int
    target_paragraph_id: int
    target_start: int
    target_end: int
    score: float
    source_text: str
    target_text: str
    target_page: int | None = Field(
        default=None, description="The target paragraph's page, for PDF documents."
    )
    source_page: int | None = Field(
        default=None, description="The query paragraph's page, for a PDF query."
    )


class SharedPassageOut(BaseModel):
    """A passage both texts hold word for word (case, punctuation and spacing aside)."""

    words: int
    source_start: int = Field(description="Character offsets in the source's `text`.")
    source_end: int
    target_start: int = Field(description="Character offsets in the target's `text`.")
    target_end: int
    text: str = Field(description="The passage as the source has it.")


class DocumentResult(BaseModel):
    document_id: str
    title: str
    score: float
    rank: int
    matches: list[MatchOut]
    shared_passages: list[SharedPassageOut] = Field(
        default_factory=list,
        description="The longest passages the document shares with the query word for word, "
        "at most the request's `shared_passages` (source offsets in the posted text, or in "
        "the indexed query document's).",
    )


class UnitResult(BaseModel):
    unit_id: int
    level: str
    document_id: str
    title: str
    score: float
    rank: int
    start: int
    end: int
    text: str
    section_title: str | None = None


class SimilarResponse(BaseModel):
    query_id: str
    index_version: int
    index_revision: int = Field(
        description="Document changes applied to the version this answer was computed on: "
        "every result and text belongs to that one revision."
    )
    encoder: str
    took_ms: float
    mode: str
    method: Method
    granularity: Granularity
    normalize: bool
    scored_documents: int
    results: list[DocumentResult] | list[UnitResult]
    next_offset: int | None = Field(
        default=None,
        description="The `offset` of the next page; null when this page was the last.",
    )


class DocumentsChanged(BaseModel):
    index_version: int
    revision: int = Field(description="Document changes applied to this version so far.")
    added: list[str] = []
    replaced: list[str] = []
    deleted: list[str] = []
    took_ms: float


class SectionText(BaseModel):
    title: str
    start: int
    end: int


class StoredDocument(BaseModel):
    id: str
    title: str
    text: str
    metadata: dict[str, Any]
    sections: list[SectionText]
    index_version: int


class JobAccepted(BaseModel):
    job_id: int
    status: str


class JobOut(BaseModel):
    job_id: int
    kind: str
    parameters: dict[str, Any]
    status: str = Field(description="queued, running, succeeded, failed or cancelled")
    progress: dict[str, Any] = Field(
        description="done and total (sentences), rate (per second), eta_seconds, message"
    )
    error: str | None
    cancel_requested: bool
    worker: str | None
    attempts: int
    index_version: int | None = Field(
        description="The version this job published (made active); null unless it succeeded."
    )
    build_version: int | None = Field(
        description="The version the job's build created or resumed, live or not (null until "
        "the build starts): a failed job's suspended build, which a retry resumes; a cancelled "
        "job's removed one; equal to index_version once the job succeeded."
    )
    served: bool = Field(
        description="Whether the API process answering serves index_version now. The "
        "embedded worker marks a job succeeded only once its process serves the version; for "
        "a job run by a separate `docsim worker` or `docsim reindex`, poll until true (each "
        "API process swaps on its own; false again once a newer version is served)."
    )
    created_at: str
    started_at: str | None
    heartbeat_at: str | None
    finished_at: str | None


class JobList(BaseModel):
    jobs: list[JobOut]


class CollectionOut(BaseModel):
    name: str
    settings: dict[str, dict[str, Any]] = Field(
        description="What it sets apart from the server's settings, by group."
    )
    created_at: str
    index_version: int | None = Field(
        description="The version this process serves for it (null: none yet)."
    )
    documents: int | None = Field(description="Documents in that version.")
    keys: dict[str, bool] = Field(description="Whether it has a write key and a read key.")
    field_types: dict[str, str] = Field(
        description="Its metadata fields' types, fixed at their first write (empty: none yet). "
        "`mixed` marks a field whose documents disagreed before types were fixed."
    )


class CollectionList(BaseModel):
    collections: list[CollectionOut]


class CollectionDeleted(BaseModel):
    name: str
    versions: list[int] = Field(description="The versions it held, now removed.")


class Health(BaseModel):
    status: str


class ShardsOut(BaseModel):
    """A sharded service's shards, as `/ready` found them: `green` when every one answers
    (a shard that does not makes `/ready` a 503 naming it, and `/metrics` counts it)."""

    health: str = Field(description="`green`: every shard answers.")
    count: int
    nodes: dict[str, int] = Field(description="Shards answering from each Ray node's address.")


class Ready(BaseModel):
    status: str
    index_version: int
    documents: int
    shards: ShardsOut | None = Field(
        default=None, description="On a sharded service: where its shards answer from."
    )


class ErrorAnswer(BaseModel):
    """Every refusal (4xx) and outage (503): one message, naming the setting or the value
    that decided it."""

    detail: str


class Problem(BaseModel, extra="allow"):
    """One thing wrong with a request, as FastAPI words it: where (`loc`: `body`, `query`,
    `path`, then the field's path), what (`msg`) and its kind (`type`)."""

    loc: list[str | int]
    msg: str
    type: str


class InvalidAnswer(BaseModel):
    """A 422: the list of what is wrong with the request's fields (`Problem`s), or one
    message for a rule of the service (a limit, a control character in the URL, a collection
    name, a setting, a path, a file it cannot read)."""

    detail: str | list[Problem]
