"""A Python client of the docsim service, synchronous (`Client`) and asynchronous
(`AsyncClient`), on httpx. It imports nothing of the server: a notebook talking to a remote
docsim needs neither torch nor FAISS.

    from docsim import Client

    with Client("http://127.0.0.1:8000") as docsim:
        for hit in docsim.similar(document_id="C12", top_k=5).results:
            print(f"{hit.score:.3f}  {hit.document_id}  {hit.title}")

Every route has a method; a client bound to a collection (`Client(url, collection="aila")`,
or `client.in_collection("aila")`) reads and writes that one, else `default`. Answers come
back typed (`Results`, `Hit`, `UnitHit`, `Changed`, `StoredDocument`, `Job`, `Collection`;
`/explain`'s JSON as a dict), and an answer of 4xx or 5xx raises `DocsimError` carrying the
status and the server's message. A document is posted as its text, as a JSON document
(`{"title", "text"}` or `{"title", "sections"}`), or uploaded from a path.
The two clients share the requests and the parsing; only the sending differs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
FINISHED = frozenset({"succeeded", "failed", "cancelled"})
Document = str | Mapping[str, Any] | Path


class DocsimError(Exception):
    """The service answered 4xx or 5xx; `detail` is its message (a 422's list of problems
    joined, each with where it was)."""

    def __init__(self, status_code: int, detail: str, response: httpx.Response) -> None:
        super().__init__(f"{status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.response = response


# --- answers ------------------------------------------------------------------------------
Answer = TypeVar("Answer")


def _build(kind: type[Answer], data: Mapping[str, Any]) -> Answer:
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


class JobFailedError(Exception):
    """The job `wait` waited for ended failed or cancelled (`job` holds its error)."""

    def __init__(self, job: Job) -> None:
        super().__init__(f"job {job.job_id} {job.status}: {job.error or 'no reason given'}")
        self.job = job


def _results(data: Mapping[str, Any]) -> Results:
    unit = data.get("granularity", "document") != "document"
    hits = [_build(UnitHit if unit else Hit, r) for r in data.get("results", [])]
    return _build(Results, {**data, "results": hits})


# --- requests -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Request:
    method: str
    path: str  # of the collection's route; `/collections...` routes are the server's
    options: dict[str, Any] = field(default_factory=dict)  # json, data, files, params
    opened: tuple[Any, ...] = ()  # files to close once sent

    def url(self, collection: str | None) -> str:
        """The path on the server: under `/collections/{collection}` when the client is
        bound to one, else at the root (the collection `default`)."""
        if collection is None or self.path.startswith("/collections"):
            return self.path
        return f"/collections/{quote(collection, safe='')}{self.path}"


def _collection_request(
    name: str,
    encoder: str | None,
    backend: str | None,
    search: Mapping[str, Any] | None,
    write_key: str | None,
    read_key: str | None,
) -> _Request:
    body = {
        "name": name,
        "encoder": encoder,
        "backend": backend,
        "search": dict(search) if search is not None else None,
        "write_key": write_key,
        "read_key": read_key,
    }
    body = {k: v for k, v in body.items() if v is not None}
    return _Request("POST", "/collections", {"json": body})


def _collections(data: Mapping[str, Any]) -> list[Collection]:
    return [_build(Collection, c) for c in data["collections"]]


def _example(example: Document) -> dict[str, Any]:
    """`like` / `unlike`'s form of an example: a string is an indexed id."""
    if isinstance(example, str):
        return {"document_id": example}
    if isinstance(example, Path):
        raise ValueError("`like` and `unlike` take ids or JSON documents, not files")
    return {"document": dict(example)}


def _similar_request(
    document: Document | None,
    document_id: str | None,
    options: Mapping[str, Any],
) -> _Request:
    body = {k: v for k, v in options.items() if v is not None}
    for key in ("like", "unlike"):
        if key in body:
            body[key] = [_example(e) for e in body[key]]
    if "like" in body:
        if document is not None or document_id is not None:
            raise ValueError("give `like`, or `document` / `document_id`, not both")
        return _Request("POST", "/similar", {"json": body})
    if (document is None) == (document_id is None):
        raise ValueError("give exactly one of `document`, `document_id` or `like`")
    if document_id is not None:
        return _Request("POST", "/similar", {"json": {"document_id": document_id, **body}})
    if isinstance(document, Path):
        form = {k: _form_value(v) for k, v in body.items()}
        handle = document.open("rb")
        return _Request(
            "POST",
            "/similar",
            {"data": form, "files": {"file": (document.name, handle)}},
            (handle,),
        )
    assert document is not None
    posted = {"text": document} if isinstance(document, str) else dict(document)
    return _Request("POST", "/similar", {"json": {"document": posted, **body}})


def _form_value(value: Any) -> Any:
    import json

    if isinstance(value, (dict, list)) and not (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    ):
        return json.dumps(value)  # a filter: its JSON text
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, list) else str(value)


def _upload_request(paths: Sequence[Path], document_id: str | None) -> _Request:
    handles = [path.open("rb") for path in paths]
    files = [("file", (path.name, handle)) for path, handle in zip(paths, handles, strict=True)]
    data = {"id": document_id} if document_id is not None else {}
    return _Request("POST", "/documents", {"files": files, "data": data}, tuple(handles))


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        return response.text or response.reason_phrase
    if isinstance(detail, list):  # a 422: [{"loc": [...], "msg": ...}, ...]
        return "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', []))}: {e.get('msg', e)}" for e in detail
        )
    return str(detail)


def _checked(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise DocsimError(response.status_code, _detail(response), response)
    return response


def _settled(job: Job, deadline: float | None, timeout: float | None) -> bool:
    """Whether `wait` is done with `job`: finished and served here. Raises `JobFailedError`
    if it failed or was cancelled, `TimeoutError` once past `deadline`."""
    if job.status in ("failed", "cancelled"):
        raise JobFailedError(job)
    if job.finished and job.served:
        return True
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError(f"job {job.job_id} is still {job.status} after {timeout} s")
    return False


class _Progress:
    """A tqdm bar over a job's progress (done of total, in its unit), when asked."""

    def __init__(self, shown: bool, job_id: int) -> None:
        self.bar = None
        if shown:
            from tqdm import tqdm

            self.bar = tqdm(desc=f"job {job_id}", unit="sentence")

    def update(self, job: Job) -> None:
        if self.bar is None:
            return
        total, done = job.progress.get("total"), job.progress.get("done") or 0
        if total and self.bar.total != total:
            self.bar.total = total
        self.bar.unit = job.progress.get("unit") or self.bar.unit
        self.bar.n = done
        self.bar.set_postfix_str(job.status)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _headers(api_key: str | None) -> dict[str, str]:
    return {"X-API-Key": api_key} if api_key else {}


# --- the clients --------------------------------------------------------------------------
class Client:
    """The service at `url`, over one connection pool; `api_key` for the routes that need
    one (the server's key, or a collection's). Bound to `collection` when given (every
    method then reads and writes that collection), else to `default`; `in_collection`
    gives a client of another collection over the same pool. A context manager (or call
    `close`)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        collection: str | None = None,
        timeout: float = 120.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.http = http or httpx.Client(base_url=url, headers=_headers(api_key), timeout=timeout)
        self.collection = collection

    def in_collection(self, name: str) -> Client:
        """This client, bound to the collection `name` (the same connections: close either)."""
        return Client(collection=name, http=self.http)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _send(self, request: _Request) -> Any:
        url = request.url(self.collection)
        try:
            response = _checked(self.http.request(request.method, url, **request.options))
        finally:
            for handle in request.opened:
                handle.close()
        return response.json() if response.content else None

    # search
    def similar(
        self,
        document: Document | None = None,
        *,
        document_id: str | None = None,
        top_k: int | None = None,
        method: str | None = None,
        granularity: str | None = None,
        filter: Mapping[str, Any] | None = None,
        candidates: Sequence[str] | None = None,
        group_by: str | None = None,
        group_size: int | None = None,
        mode: str | None = None,
        normalize: bool | None = None,
        offset: int | None = None,
        like: Sequence[Document] | None = None,
        unlike: Sequence[Document] | None = None,
    ) -> Results:
        """The collection ranked against `document` (text, a JSON document, or a file as a
        `pathlib.Path`: a string is always text)
        or the indexed `document_id`, or like the documents of `like` and unlike those of
        `unlike` (each an indexed id, a text or a JSON document); the options are
        `POST /similar`'s."""
        options = {
            k: v for k, v in locals().items() if k not in ("self", "document", "document_id")
        }
        return _results(self._send(_similar_request(document, document_id, options)))

    def explain(self, source: str, target: str) -> dict[str, Any]:
        """Why `target` matches `source` (a query_id from `similar`, or an indexed id)."""
        return self._send(
            _Request("GET", "/explain", {"params": {"source": source, "target": target}})
        )

    # documents
    def add(self, *documents: Mapping[str, Any]) -> Changed:
        """Add documents (`{"id", "title", "text" or "sections", "metadata"}`), or replace
        those whose id exists; searchable when this returns."""
        body = {"documents": [dict(d) for d in documents]}
        return _build(Changed, self._send(_Request("POST", "/documents", {"json": body})))

    def upload(self, *paths: str | Path, document_id: str | None = None) -> Changed:
        """Add document files (PDF, Word, HTML, text, Markdown), each id its file name without
        the extension (or `document_id` for one file)."""
        return _build(Changed, self._send(_upload_request([Path(p) for p in paths], document_id)))

    def document(self, document_id: str) -> StoredDocument:
        return _build(
            StoredDocument, self._send(_Request("GET", f"/documents/{quote(document_id, safe='')}"))
        )

    def delete(self, document_id: str) -> Changed:
        return _build(
            Changed, self._send(_Request("DELETE", f"/documents/{quote(document_id, safe='')}"))
        )

    # jobs
    def reindex(self, source: str = "current", **options: Any) -> Job:
        """Queue a rebuild (`POST /jobs/reindex`); `wait` follows it."""
        body = {"source": source, **{k: v for k, v in options.items() if v is not None}}
        return _build(Job, self._send(_Request("POST", "/jobs/reindex", {"json": body})))

    def job(self, job_id: int) -> Job:
        return _build(Job, self._send(_Request("GET", f"/jobs/{job_id}")))

    def jobs(self) -> list[Job]:
        return [_build(Job, j) for j in self._send(_Request("GET", "/jobs"))["jobs"]]

    def cancel(self, job_id: int) -> Job:
        return _build(Job, self._send(_Request("POST", f"/jobs/{job_id}/cancel")))

    def retry(self, job_id: int) -> Job:
        return _build(Job, self._send(_Request("POST", f"/jobs/{job_id}/retry")))

    def wait(
        self,
        job_id: int,
        *,
        timeout: float | None = None,
        poll: float = 0.5,
        progress: bool = False,
    ) -> Job:
        """The job once it finished and this server serves its version, polling every `poll`
        seconds, with a progress bar when `progress`. Raises `JobFailedError` if it failed or
        was cancelled, `TimeoutError` after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = _Progress(progress, job_id)
        try:
            while True:
                job = self.job(job_id)
                bar.update(job)
                if _settled(job, deadline, timeout):
                    return job
                time.sleep(poll)
        finally:
            bar.close()

    # collections
    def create_collection(
        self,
        name: str,
        *,
        encoder: str | None = None,
        backend: str | None = None,
        search: Mapping[str, Any] | None = None,
        write_key: str | None = None,
        read_key: str | None = None,
    ) -> Collection:
        """Create a collection (its settings over the server's, its keys); empty until a
        reindex job of it (`in_collection(name).reindex(...)`) publishes a version."""
        request = _collection_request(name, encoder, backend, search, write_key, read_key)
        return _build(Collection, self._send(request))

    def collections(self) -> list[Collection]:
        """The collections this client's key may read."""
        return _collections(self._send(_Request("GET", "/collections")))

    def delete_collection(self, name: str) -> list[int]:
        """Delete a collection and everything it holds; returns the versions it held."""
        path = f"/collections/{quote(name, safe='')}"
        return self._send(_Request("DELETE", path))["versions"]

    # health
    def health(self) -> dict[str, Any]:
        return self._send(_Request("GET", "/health"))

    def ready(self) -> dict[str, Any]:
        return self._send(_Request("GET", "/ready"))


class AsyncClient:
    """`Client`, asynchronous: every method is a coroutine (`async with AsyncClient(url)`)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        collection: str | None = None,
        timeout: float = 120.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.http = http or httpx.AsyncClient(
            base_url=url, headers=_headers(api_key), timeout=timeout
        )
        self.collection = collection

    def in_collection(self, name: str) -> AsyncClient:
        """This client, bound to the collection `name` (the same connections: close either)."""
        return AsyncClient(collection=name, http=self.http)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.aclose()

    async def _send(self, request: _Request) -> Any:
        url = request.url(self.collection)
        try:
            response = _checked(await self.http.request(request.method, url, **request.options))
        finally:
            for handle in request.opened:
                handle.close()
        return response.json() if response.content else None

    async def similar(
        self,
        document: Document | None = None,
        *,
        document_id: str | None = None,
        top_k: int | None = None,
        method: str | None = None,
        granularity: str | None = None,
        filter: Mapping[str, Any] | None = None,
        candidates: Sequence[str] | None = None,
        group_by: str | None = None,
        group_size: int | None = None,
        mode: str | None = None,
        normalize: bool | None = None,
        offset: int | None = None,
        like: Sequence[Document] | None = None,
        unlike: Sequence[Document] | None = None,
    ) -> Results:
        options = {
            k: v for k, v in locals().items() if k not in ("self", "document", "document_id")
        }
        return _results(await self._send(_similar_request(document, document_id, options)))

    async def explain(self, source: str, target: str) -> dict[str, Any]:
        return await self._send(
            _Request("GET", "/explain", {"params": {"source": source, "target": target}})
        )

    async def add(self, *documents: Mapping[str, Any]) -> Changed:
        body = {"documents": [dict(d) for d in documents]}
        return _build(Changed, await self._send(_Request("POST", "/documents", {"json": body})))

    async def upload(self, *paths: str | Path, document_id: str | None = None) -> Changed:
        return _build(
            Changed, await self._send(_upload_request([Path(p) for p in paths], document_id))
        )

    async def document(self, document_id: str) -> StoredDocument:
        return _build(
            StoredDocument,
            await self._send(_Request("GET", f"/documents/{quote(document_id, safe='')}")),
        )

    async def delete(self, document_id: str) -> Changed:
        return _build(
            Changed,
            await self._send(_Request("DELETE", f"/documents/{quote(document_id, safe='')}")),
        )

    async def reindex(self, source: str = "current", **options: Any) -> Job:
        body = {"source": source, **{k: v for k, v in options.items() if v is not None}}
        return _build(Job, await self._send(_Request("POST", "/jobs/reindex", {"json": body})))

    async def job(self, job_id: int) -> Job:
        return _build(Job, await self._send(_Request("GET", f"/jobs/{job_id}")))

    async def jobs(self) -> list[Job]:
        return [_build(Job, j) for j in (await self._send(_Request("GET", "/jobs")))["jobs"]]

    async def cancel(self, job_id: int) -> Job:
        return _build(Job, await self._send(_Request("POST", f"/jobs/{job_id}/cancel")))

    async def retry(self, job_id: int) -> Job:
        return _build(Job, await self._send(_Request("POST", f"/jobs/{job_id}/retry")))

    async def wait(
        self,
        job_id: int,
        *,
        timeout: float | None = None,
        poll: float = 0.5,
        progress: bool = False,
    ) -> Job:
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = _Progress(progress, job_id)
        try:
            while True:
                job = await self.job(job_id)
                bar.update(job)
                if _settled(job, deadline, timeout):
                    return job
                await asyncio.sleep(poll)
        finally:
            bar.close()

    async def health(self) -> dict[str, Any]:
        return await self._send(_Request("GET", "/health"))

    async def ready(self) -> dict[str, Any]:
        return await self._send(_Request("GET", "/ready"))

    async def create_collection(
        self,
        name: str,
        *,
        encoder: str | None = None,
        backend: str | None = None,
        search: Mapping[str, Any] | None = None,
        write_key: str | None = None,
        read_key: str | None = None,
    ) -> Collection:
        request = _collection_request(name, encoder, backend, search, write_key, read_key)
        return _build(Collection, await self._send(request))

    async def collections(self) -> list[Collection]:
        return _collections(await self._send(_Request("GET", "/collections")))

    async def delete_collection(self, name: str) -> list[int]:
        path = f"/collections/{quote(name, safe='')}"
        return (await self._send(_Request("DELETE", path)))["versions"]
