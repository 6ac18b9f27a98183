"""The threads that keep the served state following SQL: each collection's watcher compares
what it serves with SQL's active version and revision, and purges retired rows no request
reads any more. SQL is read once per interval for all of a server's collections
(`ActiveVersions`), so that polling costs the same with one collection or hundreds."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from sqlalchemy import Engine

from docsim.indexer.api import active_slots

RETRY_MAX_SECONDS = 30.0  # the longest wait between loads that keep failing


class ActiveVersions:
    """Every collection's active `(version_id, revision)` as SQL held it at most `max_age`
    seconds ago: one query answers the watchers of all the collections of a process."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._read_at = -math.inf  # when the query that gave `_slots` started
        self._slots: dict[str, tuple[int, int]] = {}

    def get(self, collection: str, max_age: float) -> tuple[int, int] | None:
        """`collection`'s active version and revision (None: nothing published), from a
        read that started at most `max_age` seconds ago; reads SQL again when older.

        Raises whatever SQL raised."""
        with self._lock:
            started = time.monotonic()
            if started - self._read_at > max_age:
                self._slots = active_slots(self._engine)
                self._read_at = started
            return self._slots.get(collection)


class Watcher:
    """Calls `poll(woken)` then `purge` every `poll_seconds`, at once when woken (`woken` is
    then True: SQL must be read now, not a recent read reused); after a failure (which the
    poll records) it waits twice as long each time, up to `RETRY_MAX_SECONDS`."""

    def __init__(
        self, poll: Callable[[bool], object], purge: Callable[[], None], poll_seconds: float
    ) -> None:
        self._poll = poll
        self._purge = purge
        self.poll_seconds = poll_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="docsim-swap", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        poll = self.poll_seconds
        delay = poll
        while not self._stop.is_set():
            woken = self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self._poll(woken)
                self._purge()
                delay = poll
            except Exception:  # recorded by `fail`; try again, less and less often
                delay = min(max(2 * delay, poll), max(poll, RETRY_MAX_SECONDS))
