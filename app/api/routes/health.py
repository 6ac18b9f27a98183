from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from docsim.app.api.deps import EngineDep, StateDep
from docsim.protocol.answers import Health, Ready, ShardsOut

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
def health() -> Health:
    """Liveness: the process answers."""
    return Health(status="ok")


@router.get("/ready", response_model=Ready)
def ready(state: StateDep, engine: EngineDep) -> Ready:
    """Readiness: an index version is loaded, the database answers and, on a sharded
    service, every shard answers (503 naming those that do not, as `/similar` would answer),
    and where they answer from."""
    with engine.connect() as conn:  # OperationalError while the database is down: 503
        conn.execute(text("SELECT 1"))
    shards = None
    if state.shards is not None:
        health = state.shards.check()  # ShardUnavailableError: 503
        shards = ShardsOut(health=health.colour, count=len(health.nodes), nodes=health.per_node())
    return Ready(
        status="ready",
        index_version=state.version_id,
        documents=state.searcher.index.n_documents,
        shards=shards,
    )
