"""Shards lost with their Ray cluster, placed again once it is back.

An api joins a cluster through Ray Client, whose driver lives on the head: when the head
dies, the shard actors it owns die with it, and the process's connection is gone for good
(`RayShards.connected` is false). Queries that need the shards are 503s until the runtime's
watcher, at one of its ticks, finds the cluster answering again with room for them: the
served state then gets new shards over the same searcher (the loaded version is kept).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from docsim.app.core.settings import ServiceSettings
from docsim.app.services.state import ServiceState, on_shards

logger = logging.getLogger(__name__)


class LostShards:
    """A runtime's served state (`served`), swapped (`swap`) under its reload `lock` for one
    on new shards when the ones it has were lost with their cluster."""

    def __init__(
        self,
        settings: ServiceSettings,
        lock: threading.Lock,
        served: Callable[[], ServiceState | None],
        swap: Callable[[ServiceState], None],
    ) -> None:
        self.settings = settings
        self.lock, self.served, self.swap = lock, served, swap
        self.reason: str | None = None  # why the last try failed (logged once per reason)

    def tick(self) -> None:
        """The watcher's: new shards for the served state if its own were lost and the
        cluster is back with room for them."""
        if not self.lost(self.served()):
            return
        with self.lock:
            state = self.served()  # swapped meanwhile: the new state has its own shards
            new = self.replace(state) if state is not None else None
            if new is not None:
                self.swap(new)

    def lost(self, state: ServiceState | None) -> bool:
        """Whether `state`'s shards were lost with a cluster (the service's own local Ray
        is shut down with the service, never lost)."""
        return (
            state is not None
            and state.shards is not None
            and not state.shards.connected
            and bool(self.settings.ray.address)
        )

    def replace(self, state: ServiceState) -> ServiceState | None:
        """`state` on new shards, or None when its own are not lost, or while the cluster is
        unreachable or has no room (a try waits about 30 s for an unreachable one: Ray
        Client's connection timeout)."""
        if not self.lost(state):
            return None
        started = time.monotonic()
        try:
            shards = on_shards(self.settings, state.searcher)
        except Exception as error:  # noqa: BLE001 - unreachable yet, or no room yet
            reason = f"{type(error).__name__}: {error}"
            log = logger.warning if reason != self.reason else logger.debug
            log("The shards' Ray cluster is not back yet: %s", reason)
            self.reason = reason
            return None
        self.reason = None
        logger.warning(
            "Collection %r: its shards were lost with the Ray cluster, and are placed again "
            "(%.1f s)",
            self.settings.collection,
            time.monotonic() - started,
        )
        return dataclasses.replace(state, shards=shards)
