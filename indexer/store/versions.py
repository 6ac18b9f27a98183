"""Index versions and every move between their states (`VersionStatus`).

    create -> building --publish--> ready --retire--> retired
                 |  `--suspend--> suspended (a job may resume it: mark_building)
                 `--fail / recover / collect--> failed (rows and files removed)

Publishing flips the active version in one transaction. `recover_abandoned` cleans up builds
whose process died; `collect_garbage` retires superseded versions and discards suspended
builds that can no longer be resumed usefully. It keeps the active version and the newest
`keep_versions - 1` other published versions; an older published version is retired (its rows
dropped, its folder removed) once it has been superseded for `grace_seconds`, so that requests
still running on it can finish.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update

from docsim.indexer.errors import NoActiveIndexError
from docsim.indexer.store.db import insert_one
from docsim.indexer.store.manifest import Manifest
from docsim.indexer.store.tables import (
    DEFAULT_COLLECTION,
    JobStatus,
    VersionStatus,
    active_versions,
    as_utc,
    collections,
    index_versions,
    jobs,
)
from docsim.indexer.store.units import delete_version_rows

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VersionRow:
    version_id: int
    status: VersionStatus
    path: str
    manifest: dict[str, Any] | None
    build_state: dict[str, Any] | None = None
    revision: int = 0
    published_at: datetime | None = None
    collection: str = DEFAULT_COLLECTION

    def __post_init__(self) -> None:  # SQL gives the status as a plain string
        object.__setattr__(self, "status", VersionStatus(self.status))

    def published_manifest(self) -> dict[str, Any]:
        """The manifest, which every published version has (`publish_version` writes it with
        the `ready` status), as SQL gives it back (a plain dict).

        Raises:
            RuntimeError: the version was never published.
        """
        if self.manifest is None:
            raise RuntimeError(f"version {self.version_id} has no manifest: never published")
        return self.manifest


_VERSION_COLUMNS = (
    index_versions.c.version_id,
    index_versions.c.status,
    index_versions.c.path,
    index_versions.c.manifest,
    index_versions.c.build_state,
    index_versions.c.revision,
    index_versions.c.published_at,
    index_versions.c.collection,
)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def create_version(
    engine: Engine, *, encoder_name: str, path: str, collection: str = DEFAULT_COLLECTION
) -> int:
    """Insert a `building` version of `collection` and return its id."""
    with engine.begin() as conn:
        return insert_one(
            conn,
            insert(index_versions).values(
                collection=collection,
                status=VersionStatus.building,
                encoder_name=encoder_name,
                path=path,
                created_at=_now(),
            ),
        )


def publish_version(
    engine: Engine,
    version_id: int,
    *,
    path: str,
    manifest: Manifest,
    field_types: Mapping[str, str] | None = None,
) -> None:
    """Mark the version ready and make it the active one of its collection (whose name is its
    slot in `active_versions`), with the collection's metadata `field_types` as its build
    fixed them (when given), in one transaction."""
    now = _now()
    with engine.begin() as conn:
        slot = conn.execute(
            select(index_versions.c.collection).where(index_versions.c.version_id == version_id)
        ).scalar_one()
        conn.execute(
            update(index_versions)
            .where(index_versions.c.version_id == version_id)
            .values(status=VersionStatus.ready, path=path, manifest=manifest, published_at=now)
        )
        changed = conn.execute(
            update(active_versions)
            .where(active_versions.c.slot == slot)
            .values(version_id=version_id, updated_at=now)
        ).rowcount
        if not changed:
            conn.execute(
                insert(active_versions).values(slot=slot, version_id=version_id, updated_at=now)
            )
        if field_types is not None:
            conn.execute(
                update(collections)
                .where(collections.c.name == slot)
                .values(field_types=dict(field_types))
            )


def version_row(engine: Engine, version_id: int) -> VersionRow | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(*_VERSION_COLUMNS).where(index_versions.c.version_id == version_id)
        ).first()
    return VersionRow(*row) if row is not None else None


def versions(engine: Engine, collection: str | None = None) -> list[VersionRow]:
    """Every version (of `collection`, when given), oldest first."""
    query = select(*_VERSION_COLUMNS).order_by(index_versions.c.version_id)
    if collection is not None:
        query = query.where(index_versions.c.collection == collection)
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [VersionRow(*row) for row in rows]


def set_build_state(conn: Connection, version_id: int, state: dict[str, Any]) -> None:
    conn.execute(
        update(index_versions)
        .where(index_versions.c.version_id == version_id)
        .values(build_state=state)
    )


def set_status(
    engine: Engine, version_id: int, status: VersionStatus, error: str | None = None
) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(index_versions)
            .where(index_versions.c.version_id == version_id)
            .values(status=status, error=error[:4000] if error else None)
        )


def suspend_version(engine: Engine, version_id: int, error: str) -> None:
    """Keep a failed build's committed blocks so that its job can resume it."""
    set_status(engine, version_id, VersionStatus.suspended, error)


def mark_building(engine: Engine, version_id: int) -> None:
    set_status(engine, version_id, VersionStatus.building)


def suspended_versions(engine: Engine, collection: str) -> list[int]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(index_versions.c.version_id).where(
                    index_versions.c.status == VersionStatus.suspended,
                    index_versions.c.collection == collection,
                )
            ).scalars()
        )


def retire_version(engine: Engine, version_id: int) -> None:
    """Drop a superseded version's rows; its row stays, marked `retired`."""
    with engine.begin() as conn:
        delete_version_rows(conn, version_id)
        conn.execute(
            update(index_versions)
            .where(index_versions.c.version_id == version_id)
            .values(status=VersionStatus.retired)
        )


def fail_version(engine: Engine, version_id: int, error: str) -> None:
    """Drop a version's rows and record why it failed."""
    with engine.begin() as conn:
        delete_version_rows(conn, version_id)
        conn.execute(
            update(index_versions)
            .where(index_versions.c.version_id == version_id)
            .values(status=VersionStatus.failed, error=error[:4000])
        )


def abandoned_versions(engine: Engine, collection: str) -> list[VersionRow]:
    """Versions of `collection` still marked `building` (only meaningful while holding its
    build lock)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(*_VERSION_COLUMNS).where(
                index_versions.c.status == VersionStatus.building,
                index_versions.c.collection == collection,
            )
        ).all()
    return [VersionRow(*row) for row in rows]


def active_version(engine: Engine, collection: str = DEFAULT_COLLECTION) -> VersionRow:
    """The published version that serves `collection` (its slot in `active_versions`).

    Raises:
        NoActiveIndexError: nothing has been published in it yet.
    """
    with engine.connect() as conn:
        row = conn.execute(
            select(*_VERSION_COLUMNS)
            .join(active_versions, active_versions.c.version_id == index_versions.c.version_id)
            .where(active_versions.c.slot == collection)
        ).first()
    if row is None:
        where = "" if collection == DEFAULT_COLLECTION else f" in collection {collection!r}"
        raise NoActiveIndexError(f"no index version is active{where} yet: run `docsim index` first")
    return VersionRow(*row)


def active_slots(engine: Engine) -> dict[str, tuple[int, int]]:
    """Every collection's active version and its revision, in one query: what a server's
    watcher compares with what it serves, whatever the number of collections."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                active_versions.c.slot, index_versions.c.version_id, index_versions.c.revision
            ).join(active_versions, active_versions.c.version_id == index_versions.c.version_id)
        ).all()
    return {slot: (version_id, revision) for slot, version_id, revision in rows}


def version_dir_name(version_id: int) -> str:
    return f"{version_id:06d}"


def discard_version(engine: Engine, indexes_dir: Path, version_id: int, reason: str) -> None:
    """Remove an unpublished version's files and rows (a suspended build that cannot resume)."""
    name = version_dir_name(version_id)
    shutil.rmtree(indexes_dir / f"{name}.tmp", ignore_errors=True)
    fail_version(engine, version_id, reason)


def recover_abandoned(
    engine: Engine,
    indexes_dir: Path,
    keep: int | None = None,
    collection: str = DEFAULT_COLLECTION,
) -> list[int]:
    """Clean up `collection`'s builds whose process died (call only while holding its build
    lock). Suspended builds (kept by a failed job to resume) and `keep` are left alone."""
    recovered = []
    kept = {f"{version_dir_name(v)}.tmp" for v in suspended_versions(engine, collection)}
    if keep is not None:
        kept.add(f"{version_dir_name(keep)}.tmp")
    for row in abandoned_versions(engine, collection):
        if row.version_id == keep:
            continue
        name = version_dir_name(row.version_id)
        for leftover in (indexes_dir / f"{name}.tmp", indexes_dir / name):
            shutil.rmtree(leftover, ignore_errors=True)
        fail_version(
            engine, row.version_id, "abandoned: the build process stopped before publishing"
        )
        recovered.append(row.version_id)
        logger.warning("Cleaned up abandoned build of version %d", row.version_id)
    for stray in indexes_dir.glob("*.tmp"):
        if stray.name not in kept:
            shutil.rmtree(stray, ignore_errors=True)
    return recovered


def collect_garbage(
    engine: Engine,
    indexes_dir: Path,
    *,
    keep_versions: int,
    grace_seconds: float,
    collection: str = DEFAULT_COLLECTION,
) -> list[int]:
    """Retire and discard what `collection` no longer needs; returns the versions removed."""
    try:
        active = active_version(engine, collection).version_id
    except NoActiveIndexError:
        return []
    rows = versions(engine, collection)
    published = [
        r
        for r in rows
        if r.published_at is not None and r.status in (VersionStatus.ready, VersionStatus.retired)
    ]
    superseded_at = {
        older.version_id: as_utc(newer.published_at)
        for older, newer in zip(published, published[1:], strict=False)
    }
    ready = [r for r in rows if r.status == VersionStatus.ready and r.version_id != active]
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
                    jobs.c.status.in_((JobStatus.queued, JobStatus.running)),
                    jobs.c.version_id.is_not(None),
                )
            ).scalars()
        )
    for row in rows:
        if (
            row.status == VersionStatus.suspended
            and row.version_id < active
            and row.version_id not in wanted
        ):
            discard_version(
                engine, indexes_dir, row.version_id, "discarded: a newer version was published"
            )
            removed.append(row.version_id)
            logger.info("Discarded suspended build %d", row.version_id)
    return removed
