from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import StateDep
from app.schemas.health import Health, Ready

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
def health() -> Health:
    """Liveness: the process answers."""
    return Health(status="ok")


@router.get("/ready", response_model=Ready)
def ready(state: StateDep) -> Ready:
    """Readiness: an index version is loaded and, on a sharded service, every shard answers
    (503 otherwise, as `/similar` would answer)."""
    if state.shards is not None:
        state.shards.check()  # ShardUnavailableError: 503
    return Ready(
        status="ready", index_version=state.version_id, documents=state.searcher.index.n_documents
    )
