"""Waiting in tests for something another thread or process does."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(check: Callable[[], bool], seconds: float = 120.0, every: float = 0.1) -> None:
    """Return once `check()` is true; fail the test after `seconds`."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(every)
