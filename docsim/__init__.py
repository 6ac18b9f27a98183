"""docsim's Python client: `Client` and `AsyncClient` for a running service (`docsim.client`),
and `docsim.local.open_local` for the service in this process over a data directory.

The server's own packages (`app`, `indexer`, `models`, `migrations`) are installed beside it;
`indexer.api` is the indexer's library surface."""

from __future__ import annotations

from docsim.client import (
    AsyncClient,
    Changed,
    Client,
    Collection,
    DocsimError,
    Hit,
    Job,
    JobFailedError,
    Results,
    StoredDocument,
    UnitHit,
)

__all__ = [
    "AsyncClient",
    "Changed",
    "Client",
    "Collection",
    "DocsimError",
    "Hit",
    "Job",
    "JobFailedError",
    "Results",
    "StoredDocument",
    "UnitHit",
]
