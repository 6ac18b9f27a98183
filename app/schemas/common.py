"""What every answer's builder shares: the time a request took."""

from __future__ import annotations

import time


def took_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()` reading), as responses report."""
    return round((time.perf_counter() - started) * 1000, 2)
