"""What the service answers, typed (`Results`, `Hit`, `UnitHit`, `Explanation`, `Changed`,
`StoredDocument`, `Job`, `Collection`), its errors, and what a search may ask
(`SimilarOptions`): one definition each, shared by `Client` and `AsyncClient`. Nothing of the
server is imported."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict, TypeVar

import httpx

FINISHED = frozenset({"succeeded", "failed", "cancelled"})
# a document to rank against: its text, a JSON document, or a file to upload
Document = str | Mapping[str, Any] | Path


class SimilarOptions(TypedDict, total=False):
    """`POST /similar`'s options, as `Client.similar` and `AsyncClient.similar` take them
    (none given: the server's default)."""

    top_k: int
    method: str
    granularity: str
    filter: Mapping[str, Any]
    candidates: Sequence[str]
    group_by: str
    group_size: int
    mode: str
    normalize: bool
    offset: int
    like: Sequence[Document]
    unlike: Sequence[Document]


class DocsimError(Exception):
    """The service answered 4xx or 5xx; `detail` is its message (a 422's list of problems
    joined, each with where it was)."""

    def __init__(self, status_code: int, detail: str, response: httpx.Response) -> None:
        super().__init__(f"{status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.response = response


Answer = TypeVar("Answer")


def build(kind: type[Answer], data: Mapping[str, Any]) -> Answer:
    """`kind` from the JSON fields it declares (the server may add fields: they are kept in
    `extra` where the class has one, else left out)."""
    names = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    known = {k: v for k, v in data.items() if k in names}
    if "extra" in names:
        known["extra"] = {k: v for k, v in data.items() if k not in names}
    return kind(**known)


@dataclass(frozen=True)
class Hit:
    """A ranked document, with its best paragraph pairs (`matches`)."""

    document_id: str
    title: str
    score: float
    rank: int
    matches: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class UnitHit:
    """A ranked section, paragraph or sentence, with its place in its document."""

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


@dataclass(frozen=True)
class Results:
    """`POST /similar`'s answer; `query_id` names the query for `explain`."""

    query_id: str
    index_version: int
    index_revision: int
    encoder: str
    took_ms: float
    mode: str
    method: str
    granularity: str
    normalize: bool
    scored_documents: int
    results: list[Hit] | list[UnitHit]
    next_offset: int | None = None  # the next page's `offset`; None after the last
    extra: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Hit | UnitHit]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)


@dataclass(frozen=True)
class Changed:
    """What a document change did, and the version and revision that hold it."""

    index_version: int
    revision: int
    added: list[str]
    replaced: list[str]
    deleted: list[str]
    took_ms: float


@dataclass(frozen=True)
class StoredDocument:
    id: str
    title: str
    text: str
    metadata: dict[str, Any]
    sections: list[dict[str, Any]]
    index_version: int


@dataclass(frozen=True)
class Job:
    """A reindex job: `status` is queued, running, succeeded, failed or cancelled; `progress`
    holds done, total, unit, rate, eta_seconds and message."""

    job_id: int
    status: str
    kind: str = "reindex"
    parameters: dict[str, Any] = field(default_factory=dict)
    progress: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    index_version: int | None = None
    served: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


@dataclass(frozen=True)
class Collection:
    """A collection: what it sets apart from the server's settings, the version this server
    serves for it (None: none yet) and its size, and which keys it has."""

    name: str
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    created_at: str = ""
    index_version: int | None = None
    documents: int | None = None
    keys: dict[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation:
    """`GET /explain`'s answer: why `target` matches `source`. Each side (`source`,
    `target`) holds its text and its section, paragraph, sentence and chunk maps; `top_pairs`
    the best paragraph pairs with their best sentences; the matrices are source x target."""

    index_version: int
    encoder: str
    took_ms: float
    source: dict[str, Any]
    target: dict[str, Any]
    score: float  # the SDR document score, as /similar ranks with it
    normalized: bool
    document_cosine: float
    statistics: dict[str, Any] | None
    section_matrix: list[list[float]]
    chunk_matrix: list[list[float]]
    paragraph_matrix: dict[str, list[list[float]]]
    alignments: list[dict[str, Any]]
    top_pairs: list[dict[str, Any]]
    chunk_attention: dict[str, list[list[float]]] | None = None  # CoLDE's only
    extra: dict[str, Any] = field(default_factory=dict)


class JobFailedError(Exception):
    """The job `wait` waited for ended failed or cancelled (`job` holds its error)."""

    def __init__(self, job: Job) -> None:
        super().__init__(f"job {job.job_id} {job.status}: {job.error or 'no reason given'}")
        self.job = job


def results(data: Mapping[str, Any]) -> Results:
    unit = data.get("granularity", "document") != "document"
    hits = [build(UnitHit if unit else Hit, r) for r in data.get("results", [])]
    return build(Results, {**data, "results": hits})
