"""Closing the shard actors of swapped-out states, once the requests holding them are done."""

from __future__ import annotations

import threading
from typing import Protocol


class Closable(Protocol):
    def close(self) -> None: ...


class ShardRetirement:
    """Shard actors waiting to be closed, each on a timer."""

    def __init__(self) -> None:
        self._waiting: dict[int, tuple[threading.Timer, Closable]] = {}
        self._lock = threading.Lock()

    def retire(self, shards: Closable, after_seconds: float) -> None:
        """Close `shards` after `after_seconds` (the retire grace), unless `close_all` does
        first."""
        timer = threading.Timer(after_seconds, self._close, args=(shards,))
        timer.daemon = True
        with self._lock:
            self._waiting[id(shards)] = (timer, shards)
        timer.start()

    def close_all(self) -> None:
        """Close every waiting one now."""
        with self._lock:
            waiting, self._waiting = list(self._waiting.values()), {}
        for timer, shards in waiting:
            timer.cancel()
            shards.close()

    def _close(self, shards: Closable) -> None:
        with self._lock:
            if self._waiting.pop(id(shards), None) is None:
                return  # `close_all` closed them
        shards.close()
