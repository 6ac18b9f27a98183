"""The collections of one database and data directory: create, read, list, delete.

A collection is a name, the settings it sets apart from the server's (`SETTING_GROUPS`:
its encoder, index layout and search options, as a partial dict of each group, which
`indexer.settings.collection_settings` lays over the server's), and the
SHA-256 digests of its API keys. Its versions and jobs carry its name; its active version is
its slot in `active_versions`; its files live in `Settings.indexes_dir`. The collection
`default` exists from the first migration on and cannot be deleted.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, delete, exists, insert, select, update
from sqlalchemy.exc import IntegrityError

from docsim.indexer.choices import COLLECTION_NAME_PATTERN, DEFAULT_COLLECTION
from docsim.indexer.errors import (
    CollectionConflictError,
    CollectionNameError,
    CollectionNotFoundError,
)
from docsim.indexer.store.tables import (
    JobStatus,
    VersionStatus,
    active_versions,
    as_utc,
    collections,
    documents,
    index_versions,
    jobs,
)
from docsim.indexer.store.units import delete_version_rows
from docsim.indexer.text.field_types import FieldType, infer_field_types

logger = logging.getLogger(__name__)

SETTING_GROUPS = ("encoder", "index", "search")  # what a collection may set apart


@dataclass(frozen=True)
class CollectionRow:
    name: str
    settings: dict[str, dict[str, Any]]  # group -> the fields it sets apart
    write_key_sha256: str | None
    read_key_sha256: str | None
    created_at: datetime
    field_types: dict[str, str] | None = None  # field -> FieldType value; None: no write yet

    def opens(self, key: str | None, *, write: bool) -> bool:
        """Whether `key` is one of this collection's keys that allows the access: its write
        key for anything, its read key for reading. No key of its own: False."""
        if key is None:
            return False
        digest = key_digest(key)
        wanted = [self.write_key_sha256] + ([] if write else [self.read_key_sha256])
        return any(w is not None and secrets.compare_digest(digest, w) for w in wanted)


def key_digest(key: str) -> str:
    """The SHA-256 digest (hex) stored for an API key: keys are random, long and compared
    whole, so a fast digest is what an attacker holding the database would face."""
    return hashlib.sha256(key.encode()).hexdigest()


def check_collection_name(name: str) -> str:
    """`name`, when it is a valid collection name.

    Raises:
        CollectionNameError: it is not.
    """
    if not re.fullmatch(COLLECTION_NAME_PATTERN, name):
        raise CollectionNameError(
            f"{name!r} is not a valid collection name: 1 to 64 characters of a-z, 0-9, `_` "
            "and `-`, starting with a letter or digit"
        )
    return name


def _row(values: Any) -> CollectionRow:
    mapping = dict(values._mapping)
    mapping["created_at"] = as_utc(mapping["created_at"])
    return CollectionRow(**mapping)


def create_collection(
    engine: Engine,
    name: str,
    settings: dict[str, dict[str, Any]] | None = None,
    *,
    write_key: str | None = None,
    read_key: str | None = None,
    field_types: Mapping[str, FieldType] | None = None,
) -> CollectionRow:
    """Create the collection `name` with the settings it sets apart (already validated:
    `indexer.settings.with_groups`) and the metadata field types it declares (the others are
    fixed by their first write).

    Raises:
        CollectionNameError: not a valid name.
        CollectionConflictError: it exists already.
    """
    check_collection_name(name)
    unknown = set(settings or {}) - set(SETTING_GROUPS)
    if unknown:
        raise ValueError(f"collections set apart only {SETTING_GROUPS}, not {sorted(unknown)}")
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(collections).values(
                    name=name,
                    settings=settings or {},
                    write_key_sha256=key_digest(write_key) if write_key else None,
                    read_key_sha256=key_digest(read_key) if read_key else None,
                    created_at=datetime.now(timezone.utc),
                    field_types=_stored(field_types) if field_types is not None else None,
                )
            )
    except IntegrityError as error:
        raise CollectionConflictError(f"the collection {name!r} exists already") from error
    logger.info("Created collection %r", name)
    return get_collection(engine, name)


def _stored(types: Mapping[str, FieldType]) -> dict[str, str]:
    return {name: FieldType(kind).value for name, kind in sorted(types.items())}


def write_field_types(conn: Connection, name: str, version_id: int) -> dict[str, FieldType]:
    """The metadata field types a write to the collection `name` must keep: those stored, or,
    where none are (documents written before types were fixed), those that the live documents
    of its version `version_id` agree on (`infer_field_types`)."""
    stored = conn.execute(
        select(collections.c.field_types).where(collections.c.name == name)
    ).scalar_one_or_none()
    if stored is not None:
        return {field: FieldType(kind) for field, kind in stored.items()}
    rows = conn.execute(
        select(documents.c.metadata).where(
            documents.c.version_id == version_id, documents.c.retired_revision.is_(None)
        )
    )
    types, conflicts = infer_field_types(row[0] or {} for row in rows)
    for field in conflicts:
        logger.warning(
            "Collection %r: metadata field %r holds values of several types; it stays mixed",
            name,
            field,
        )
    return types


def has_field_types(conn: Connection, name: str) -> bool:
    """Whether the collection `name` has stored its field types yet."""
    stored = select(collections.c.field_types).where(collections.c.name == name)
    return conn.execute(stored).scalar_one_or_none() is not None


def store_field_types(conn: Connection, name: str, types: Mapping[str, FieldType]) -> None:
    conn.execute(
        update(collections).where(collections.c.name == name).values(field_types=_stored(types))
    )


def get_collection(engine: Engine, name: str) -> CollectionRow:
    """The collection `name`.

    Raises:
        CollectionNotFoundError: there is none.
    """
    with engine.connect() as conn:
        row = conn.execute(select(collections).where(collections.c.name == name)).first()
    if row is None:
        raise CollectionNotFoundError(f"the collection {name!r} does not exist")
    return _row(row)


def list_collections(engine: Engine) -> list[CollectionRow]:
    """Every collection, by name."""
    with engine.connect() as conn:
        rows = conn.execute(select(collections).order_by(collections.c.name)).all()
    return [_row(r) for r in rows]


def delete_collection(engine: Engine, name: str, indexes_dir: Path) -> list[int]:
    """Delete the collection `name`: its row, its jobs, its versions' rows (kept as
    `retired` rows: version ids are never given twice) and its folder `indexes_dir`.
    Returns the versions it held. Requests still running on a loaded version finish on its
    memory-mapped files (unlinked files stay readable while open).

    Raises:
        CollectionConflictError: `default`, or a job of it is running (cancel it first).
        CollectionNotFoundError: there is none.
    """
    if name == DEFAULT_COLLECTION:
        raise CollectionConflictError("the collection 'default' cannot be deleted")
    with engine.begin() as conn:
        if (
            conn.execute(select(collections.c.name).where(collections.c.name == name)).first()
            is None
        ):
            raise CollectionNotFoundError(f"the collection {name!r} does not exist")
        running = exists().where(jobs.c.collection == name, jobs.c.status == JobStatus.running)
        if conn.execute(select(running)).scalar():
            raise CollectionConflictError(
                f"a job of the collection {name!r} is running: cancel it, then delete"
            )
        held = list(
            conn.execute(
                select(index_versions.c.version_id).where(index_versions.c.collection == name)
            ).scalars()
        )
        conn.execute(delete(active_versions).where(active_versions.c.slot == name))
        conn.execute(delete(jobs).where(jobs.c.collection == name))
        for version_id in held:
            delete_version_rows(conn, version_id)
        conn.execute(
            update(index_versions)
            .where(index_versions.c.collection == name)
            .values(status=VersionStatus.retired)
        )
        conn.execute(delete(collections).where(collections.c.name == name))
    shutil.rmtree(indexes_dir, ignore_errors=True)
    logger.info("Deleted collection %r (versions %s)", name, held)
    return held
