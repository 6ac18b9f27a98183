"""Loading what the service needs to answer: the active version, its encoder, a searcher."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from docsim.app.core.settings import ServiceSettings
from docsim.app.services.query_cache import QueryCache
from docsim.indexer.api import DocumentChange
from docsim.search.api import Searcher, open_searcher, serve_on_shards


@dataclass
class ServiceState:
    searcher: Searcher
    version_id: int
    encoder_name: str
    queries: QueryCache  # recent /similar queries of this version, for /explain
    revision: int = 0  # document changes applied to the version when it was loaded
    shards: Any = None  # the Ray shard actors scoring for it (`RayShards`), when sharded


def load_state(
    settings: ServiceSettings, engine: Engine, make_room: Callable[[], None] | None = None
) -> ServiceState:
    """Load the active version and a searcher over it (see `open_searcher`), warmed (its
    default methods' BM25 postings built: the first request would wait seconds for them), on
    shards when configured (`make_room`: see `on_shards`)."""
    searcher = open_searcher(settings, engine, sharded=settings.shards.count > 0)
    searcher.warm()
    return ServiceState(
        shards=on_shards(settings, searcher, make_room),
        searcher=searcher,
        version_id=searcher.index.version_id,
        encoder_name=searcher.encoder.identity().get("display_name") or searcher.encoder.name,
        queries=QueryCache(settings.api.query_cache_bytes, settings.api.query_cache_ttl_seconds),
        revision=searcher.index.revision,
    )


def on_shards(
    settings: ServiceSettings, searcher: Searcher, make_room: Callable[[], None] | None = None
) -> Any:
    """The shard actors the searcher scores on (`DOCSIM_SHARDS__COUNT`), or None.
    `make_room` closes the serving shards, for a cluster without room for two versions'."""
    if settings.shards.count == 0:
        return None
    return serve_on_shards(settings, searcher, make_room)


def with_change(
    settings: ServiceSettings,
    state: ServiceState,
    change: DocumentChange,
    engine: Engine,
    make_room: Callable[[], None] | None = None,
) -> ServiceState:
    """`state` with a committed document change applied, copy on write: the index and the
    searcher carry over what the change did not touch (`LoadedIndex.with_changes`,
    `Searcher.with_changes`), on new shards when sharded; the recent queries carry over."""
    index = state.searcher.index.with_changes(
        engine, change.removed_ids, change.added_units, change.revision
    )
    searcher = state.searcher.with_changes(index)
    changed = ServiceState(
        searcher=searcher,
        shards=on_shards(settings, searcher, make_room),
        version_id=state.version_id,
        encoder_name=state.encoder_name,
        queries=QueryCache(settings.api.query_cache_bytes, settings.api.query_cache_ttl_seconds),
        revision=change.revision,
    )
    changed.queries.adopt(state.queries, same_encoder=True)
    return changed
