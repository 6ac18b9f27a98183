"""The collections one service serves: a `Runtime` each, and the one embedded job worker.

SQL is the truth here too. Every request names its collection (the routes under
`/collections/{name}`, or `default` for the routes at the root) and `open` reads that
collection's row: a collection deleted by any process is a 404 at once, and one created by
another process is loaded on its first request. Collections that exist when the service
starts are loaded then. The embedded worker runs the jobs of every collection, one at a
time, and hands each published version to its collection's runtime before the job turns
succeeded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy import Engine

from docsim.app.core.errors import InvalidSettingError
from docsim.app.core.settings import ServiceSettings
from docsim.app.schemas.collections import CollectionRequest
from docsim.app.services.jobs import checked_encoder
from docsim.app.services.runtime import Runtime
from docsim.app.services.state import ServiceState
from docsim.app.services.watcher import ActiveVersions
from docsim.indexer.api import (
    CollectionRow,
    FieldType,
    Worker,
    collection_settings,
    create_collection,
    delete_collection,
    get_collection,
    hold_data_dir,
    list_collections,
    with_groups,
)
from docsim.indexer.errors import CollectionNotFoundError

logger = logging.getLogger(__name__)

DELETE_WAITS_FOR_CHANGES_SECONDS = 30.0


@dataclass(frozen=True)
class Collection:
    """A collection as a request sees it: found once (`app.api.deps.get_collection`) and
    passed down, so that no route or service looks its name, settings or folder up again.

    Attributes:
        row: its SQL row as the request found it (name, keys, the settings it sets apart).
        runtime: what serves its versions in this process.
    """

    row: CollectionRow
    runtime: Runtime

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def settings(self) -> ServiceSettings:
        """The settings its work runs with: the server's, with the groups it sets apart."""
        return self.runtime.settings

    @property
    def folder(self) -> Path:
        """The folder of its index versions (`Settings.indexes_dir`): builds and document
        changes write there, a deletion empties it, and each version SQL records (the path
        a search loads) is a folder in it."""
        return self.runtime.indexes_dir


class Collections:
    def __init__(self, settings: ServiceSettings, engine: Engine) -> None:
        self.settings = settings  # the server's; each runtime has its collection's
        self.engine = engine
        self._runtimes: dict[str, Collection] = {}
        self._lock = threading.Lock()  # guards `_runtimes` and `_starting`, held briefly
        self._starting: dict[str, threading.Lock] = {}  # one start at a time per collection
        self._versions = ActiveVersions(engine)  # one SQL read per poll for every runtime
        self.worker: Worker | None = None
        self._worker_thread: threading.Thread | None = None

    # --- requests ------------------------------------------------------------------------
    def open(self, name: str) -> Collection:
        """The collection `name` as SQL has it now, and its runtime (started here when this
        process has none yet, or had one for a collection since deleted and made again).

        A row read before the collection was deleted and created again never displaces the
        new collection's runtime (`_newer`): its requests keep the one their writes serve.

        Raises:
            CollectionNotFoundError: there is no such collection (its runtime, if any, stops).
        """
        with self._lock:
            known = self._runtimes.get(name)
        try:
            row = get_collection(self.engine, name)
        except CollectionNotFoundError:
            if known is not None:  # gone; one created again meanwhile stays
                self._forget(name, known.row)
            raise
        with self._lock:
            held = self._runtimes.get(name)
            if held is not None and held.row.created_at == row.created_at:
                found = self._runtimes[name] = Collection(row, held.runtime)  # keys may change
                return found
            if held is not None and _newer(held, row):
                return held
            starting = self._starting.setdefault(name, threading.Lock())
        # a start loads the collection's index (seconds): one start per collection at a time,
        # outside the registry's lock, so that the other collections' requests go on
        with starting:
            with self._lock:
                held = self._runtimes.get(name)
            if held is not None and held.row.created_at == row.created_at:
                return Collection(row, held.runtime)  # started meanwhile by another request
            if held is not None and _newer(held, row):
                return held
            started = Collection(row, self._start(row))
            with self._lock:
                self._runtimes[name] = started
        if held is not None:  # deleted and created again elsewhere: a new collection
            held.runtime.stop(timeout=5.0)
        return started

    def runtime(self, name: str) -> Runtime:
        return self.open(name).runtime

    def states(self) -> dict[str, ServiceState | None]:
        """The state each loaded collection serves (None: nothing), for the metrics."""
        with self._lock:
            held = list(self._runtimes.items())
        return {name: collection.runtime.state for name, collection in held}

    def exists(self, name: str) -> bool:
        """Whether the collection `name` exists now (SQL, not this process's memory)."""
        try:
            get_collection(self.engine, name)
        except CollectionNotFoundError:
            return False
        return True

    def rows(self) -> list[CollectionRow]:
        return list_collections(self.engine)

    # --- changes -------------------------------------------------------------------------
    def create(
        self,
        name: str,
        groups: dict[str, dict[str, Any]],
        *,
        write_key: str | None,
        read_key: str | None,
        field_types: Mapping[str, str] | None = None,
    ) -> Collection:
        """Create the collection `name` (its settings `groups` checked first) and start it.

        Raises:
            CollectionConflictError: it exists.
            pydantic.ValidationError: a setting of `groups` is not valid.
        """
        with_groups(self.settings, name, groups)  # validates every group before writing
        create_collection(
            self.engine,
            name,
            groups,
            write_key=write_key,
            read_key=read_key,
            field_types=None
            if field_types is None
            else {field: FieldType(kind) for field, kind in field_types.items()},
        )
        return self.open(name)

    def delete(self, collection: Collection) -> list[int]:
        """Delete `collection` with everything it holds, once no build or document change is
        writing to its folder (a running build: 409; changes: waits, then 429).

        Raises:
            CollectionNotFoundError, CollectionConflictError, BuildRunningError,
            ChangesQueuedError.
        """
        folder = collection.folder
        folder.mkdir(parents=True, exist_ok=True)
        with hold_data_dir(folder, "delete", DELETE_WAITS_FOR_CHANGES_SECONDS):
            held = delete_collection(self.engine, collection.name, folder)
        self._forget(collection.name, collection.row)
        return held

    def _forget(self, name: str, gone: CollectionRow) -> None:
        """Stop the runtime of `name` when it serves the collection `gone` (or one older):
        not the runtime of a collection created again under the name meanwhile."""
        with self._lock:
            held = self._runtimes.get(name)
            if held is None or _newer(held, gone):
                return
            del self._runtimes[name]
        held.runtime.stop(timeout=5.0)
        logger.info("Collection %r is no longer served", name)

    # --- threads -------------------------------------------------------------------------
    def _start(self, row: CollectionRow) -> Runtime:
        settings = collection_settings(self.settings, row)
        runtime = Runtime(settings, self.engine, versions=self._versions)
        runtime.start()
        return runtime

    def start(self) -> None:
        """Load every collection, then start the embedded worker (when configured)."""
        for row in list_collections(self.engine):
            with self._lock:
                self._runtimes[row.name] = Collection(row, self._start(row))
        if self.settings.jobs.embedded_worker:
            self.worker = Worker(self.settings, self.engine, on_published=self.serve_published)
            self._worker_thread = threading.Thread(
                target=self.worker.run, name="docsim-worker", daemon=True
            )
            self._worker_thread.start()

    def serve_published(self, collection: str, version_id: int) -> None:
        """The embedded worker's hook: the collection's runtime loads the version it has
        just published, so that the job turns succeeded only once this process serves it."""
        self.runtime(collection).serve_published(version_id)

    def stop(self, timeout: float = 600.0) -> None:
        """Stop every runtime, and the worker after its current block (its job then fails
        with its build kept; a retry resumes it)."""
        if self.worker is not None:
            self.worker.stop.set()
        with self._lock:
            held = list(self._runtimes.values())
            self._runtimes.clear()
        for collection in held:
            collection.runtime.stop(timeout)
        if self._worker_thread is not None:
            self._worker_thread.join(timeout)


def _newer(held: Collection, row: CollectionRow) -> bool:
    """Whether `held` is a collection created after `row`'s: `row` was read before its
    collection was deleted and the name taken again."""
    return held.row.created_at > row.created_at


def unknown_search_names(model: type[BaseModel], search: dict[str, Any]) -> list[str]:
    """The names of `search` that are no setting of `model`, a group's as `group.name`."""
    unknown = []
    for name, value in search.items():
        field = model.model_fields.get(name)
        group = field.annotation if field is not None else None
        if field is None:
            unknown.append(name)
        elif isinstance(value, dict) and isinstance(group, type) and issubclass(group, BaseModel):
            unknown += [f"{name}.{inner}" for inner in unknown_search_names(group, value)]
    return sorted(unknown)


def requested_groups(
    request: CollectionRequest, settings: ServiceSettings
) -> dict[str, dict[str, Any]]:
    """The settings a new collection sets apart, from its request, checked: its encoder as a
    reindex job's would be (`checked_encoder`), its search settings field by field.

    Raises:
        InvalidSettingError: an unknown or invalid search setting (422).
        PathNotAllowedError, MissingPathError: the encoder's path (403, 422).
    """
    groups: dict[str, dict[str, Any]] = {}
    encoder: dict[str, Any] = {}
    if request.encoder is not None:
        encoder["name"] = checked_encoder(request.encoder, settings)
    if request.backend is not None:
        encoder["backend"] = request.backend
    if encoder:
        groups["encoder"] = encoder
    if request.search:
        unknown = unknown_search_names(type(settings.search), request.search)
        if unknown:
            raise InvalidSettingError(f"search: no search setting is named {', '.join(unknown)}")
        try:
            with_groups(settings, request.name, {"search": request.search})
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()
            )
            raise InvalidSettingError(f"search: {problems}") from None
        groups["search"] = dict(request.search)
    return groups
