"""Garbage collection of index versions: superseded versions and builds that cannot resume.

Kept: the active version and the newest `keep_versions - 1` other published versions. An
older published version is retired (its rows dropped, its folder removed) once it has been
superseded for `grace_seconds`, so that requests still running on it can finish. Suspended
builds older than the active version can no longer be resumed usefully and are discarded.
"""

from __future__ import annotations

import logging
import shutil
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import Engine, select

from indexer.jobs import QUEUED, RUNNING
from indexer.store import NoActiveIndexError, active_version, fail_version, retire_version, versions
from indexer.tables import as_utc, jobs

logger = logging.getLogger(__name__)


def collect_garbage(
    engine: Engine, indexes_dir: Path, *, keep_versions: int, grace_seconds: float
) -> list[int]:
    """Retire and discard what is no longer needed; returns the versions removed."""
    try:
        active = active_version(engine).version_id
    except NoActiveIndexError:
        return []
    rows = versions(engine)
    published = [r for r in rows if r.published_at is not None and r.status in ("ready", "retired")]
    superseded_at = {
        older.version_id: as_utc(newer.published_at)
        for older, newer in zip(published, published[1:], strict=False)
    }
    ready = [r for r in rows if r.status == "ready" and r.version_id != active]
    keep = {r.version_id for r in ready[::-1][: keep_versions - 1]}
    now = datetime.now(timezone.utc)
    removed = []
    for row in ready:
        since = superseded_at.get(row.version_id)
        if row.version_id in keep or since is None:
            continue
        if (now - since).total_seconds() < grace_seconds:
            continue
        retire_version(engine, row.version_id)
        shutil.rmtree(Path(row.path), ignore_errors=True)
        removed.append(row.version_id)
        logger.info("Retired version %d (superseded at %s)", row.version_id, since.isoformat())
    with engine.connect() as conn:
        wanted = set(
            conn.execute(
                select(jobs.c.version_id).where(
                    jobs.c.status.in_((QUEUED, RUNNING)), jobs.c.version_id.is_not(None)
                )
            ).scalars()
        )
    for row in rows:
        if row.status == "suspended" and row.version_id < active and row.version_id not in wanted:
            shutil.rmtree(indexes_dir / f"{row.version_id:06d}.tmp", ignore_errors=True)
            fail_version(engine, row.version_id, "discarded: a newer version was published")
            removed.append(row.version_id)
            logger.info("Discarded suspended build %d", row.version_id)
    return removed
