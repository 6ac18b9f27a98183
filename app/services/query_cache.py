"""The bounded cache of recent `/similar` queries that `/explain?source=<query_id>` reads.

Entries are bounded by total size in bytes (their vectors and text) and by age. The cache
belongs to one loaded index version; when a new version is swapped in, it adopts the old
cache's entries (`adopt`): queries by document id are kept by id, and posted documents are
kept with their vectors when the encoder is the same, their statistics recomputed against the
new version on first use, over the same kind of population as their ranking's.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, replace

from cachetools import TTLCache

from docsim.protocol.filters import Filter
from docsim.search.api import ParagraphStats, Population, Query

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CachedQuery:
    """A query kept for /explain: a posted document's split and vectors (`query`), or only
    the id of an indexed document (`document_id`, its vectors are the index's)."""

    query: Query | None  # None for indexed documents: never a reference into an index
    stats: ParagraphStats | None  # the statistics the ranking normalised with
    normalize: bool
    document_id: str | None = None
    population: Population | None = None  # what `stats` were over
    candidates: tuple[str, ...] | None = None  # the pool, when the ranking had one
    filter: Filter | None = None  # the ranking's filter (a `pool` population may be its set)

    @property
    def nbytes(self) -> int:
        if self.query is None or self.document_id is not None:
            return 256
        tensors = [self.query.sentence_vectors, *self.query.level_vectors.values()]
        return sum(t.element_size() * t.nelement() for t in tensors) + 2 * len(self.query.text)


class QueryCache:
    def __init__(self, max_bytes: int, ttl_seconds: float) -> None:
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()
        self._previous: tuple[QueryCache, bool] | None = None  # the cache this one replaced
        self._entries: TTLCache[str, CachedQuery] | None = (
            TTLCache(
                maxsize=max_bytes,
                ttl=ttl_seconds,
                timer=time.monotonic,
                getsizeof=lambda entry: entry.nbytes,
            )
            if max_bytes > 0
            else None
        )

    @property
    def used_bytes(self) -> int:
        """Bytes the entries hold now."""
        if self._entries is None:
            return 0
        with self._lock:
            return int(self._entries.currsize)

    def put(self, entry: CachedQuery, query_id: str | None = None) -> str:
        """Keep `entry` and return its query id (new unless given; kept while it fits)."""
        query_id = query_id or uuid.uuid4().hex
        if self._entries is None:
            return query_id
        with self._lock:
            try:
                self._entries[query_id] = entry
            except ValueError:  # larger than the whole cache
                logger.warning(
                    "Query %s (%d bytes) exceeds the query cache (%d bytes); not kept",
                    query_id,
                    entry.nbytes,
                    self.max_bytes,
                )
        return query_id

    def get(self, query_id: str) -> CachedQuery | None:
        """The entry, also when a request still running on the replaced version added it
        after the swap (it is then carried over like `adopt` does)."""
        if self._entries is None:
            return None
        with self._lock:
            entry = self._entries.get(query_id)
            previous = self._previous
        if entry is None and previous is not None:
            old, same_encoder = previous
            with old._lock:
                found = old._entries.get(query_id) if old._entries is not None else None
            carried = _carried(found, same_encoder) if found is not None else None
            if carried is not None:
                self.put(carried, query_id)
                return carried
        return entry

    def update(self, query_id: str, entry: CachedQuery) -> None:
        """Replace an entry in place (e.g. with statistics computed later)."""
        if self._entries is None:
            return
        with self._lock:
            if query_id in self._entries:
                self._entries[query_id] = entry

    def adopt(self, old: QueryCache, *, same_encoder: bool) -> int:
        """Carry `old`'s live entries over to this (newer) version; returns how many."""
        if old._entries is None:
            return 0
        with old._lock:
            entries = list(old._entries.items())
            old._previous = None  # one step back is enough; older caches can go
        self._previous = (old, same_encoder)
        kept = 0
        for query_id, entry in entries:
            carried = _carried(entry, same_encoder)
            if carried is not None:
                self.put(carried, query_id)
                kept += 1
        return kept

    def __len__(self) -> int:
        if self._entries is None:
            return 0
        with self._lock:
            return len(self._entries)


def _carried(entry: CachedQuery, same_encoder: bool) -> CachedQuery | None:
    """An older version's entry as the newer version keeps it: by document id, or a posted
    document's vectors when the encoder is the same; statistics are computed again, over the
    same kind of population (`population`, `candidates`)."""
    if entry.document_id is not None:
        return replace(entry, query=None, stats=None)
    if same_encoder and entry.query is not None:
        return replace(entry, stats=None)
    return None
