"""A hook before each batch of an encoder's forward passes, for callers that share one
encoder among concurrent requests.

The caller installs a hook for the block of code that encodes on its thread (`paced`); the
backends call `before_batch` before they start each batch. The hook may wait (to let other
work go first) or raise (to stop work past its deadline): it runs on the encoding thread,
between batches, with no batch of the caller's in flight on its account yet.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

BatchHook = Callable[[int], None]  # called with the rows of the batch about to start

_local = threading.local()


@contextlib.contextmanager
def paced(hook: BatchHook) -> Iterator[None]:
    """Call `hook` before every batch this thread's encoders start within the block."""
    before = getattr(_local, "hook", None)
    _local.hook = hook
    try:
        yield
    finally:
        _local.hook = before


def before_batch(rows: int) -> None:
    """The current thread's hook, if any, for a batch of `rows` rows about to start."""
    hook: BatchHook | None = getattr(_local, "hook", None)
    if hook is not None:
        hook(rows)
