"""docsim in this process, for notebooks and scripts: `open_local(data_dir)` gives a `Client`
of the service running inside the process, over the data directory, with no server and no
port. Every call goes through the service's own code (routes, validation, the same searcher
and explanations) on an in-process ASGI transport, so an answer is the one `docsim serve`
would give, and the typed answers and errors are the client's.

    from docsim.local import open_local

    with open_local("docsim-data") as docsim:
        docsim.wait(docsim.reindex("/path/to/judgments").job_id, progress=True)
        hits = docsim.similar(document_id="C12", top_k=5)
        why = docsim.explain("C12", hits.results[0].document_id)

The server's packages (torch, FAISS, FastAPI) load when `open_local` is called, not when
`docsim` is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docsim.client import Client


class LocalClient(Client):
    """A `Client` whose service runs in this process; closing it stops the service (its job
    worker after the current block, its watcher threads)."""

    def __init__(self, http: Any, collection: str | None) -> None:
        super().__init__(collection=collection, http=http)
        self._running = http

    def in_collection(self, name: str) -> Client:
        return Client(collection=name, http=self.http)

    def close(self) -> None:
        self._running.__exit__(None, None, None)


def open_local(
    data_dir: str | Path | None = None,
    *,
    collection: str | None = None,
    allowed_roots: list[str | Path] | None = None,
    **settings: Any,
) -> LocalClient:
    """A client of a docsim service over `data_dir` (default: `DOCSIM_DATA_DIR`, else
    `docsim-data`) running in this process, bound to `collection` (default: `default`).

    Reindex jobs may read corpora under `allowed_roots` (default: the file system's root:
    the caller is the one user); `settings` are further service settings by group, e.g.
    `search={"default_method": "sdr"}` or `encoder={"name": "/models/mpnet"}`.
    """
    from fastapi.testclient import TestClient

    from docsim.app.core.settings import ServiceSettings
    from docsim.app.main import create_app

    values: dict[str, Any] = {**settings}
    if data_dir is not None:
        values["data_dir"] = Path(data_dir)
    jobs = dict(values.pop("jobs", {}))
    jobs.setdefault("allowed_roots", [Path(r) for r in allowed_roots or ["/"]])
    values["jobs"] = jobs
    service = ServiceSettings(**values)
    http = TestClient(create_app(service), base_url="http://docsim.local")
    http.__enter__()  # the lifespan: migrations, the collections loaded, the worker started
    return LocalClient(http, collection)
