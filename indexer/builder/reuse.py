"""Re-indexing what changed: a build stores again, instead of encoding, the vectors of every
document the active version holds unchanged.

The whole version must have been encoded as this build would encode it: the same weights,
configuration, pooling and chunk vectors (`Encoder.identity`, less its names), on the same
backend, with the same chunk size. An OpenVINO build then runs on the active version's export
(`<version>/encoder/`, calibrated when that version, or the one before it, was built), not on a
new calibration: the new documents' vectors come from the very model of the kept ones. Each
document is then kept when the version holds a live document of its external id whose content
hash (its text and its split) is the new one's (`indexer.store.kept_vectors`); its rows are
written anew, with the new version's ids, as for any document.

`index.reuse_vectors = false` (or `docsim index --reencode`) encodes everything, on a fresh
calibration when the cache holds no export.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from docsim.indexer.errors import CorruptFileError, NoActiveIndexError
from docsim.indexer.settings import Settings
from docsim.indexer.store.kept_vectors import KeptVectors
from docsim.indexer.store.manifest import BackendEntry
from docsim.indexer.store.stored_rows import RowFormat
from docsim.indexer.store.versions import VersionRow, active_version
from docsim.models.encoders.encoder import Encoder, OpenVinoExportable
from docsim.models.errors import BackendUnavailableError
from docsim.models.inference.backends import BUILD_SHAPE_CACHE_CAPACITY, OPENVINO_BACKENDS, TORCH

logger = logging.getLogger(__name__)

# identity fields that name an encoder without changing its vectors
NAMING_FIELDS = frozenset({"name", "source", "display_name", "backend"})


def same_vectors(recorded: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether two encoder identities (`Encoder.identity`, the first from a manifest) give the
    same vectors on the same backend: every field but the names, and known weights."""

    def described(identity: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in identity.items() if k not in NAMING_FIELDS}

    return bool(current.get("checkpoint_sha256")) and described(recorded) == described(current)


@dataclass
class Reuse:
    """The active version a build reuses vectors from, and what it reused."""

    version_id: int
    kept: KeptVectors
    documents: int = 0
    sentences: int = 0
    encoded_sentences: int = 0
    notes: list[str] = field(default_factory=list)

    def record(self) -> dict[str, int]:
        """The manifest's `build.reused`."""
        return {
            "from_version": self.version_id,
            "documents": self.documents,
            "sentences": self.sentences,
            "encoded_sentences": self.encoded_sentences,
        }


def previous_version(
    settings: Settings, engine: Engine, encoder: Encoder, capacity: int
) -> VersionRow | None:
    """The collection's active version when its vectors can be reused by this build (before
    the backend is chosen: the backend is checked by `open_reuse`); else None."""
    if not settings.index.reuse_vectors:
        return None
    try:
        version = active_version(engine, settings.collection)
    except NoActiveIndexError:
        return None
    manifest = version.published_manifest()
    if manifest.get("chunk_tokens") != capacity:
        logger.info(
            "Encoding every document: the chunk size differs from version %d's", version.version_id
        )
        return None
    if not same_vectors(manifest["encoder"], encoder.identity()):
        logger.info(
            "Encoding every document: the encoder differs from version %d's", version.version_id
        )
        return None
    return version


def previous_backend(
    settings: Settings, encoder: Encoder, version: VersionRow, backend: str
) -> BackendEntry | None:
    """Put `encoder` on `version`'s own OpenVINO export when this build runs on that backend;
    the manifest's `backend` record, or None (torch, or the version has no export: the build
    prepares its backend as usual)."""
    recorded = version.published_manifest().get("backend") or {"name": TORCH}
    if backend not in OPENVINO_BACKENDS or recorded["name"] != backend or not recorded.get("dir"):
        return None
    assert isinstance(encoder, OpenVinoExportable)
    export = Path(version.path) / recorded["dir"]
    try:
        encoder.use_openvino(
            export, streams=settings.encoder.streams, shape_cache=BUILD_SHAPE_CACHE_CAPACITY
        )
    except BackendUnavailableError as error:
        logger.info("Not reusing version %d's export (%s)", version.version_id, error)
        return None
    logger.info("Encoding on version %d's %s export %s", version.version_id, backend, export)
    return {"name": backend, "calibration": dict(recorded.get("calibration") or {})}


@contextlib.contextmanager
def reusing(
    engine: Engine, encoder: Encoder, version: VersionRow | None, rows: RowFormat
) -> Iterator[Reuse | None]:
    """What the build reuses from `version` (from `previous_version`), now that the encoder is
    on its backend, while the build runs (storing `rows`): None when there is nothing to
    reuse."""
    reuse = _open_reuse(engine, encoder, version, rows) if version is not None else None
    try:
        yield reuse
    finally:
        if reuse is not None:
            reuse.kept.close()


def _open_reuse(
    engine: Engine, encoder: Encoder, version: VersionRow, rows: RowFormat
) -> Reuse | None:
    """None when the backend gives other vectors than `version`'s, its files are not the
    arrays reuse reads, or they hold int8 rows and the build stores float16 ones (the kept
    vectors would carry their rounding)."""
    manifest = version.published_manifest()
    current = encoder.identity()
    if not same_vectors(manifest["encoder"], current) or _backend_of(
        manifest["encoder"]
    ) != _backend_of(current):
        logger.info(
            "Encoding every document: the backend differs from version %d's", version.version_id
        )
        return None
    levels = manifest["levels"]
    if not all(levels[level].get("vectors_file") for level in levels):
        return None
    if rows == "float16" and any(level.get("row_format") == "int8" for level in levels.values()):
        logger.info("Encoding every document: version %d stores int8 rows", version.version_id)
        return None
    try:
        kept = KeptVectors(engine, version.version_id, Path(version.path), levels)
    except CorruptFileError as error:
        logger.warning("Encoding every document: %s", error)
        return None
    return Reuse(version.version_id, kept)


def _backend_of(identity: dict[str, Any]) -> dict[str, Any]:
    """The backend an encoder identity records (torch in identities without one)."""
    return dict(identity.get("backend") or {"name": TORCH})
