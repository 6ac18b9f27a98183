"""docsim's Python client: `Client` and `AsyncClient` for a running service (`docsim.client`),
and `docsim.local.open_local` for the service in this process over a data directory.

The server's own packages are its subpackages (`docsim.app`, `docsim.search`, `docsim.indexer`,
`docsim.models`, `docsim.migrations`: the repository's folders, linked here), loaded only when
used; `docsim.search.api` and `docsim.indexer.api` are their library surfaces.
`docsim.protocol` holds the wire's shapes, which the service and the client share. The
client's names load on first use too (PEP 562), so that the server's processes, which import
`docsim.app` and the rest, do not import httpx's client for nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docsim.client import (
        AsyncClient,
        Changed,
        Client,
        Collection,
        DocsimError,
        Explanation,
        Hit,
        Job,
        JobAccepted,
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
    "Explanation",
    "Hit",
    "Job",
    "JobAccepted",
    "JobFailedError",
    "Results",
    "StoredDocument",
    "UnitHit",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module("docsim.client"), name)
    globals()[name] = value
    return value
