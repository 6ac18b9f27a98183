"""Which revisions of a version running requests still read: their retired rows stay in SQL
until the last such request ends (`Runtime.purge`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from docsim.app.services.state import ServiceState

State = TypeVar("State", bound=ServiceState | None)


class RevisionPins:
    """Counts of the requests answering from each (version, revision)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, current: Callable[[], State]) -> Iterator[State]:
        """The state `current()` gives (taken under the pins' lock, so that `oldest` never
        misses it), pinned for the block."""
        with self._lock:
            state = current()
            key = (state.version_id, state.revision) if state is not None else None
            if key is not None:
                self._counts[key] = self._counts.get(key, 0) + 1
        try:
            yield state
        finally:
            if key is not None:
                with self._lock:
                    self._counts[key] -= 1
                    if not self._counts[key]:
                        del self._counts[key]

    def oldest(self, current: Callable[[], ServiceState | None]) -> tuple[int, int] | None:
        """The served state's version and the oldest revision of it that a request reads
        (the served one when none reads an older one); None when nothing is served or no
        change was applied yet (nothing is retired)."""
        with self._lock:
            state = current()
            if state is None or state.revision == 0:
                return None
            revisions = [r for (v, r) in self._counts if v == state.version_id]
            return state.version_id, min([state.revision, *revisions])
