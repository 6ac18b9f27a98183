"""What the service answers, typed, its errors, and the keyword arguments of a search
(`SimilarKeywords`), shared by `Client` and `AsyncClient`. The answers are the wire's own models
(`docsim.protocol`, the ones the service declares its responses with), under the client's
names: `Hit` is `DocumentResult`, `UnitHit` `UnitResult`, `Changed` `DocumentsChanged`,
`Collection` `CollectionOut`, `Explanation` `ExplainResponse`; `Results` and `Job` add
conveniences (iteration, `finished`) and keep the fields a newer server adds. Nothing of the
server is imported."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

import httpx
from pydantic import ConfigDict

from docsim.protocol.answers import (
    CollectionOut,
    DocumentResult,
    DocumentsChanged,
    JobOut,
    SimilarResponse,
    UnitResult,
)
from docsim.protocol.answers import JobAccepted as JobAccepted  # the client's names too
from docsim.protocol.answers import StoredDocument as StoredDocument
from docsim.protocol.choices import Granularity, Method, ScoringMode
from docsim.protocol.explanations import ExplainResponse

Hit = DocumentResult  # a ranked document, with its best paragraph pairs (`matches`)
UnitHit = UnitResult  # a ranked section, paragraph or sentence, with its place in its document
Changed = DocumentsChanged  # what a document change did, and the version and revision
Collection = CollectionOut  # a collection: its own settings, served version, size and keys
Explanation = ExplainResponse  # why `target` matches `source`: every map of the pair
FINISHED = frozenset({"succeeded", "failed", "cancelled"})
# a document to rank against: its text, a JSON document, or a file to upload
Document = str | Mapping[str, Any] | Path


class SimilarKeywords(TypedDict, total=False):
    """The keyword arguments of `Client.similar` and `AsyncClient.similar` (none given: the
    server's default): the fields of the one request model, `docsim.protocol.requests`'s
    `SimilarOptions` and `SimilarRequest`, with the same names and choices (a choice as its
    enum member or its value), and `like` / `unlike` as the client takes documents. The
    server validates them (a newer server may take choices this client does not list);
    `tests/docsim/test_client.py` checks the names against the model's."""

    top_k: int
    method: Method | str
    granularity: Granularity | str
    filter: Mapping[str, Any]
    candidates: Sequence[str]
    exclude: Sequence[str]
    group_by: Literal["document"]
    group_size: int
    matches_per_result: int
    shared_passages: int
    mode: ScoringMode | str
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


class Results(SimilarResponse):
    """`POST /similar`'s answer (`SimilarResponse`), iterable over its results; `query_id`
    names the query for `explain`. Fields a newer server adds are kept in `extra`."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def __iter__(self) -> Iterator[Hit | UnitHit]:  # type: ignore[override]
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def extra(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class Job(JobOut):
    """A reindex job (`JobOut`): `status` is queued, running, succeeded, failed or
    cancelled; `progress` holds done, total, unit, rate, eta_seconds and message. Fields a
    newer server adds are kept in `extra`."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def extra(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class JobFailedError(Exception):
    """The job `wait` waited for ended failed or cancelled (`job` holds its error)."""

    def __init__(self, job: Job) -> None:
        super().__init__(f"job {job.job_id} {job.status}: {job.error or 'no reason given'}")
        self.job = job
