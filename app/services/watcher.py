"""The thread that keeps the served state following SQL: it polls the active version and
its revision, and purges retired rows no request reads any more."""

from __future__ import annotations

import threading
from collections.abc import Callable

RETRY_MAX_SECONDS = 30.0  # the longest wait between loads that keep failing


class Watcher:
    """Calls `refresh` then `purge` every `poll_seconds`, at once when woken; after a failure
    (which `refresh` records) it waits twice as long each time, up to `RETRY_MAX_SECONDS`."""

    def __init__(
        self, refresh: Callable[[], object], purge: Callable[[], None], poll_seconds: float
    ) -> None:
        self._refresh = refresh
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
            self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self._refresh()
                self._purge()
                delay = poll
            except Exception:  # recorded by `fail`; try again, less and less often
                delay = min(max(2 * delay, poll), max(poll, RETRY_MAX_SECONDS))
