"""The one writer of a data directory at a time: a build, a document change, or the deletion
of its collection.

Writers of one process queue on a thread lock; processes exclude each other with an OS lock
on `<indexes>/.build.lock` (`flock`, released by the kernel even on SIGKILL). The holder
writes what it is (`build`, `change` or `delete`), its pid and since when into the lock file,
so that a writer refused can say why. A change waits its turn for a bounded time; a build
running is reported at once (it takes minutes), as is a deletion (the collection is gone: 404),
and a build waits for the changes running to end.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from docsim.indexer.errors import (
    BuildRunningError,
    ChangesQueuedError,
    CollectionDeletingError,
    DataDirBusyError,
)

LOCK_FILE = ".build.lock"
Kind = Literal["build", "change", "delete"]
_REFUSING = ("build", "delete")  # holders a writer does not wait for
POLL_SECONDS = 0.01


@dataclass(frozen=True)
class Holder:
    kind: str
    pid: int
    since: float  # time.time()


_locks: dict[Path, threading.Lock] = {}
_holders: dict[Path, Holder] = {}  # this process's holder of each directory
_registry = threading.Lock()


def _thread_lock(indexes_dir: Path) -> threading.Lock:
    with _registry:
        return _locks.setdefault(indexes_dir, threading.Lock())


def _read_holder(fd: int) -> Holder | None:
    try:
        found = json.loads(os.pread(fd, 4096, 0) or b"null")
        return Holder(str(found["kind"]), int(found["pid"]), float(found["since"]))
    except (ValueError, TypeError, KeyError, OSError):
        return None  # written a moment from now, or by an older docsim


def _busy(holder: Holder | None, waited: float) -> DataDirBusyError:
    if holder is not None and holder.kind == "delete":
        return CollectionDeletingError("collection deleted", retry_after=0)
    if holder is not None and holder.kind == "build":
        running = time.time() - holder.since
        return BuildRunningError(
            f"another build is running on this data directory (process {holder.pid}, for "
            f"{running:.0f} s); retry once it has published",
            retry_after=30,
        )
    return ChangesQueuedError(
        f"other document changes held the index for the {waited:.1f} s this one could wait; "
        "retry in a moment",
        retry_after=1,
    )


@contextlib.contextmanager
def hold_data_dir(indexes_dir: Path, kind: Kind, wait_seconds: float) -> Iterator[None]:
    """Be the data directory's one writer for the block, waiting up to `wait_seconds` for
    the writers before it (a build running refuses a change at once).

    Raises:
        BuildRunningError: a build holds it.
        ChangesQueuedError: changes held it for longer than `wait_seconds`.
    """
    indexes_dir = indexes_dir.resolve()
    started = time.monotonic()
    deadline = started + wait_seconds
    local = _thread_lock(indexes_dir)
    while not local.acquire(timeout=POLL_SECONDS):
        holder = _holders.get(indexes_dir)
        if (holder is not None and holder.kind in _REFUSING) or time.monotonic() >= deadline:
            raise _busy(holder, time.monotonic() - started)
    try:
        fd = os.open(indexes_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = _read_holder(fd)
                    if (holder is not None and holder.kind in _REFUSING) or (
                        time.monotonic() >= deadline
                    ):
                        raise _busy(holder, time.monotonic() - started) from None
                    time.sleep(POLL_SECONDS)
            me = Holder(kind, os.getpid(), time.time())
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(vars(me)).encode(), 0)
            _holders[indexes_dir] = me
            try:
                yield
            finally:
                _holders.pop(indexes_dir, None)
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    finally:
        local.release()
