"""`indexer.builder.lifecycle`: what a failed build records."""

from __future__ import annotations

import errno
import sqlite3

from docsim.indexer.builder.lifecycle import disk_full, failure_reason


def test_a_full_disk_is_named_whatever_said_it() -> None:
    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as sql_error:
            raise RuntimeError("storing block 3") from sql_error
    except RuntimeError as error:
        wrapped = error
    assert disk_full(wrapped)
    assert failure_reason(wrapped) == "No space left on device (RuntimeError: storing block 3)"
    full = OSError(errno.ENOSPC, "No space left on device")
    assert failure_reason(full) == "OSError: [Errno 28] No space left on device"  # said once


def test_other_failures_keep_their_words() -> None:
    assert not disk_full(ValueError("bad row"))
    assert failure_reason(ValueError("bad row")) == "ValueError: bad row"
    assert failure_reason(KeyboardInterrupt()) == "KeyboardInterrupt"
