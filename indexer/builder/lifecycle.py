"""The version a build writes, from start to end: opened (a new `building` row, or a
suspended build taken up again), then published (renamed into place and made active in one
SQL transaction) or abandoned (suspended to resume, or removed). The active version is never
touched before the publishing transaction."""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from docsim.indexer.choices import DEFAULT_COLLECTION
from docsim.indexer.store.manifest import Manifest, write_manifest
from docsim.indexer.store.tables import VersionStatus
from docsim.indexer.store.versions import (
    create_version,
    discard_version,
    fail_version,
    mark_building,
    publish_version,
    suspend_version,
    version_dir_name,
    version_row,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VersionTarget:
    """The version a build writes: its id, its folders, and the blocks a resumed build
    committed before (0 for a fresh build)."""

    version_id: int
    tmp: Path  # `<indexes>/<version>.tmp/`, while building
    final: Path  # `<indexes>/<version>/`, once published
    blocks_done: int


def open_version(
    engine: Engine,
    indexes_dir: Path,
    encoder_name: str,
    fingerprint: str,
    resume: int | None,
    collection: str = DEFAULT_COLLECTION,
) -> VersionTarget:
    """The version to build: the suspended version `resume` when its plan is the same
    (`fingerprint`) and its committed blocks are still there (its row is marked `building`
    again), else a new `building` row (and `resume`, if any, is discarded). Writes no file."""
    blocks_done = 0
    if resume is not None:
        version_id = resume
        tmp = indexes_dir / f"{version_dir_name(version_id)}.tmp"
        blocks_done = _resumable(engine, version_id, fingerprint, tmp)
        if blocks_done:
            mark_building(engine, version_id)
            logger.info("Resuming version %d after %d committed blocks", version_id, blocks_done)
        else:
            logger.info("Version %d cannot be resumed; starting a new build", version_id)
            discard_version(engine, indexes_dir, version_id, "superseded by a fresh build")
    if not blocks_done:
        version_id = create_version(
            engine, encoder_name=encoder_name, path="", collection=collection
        )
    return VersionTarget(
        version_id=version_id,
        tmp=indexes_dir / f"{version_dir_name(version_id)}.tmp",
        final=indexes_dir / version_dir_name(version_id),
        blocks_done=blocks_done,
    )


def _resumable(engine: Engine, version_id: int, fingerprint: str, tmp: Path) -> int:
    """How many committed blocks a suspended build of the same plan has (0: start over)."""
    row = version_row(engine, version_id)
    state = (row.build_state or {}) if row is not None else {}
    if (
        row is None
        or row.status not in (VersionStatus.suspended, VersionStatus.building)
        or state.get("fingerprint") != fingerprint
        or not tmp.is_dir()
    ):
        return 0
    return int(state.get("blocks_done", 0))


def publish(
    engine: Engine,
    indexes_dir: Path,
    target: VersionTarget,
    manifest: Manifest,
    field_types: dict[str, str] | None = None,
) -> None:
    """Write `<version>.tmp/manifest.json`, rename the folder to `<version>/` (the rename
    fsynced), then mark the version ready and active, with the collection's metadata
    `field_types` as the build left them, in one SQL transaction."""
    write_manifest(target.tmp, manifest)
    os.rename(target.tmp, target.final)
    _fsync_dir(indexes_dir)
    publish_version(
        engine,
        target.version_id,
        path=str(target.final.resolve()),
        manifest=manifest,
        field_types=field_types,
    )


def abandon(
    engine: Engine,
    target: VersionTarget,
    error: BaseException,
    *,
    keep: Callable[[BaseException], bool] | None,
    published: bool,
) -> None:
    """After `error` stopped the build: suspend the version and keep its committed blocks
    when `keep(error)` says so (`BuildHooks.keep_on_failure`; never on a full disk), else
    remove its folders and, unless it was published, mark it failed."""
    reason = failure_reason(error)
    logger.error(
        "Build of version %d failed (%s); the active version is unchanged",
        target.version_id,
        reason,
    )
    # a full disk keeps nothing: the space goes back to the served version and the OS
    kept = keep is not None and keep(error) and not disk_full(error)
    if not published and kept and target.tmp.is_dir():
        suspend_version(engine, target.version_id, reason)
        logger.info("Kept the committed blocks of version %d to resume", target.version_id)
        return
    shutil.rmtree(target.tmp, ignore_errors=True)
    if not published:
        shutil.rmtree(target.final, ignore_errors=True)
        try:
            fail_version(engine, target.version_id, reason)
        except DBAPIError as sql_error:
            if not disk_full(error) or not disk_full(sql_error):
                raise
            # deleting the rows needs room in the log too: the next build removes them
            # (`recover_abandoned`), and the caller hears of the full disk, not of this
            logger.error(
                "Version %d stays `building` until the next build: %s", target.version_id, sql_error
            )


def failure_reason(error: BaseException) -> str:
    """What a failed build or job records: the error's type and words, led by "No space left
    on device" when the disk filled (SQLite says only "database or disk is full")."""
    reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if disk_full(error) and "No space left on device" not in reason:
        reason = f"No space left on device ({reason})"
    return reason


def disk_full(error: BaseException | None) -> bool:
    """Whether `error`, or an error it was raised from, is a full disk (ENOSPC)."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        words = str(error)  # FAISS and SQLite say it in words
        if "No space left on device" in words or "database or disk is full" in words:
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
