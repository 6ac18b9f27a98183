"""Every route's request and how its answer is read (`Call`): written once, sent by `Client`
(synchronously) and `AsyncClient` (awaited); only the sending differs."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from docsim.client.answers import (
    Changed,
    Collection,
    DocsimError,
    Document,
    Explanation,
    Job,
    JobAccepted,
    JobFailedError,
    Results,
    SimilarKeywords,
    StoredDocument,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
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
) -> Request:
    body = {
        "name": name,
        "encoder": encoder,
        "backend": backend,
        "search": dict(search) if search is not None else None,
        "write_key": write_key,
        "read_key": read_key,
    }
    body = {k: v for k, v in body.items() if v is not None}
    return Request("POST", "/collections", {"json": body})


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
) -> Request:
    body = {k: v for k, v in options.items() if v is not None}
    for key in ("like", "unlike"):
        if key in body:
            body[key] = [_example(e) for e in body[key]]
    if "like" in body:
        if document is not None or document_id is not None:
            raise ValueError("give `like`, or `document` / `document_id`, not both")
        return Request("POST", "/similar", {"json": body})
    if (document is None) == (document_id is None):
        raise ValueError("give exactly one of `document`, `document_id` or `like`")
    if document_id is not None:
        return Request("POST", "/similar", {"json": {"document_id": document_id, **body}})
    if isinstance(document, Path):
        form = {k: _form_value(v) for k, v in body.items()}
        handle = document.open("rb")
        return Request(
            "POST",
            "/similar",
            {"data": form, "files": {"file": (document.name, handle)}},
            (handle,),
        )
    assert document is not None
    posted = {"text": document} if isinstance(document, str) else dict(document)
    return Request("POST", "/similar", {"json": {"document": posted, **body}})


def _form_value(value: Any) -> Any:
    import json
    from enum import Enum

    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, (dict, list)) and not (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    ):
        return json.dumps(value)  # a filter: its JSON text
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, list) else str(value)


def _upload_request(paths: Sequence[Path], document_id: str | None) -> Request:
    handles = [path.open("rb") for path in paths]
    files = [("file", (path.name, handle)) for path, handle in zip(paths, handles, strict=True)]
    data = {"id": document_id} if document_id is not None else {}
    return Request("POST", "/documents", {"files": files, "data": data}, tuple(handles))


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


def checked(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise DocsimError(response.status_code, _detail(response), response)
    return response


def settled(job: Job, deadline: float | None, timeout: float | None) -> bool:
    """Whether `wait` is done with `job`: finished and served here. Raises `JobFailedError`
    if it failed or was cancelled, `TimeoutError` once past `deadline`."""
    if job.status in ("failed", "cancelled"):
        raise JobFailedError(job)
    if job.finished and job.served:
        return True
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError(f"job {job.job_id} is still {job.status} after {timeout} s")
    return False


class Progress:
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


def headers(api_key: str | None) -> dict[str, str]:
    return {"X-API-Key": api_key} if api_key else {}


@dataclass(frozen=True)
class Call(Generic[T]):
    """One route's request and the reading of its JSON answer."""

    request: Request
    parse: Callable[[Any], T]


def _as_is(data: Any) -> Any:
    return data


def similar(
    document: Document | None, document_id: str | None, options: SimilarKeywords
) -> Call[Results]:
    unknown = set(options) - set(SimilarKeywords.__annotations__)
    if unknown:
        raise TypeError(f"similar() got unexpected options {sorted(unknown)}")
    return Call(_similar_request(document, document_id, dict(options)), Results.model_validate)


def explain(source: str, target: str) -> Call[Explanation]:
    params = {"source": source, "target": target}
    return Call(Request("GET", "/explain", {"params": params}), Explanation.model_validate)


def add(documents: Sequence[Mapping[str, Any]]) -> Call[Changed]:
    body = {"documents": [dict(d) for d in documents]}
    return Call(Request("POST", "/documents", {"json": body}), Changed.model_validate)


def upload(paths: Sequence[str | Path], document_id: str | None) -> Call[Changed]:
    request = _upload_request([Path(p) for p in paths], document_id)
    return Call(request, Changed.model_validate)


def document(document_id: str) -> Call[StoredDocument]:
    path = f"/documents/{quote(document_id, safe='')}"
    return Call(Request("GET", path), StoredDocument.model_validate)


def delete(document_id: str) -> Call[Changed]:
    path = f"/documents/{quote(document_id, safe='')}"
    return Call(Request("DELETE", path), Changed.model_validate)


def reindex(source: str, options: Mapping[str, Any]) -> Call[JobAccepted]:
    body = {"source": source, **{k: v for k, v in options.items() if v is not None}}
    return Call(Request("POST", "/jobs/reindex", {"json": body}), JobAccepted.model_validate)


def job(job_id: int, action: str = "") -> Call[Job]:
    """`GET /jobs/{job_id}`, or with `action` (`cancel`, `retry`) its POST."""
    method, path = ("POST", f"/jobs/{job_id}/{action}") if action else ("GET", f"/jobs/{job_id}")
    return Call(Request(method, path), Job.model_validate)


def jobs() -> Call[list[Job]]:
    return Call(Request("GET", "/jobs"), lambda d: [Job.model_validate(j) for j in d["jobs"]])


def create_collection(name: str, options: Mapping[str, Any]) -> Call[Collection]:
    request = _collection_request(name, **options)
    return Call(request, Collection.model_validate)


def collections() -> Call[list[Collection]]:
    return Call(
        Request("GET", "/collections"),
        lambda d: [Collection.model_validate(c) for c in d["collections"]],
    )


def delete_collection(name: str) -> Call[list[int]]:
    return Call(Request("DELETE", f"/collections/{quote(name, safe='')}"), lambda d: d["versions"])


def health(route: str = "/health") -> Call[dict[str, Any]]:
    """`GET /health`, or `/ready`."""
    return Call(Request("GET", route), _as_is)
