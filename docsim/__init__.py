"""docsim's Python client: `Client` and `AsyncClient` for a running service (`docsim.client`),
and `docsim.local.open_local` for the service in this process over a data directory.

The server's own packages are its subpackages (`docsim.app`, `docsim.indexer`, `docsim.models`,
`docsim.migrations`: the repository's folders, linked here), loaded only when used;
`docsim.indexer.api` is the indexer's library surface."""

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
