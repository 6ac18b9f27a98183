"""A Python client of the docsim service, synchronous (`Client`) and asynchronous
(`AsyncClient`), on httpx. It imports nothing of the server: a notebook talking to a remote
docsim needs neither torch nor FAISS.

    from docsim import Client

    with Client("http://127.0.0.1:8000") as docsim:
        for hit in docsim.similar(document_id="C12", top_k=5).results:
            print(f"{hit.score:.3f}  {hit.document_id}  {hit.title}")

Every route has a method; a client bound to a collection (`Client(url, collection="aila")`,
or `client.in_collection("aila")`) reads and writes that one, else `default`. Answers come
back typed as the wire's models, the ones the service declares its answers with
(`docsim.protocol`; the client's names in `docsim.client.answers`: `Results`, `Hit`,
`UnitHit`, `Changed`, `StoredDocument`, `JobAccepted`, `Job`, `Collection`, `Explanation`),
and an answer of 4xx or
5xx raises `DocsimError` carrying the status and the server's message. A document is posted
as its text, as a JSON document (`{"title", "text"}` or `{"title", "sections"}`), or uploaded
from a file given as a `pathlib.Path` (a string is always text).

Each route's request and the reading of its answer are written once (`docsim.client.calls`);
the two clients only send them, one waiting, one awaiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, Unpack

import httpx

from docsim.client import calls
from docsim.client.answers import (
    Changed,
    Collection,
    DocsimError,
    Document,
    Explanation,
    Hit,
    Job,
    JobAccepted,
    JobFailedError,
    Results,
    SimilarKeywords,
    StoredDocument,
    UnitHit,
)
from docsim.client.calls import Call, Progress, headers, settled

__all__ = [
    "AsyncClient",
    "Changed",
    "Client",
    "Collection",
    "DocsimError",
    "Document",
    "Explanation",
    "Hit",
    "Job",
    "JobAccepted",
    "JobFailedError",
    "Results",
    "SimilarKeywords",
    "StoredDocument",
    "UnitHit",
]

DEFAULT_URL = "http://127.0.0.1:8000"
T = TypeVar("T")


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
        self.http = http or httpx.Client(base_url=url, headers=headers(api_key), timeout=timeout)
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

    def _run(self, call: Call[T]) -> T:
        request = call.request
        try:
            response = calls.checked(
                self.http.request(request.method, request.url(self.collection), **request.options)
            )
        finally:
            for handle in request.opened:
                handle.close()
        return call.parse(response.json() if response.content else None)

    # search
    def similar(
        self,
        document: Document | None = None,
        *,
        document_id: str | None = None,
        **options: Unpack[SimilarKeywords],
    ) -> Results:
        """The collection ranked against `document` (text, a JSON document, or a file as a
        `pathlib.Path`: a string is always text) or the indexed `document_id`, or like the
        documents of `like` and unlike those of `unlike` (each an indexed id, a text or a
        JSON document); the options (`SimilarKeywords`) are `POST /similar`'s."""
        return self._run(calls.similar(document, document_id, options))

    def explain(self, source: str, target: str) -> Explanation:
        """Why `target` matches `source` (a query_id from `similar`, or an indexed id)."""
        return self._run(calls.explain(source, target))

    # documents
    def add(self, *documents: Mapping[str, Any]) -> Changed:
        """Add documents (`{"id", "title", "text" or "sections", "metadata"}`), or replace
        those whose id exists; searchable when this returns."""
        return self._run(calls.add(documents))

    def upload(self, *paths: str | Path, document_id: str | None = None) -> Changed:
        """Add document files (PDF, Word, HTML, text, Markdown), each id its file name without
        the extension (or `document_id` for one file)."""
        return self._run(calls.upload(paths, document_id))

    def document(self, document_id: str) -> StoredDocument:
        return self._run(calls.document(document_id))

    def delete(self, document_id: str) -> Changed:
        return self._run(calls.delete(document_id))

    # jobs
    def reindex(self, source: str = "current", **options: Any) -> JobAccepted:
        """Queue a rebuild (`POST /jobs/reindex`); `wait` follows it."""
        return self._run(calls.reindex(source, options))

    def job(self, job_id: int) -> Job:
        return self._run(calls.job(job_id))

    def jobs(self) -> list[Job]:
        return self._run(calls.jobs())

    def cancel(self, job_id: int) -> Job:
        return self._run(calls.job(job_id, "cancel"))

    def retry(self, job_id: int) -> Job:
        return self._run(calls.job(job_id, "retry"))

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
        bar = Progress(progress, job_id)
        try:
            while True:
                job = self.job(job_id)
                bar.update(job)
                if settled(job, deadline, timeout):
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
        """Create a collection (its settings over the server's, its keys); it takes
        documents at once (`in_collection(name).add(...)`) or a reindex job."""
        options = {"encoder": encoder, "backend": backend, "search": search}
        keys = {"write_key": write_key, "read_key": read_key}
        return self._run(calls.create_collection(name, {**options, **keys}))

    def collections(self) -> list[Collection]:
        """The collections this client's key may read."""
        return self._run(calls.collections())

    def delete_collection(self, name: str) -> list[int]:
        """Delete a collection and everything it holds; returns the versions it held."""
        return self._run(calls.delete_collection(name))

    # health
    def health(self) -> dict[str, Any]:
        return self._run(calls.health())

    def ready(self) -> dict[str, Any]:
        return self._run(calls.health("/ready"))


class AsyncClient:
    """`Client`, asynchronous: every method is a coroutine (`async with AsyncClient(url)`),
    sending the same calls (`docsim.client.calls`)."""

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
            base_url=url, headers=headers(api_key), timeout=timeout
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

    async def _run(self, call: Call[T]) -> T:
        request = call.request
        url = request.url(self.collection)
        try:
            response = calls.checked(
                await self.http.request(request.method, url, **request.options)
            )
        finally:
            for handle in request.opened:
                handle.close()
        return call.parse(response.json() if response.content else None)

    async def similar(
        self,
        document: Document | None = None,
        *,
        document_id: str | None = None,
        **options: Unpack[SimilarKeywords],
    ) -> Results:
        return await self._run(calls.similar(document, document_id, options))

    async def explain(self, source: str, target: str) -> Explanation:
        return await self._run(calls.explain(source, target))

    async def add(self, *documents: Mapping[str, Any]) -> Changed:
        return await self._run(calls.add(documents))

    async def upload(self, *paths: str | Path, document_id: str | None = None) -> Changed:
        return await self._run(calls.upload(paths, document_id))

    async def document(self, document_id: str) -> StoredDocument:
        return await self._run(calls.document(document_id))

    async def delete(self, document_id: str) -> Changed:
        return await self._run(calls.delete(document_id))

    async def reindex(self, source: str = "current", **options: Any) -> JobAccepted:
        return await self._run(calls.reindex(source, options))

    async def job(self, job_id: int) -> Job:
        return await self._run(calls.job(job_id))

    async def jobs(self) -> list[Job]:
        return await self._run(calls.jobs())

    async def cancel(self, job_id: int) -> Job:
        return await self._run(calls.job(job_id, "cancel"))

    async def retry(self, job_id: int) -> Job:
        return await self._run(calls.job(job_id, "retry"))

    async def wait(
        self,
        job_id: int,
        *,
        timeout: float | None = None,
        poll: float = 0.5,
        progress: bool = False,
    ) -> Job:
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = Progress(progress, job_id)
        try:
            while True:
                job = await self.job(job_id)
                bar.update(job)
                if settled(job, deadline, timeout):
                    return job
                await asyncio.sleep(poll)
        finally:
            bar.close()

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
        options = {"encoder": encoder, "backend": backend, "search": search}
        keys = {"write_key": write_key, "read_key": read_key}
        return await self._run(calls.create_collection(name, {**options, **keys}))

    async def collections(self) -> list[Collection]:
        return await self._run(calls.collections())

    async def delete_collection(self, name: str) -> list[int]:
        return await self._run(calls.delete_collection(name))

    async def health(self) -> dict[str, Any]:
        return await self._run(calls.health())

    async def ready(self) -> dict[str, Any]:
        return await self._run(calls.health("/ready"))
