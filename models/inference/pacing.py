"""A hook before each batch of a request's long work (an encoder's forward passes, the
blocks of a sentence scan), for callers that share the CPUs among concurrent requests.

The caller installs a hook for the block of code that works on its thread (`paced`); the
encoder backends call `before_batch` before they start each batch, the compressed sentence
scan (`models.kernels.scan.approximate_best`) before each block of documents, the exact sentence and
paragraph passes (`models.kernels.alignment.sentence_best`,
`models.kernels.scoring.paragraph_similarity`) before each block of sentences, and BM25 every few
thousand query tokens. The hook may wait (to let other work go first) or raise (to stop work past
its deadline): it runs on the working thread, between batches.
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


def current_hook() -> BatchHook | None:
    """The hook installed on this thread, if any: for work handed to another thread, which
    installs it there too (`paced`)."""
    hook: BatchHook | None = getattr(_local, "hook", None)
    return hook


def before_batch(rows: int) -> None:
    """The current thread's hook, if any, for a batch of `rows` rows about to start."""
    hook: BatchHook | None = getattr(_local, "hook", None)
    if hook is not None:
        hook(rows)
