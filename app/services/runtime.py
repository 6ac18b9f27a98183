"""A collection's moving parts: the served state, its atomic swap, and the thread that
follows SQL.

Each collection has its runtime (`app.services.collections.Collections` holds them). The
served `ServiceState` is one immutable-by-convention object; a request takes it once
(`app.api.deps.get_state`) and answers from it to the end, so a swap never changes the
version under a running request. The watcher thread polls the active version and its revision
(document changes) and swaps in a freshly loaded state when either moves; the embedded worker
swaps in a version it publishes itself (`serve_published`) before its job reads succeeded.

SQL is the truth: when the served state cannot follow it (a document change that fails to
apply in memory and then to load from SQL, a new version that fails to load), the runtime
serves nothing rather than a stale index. `failure` then says why; `/ready`, queries and
changes answer 503 with it, and the watcher keeps trying to load, backing off to
`RETRY_MAX_SECONDS`, until it succeeds.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

from docsim.app.core.settings import ServiceSettings
from docsim.app.services.lost_shards import LostShards
from docsim.app.services.pins import RevisionPins
from docsim.app.services.retirement import ShardRetirement
from docsim.app.services.state import ServiceState, load_state, with_change
from docsim.app.services.watcher import ActiveVersions, Watcher
from docsim.indexer.api import DocumentChange, active_version, prepare_data_dir, purge_retired
from docsim.indexer.errors import IndexBuildError, NoActiveIndexError

logger = logging.getLogger(__name__)

LOAD_ATTEMPTS = 3  # loads in a row while document changes keep committing


class Runtime:
    def __init__(
        self,
        settings: ServiceSettings,
        engine: Engine,
        versions: ActiveVersions | None = None,
    ) -> None:
        self.settings = settings  # the collection's (`collection_settings`)
        self.collection = settings.collection
        self.engine = engine
        # what SQL's active slots hold, shared by the collections of a process
        self._versions = versions if versions is not None else ActiveVersions(engine)
        self.state: ServiceState | None = None
        self.failure: str | None = None  # why nothing is served although a version is active
        self._reload_lock = threading.Lock()
        self._watcher = Watcher(self.poll, self.purge, settings.api.swap_poll_seconds)
        self._retiring = ShardRetirement()  # shards of swapped-out states, closing later
        self._pins = RevisionPins()  # what requests read: its rows are not purged
        self.indexes_dir: Path = settings.indexes_dir
        self.unwritable: str | None = None  # why document changes cannot be written here
        # shards lost with their Ray cluster, placed again by the watcher
        self._lost = LostShards(settings, self._reload_lock, lambda: self.state, self.swap)

    # --- readers -------------------------------------------------------------------------
    def pinned(self) -> contextlib.AbstractContextManager[ServiceState | None]:
        """The served state (None: nothing is served), held for the block: the rows of its
        revision stay in SQL until the block ends (`purge`)."""
        return self._pins.hold(lambda: self.state)

    def purge(self) -> None:
        """Delete the retired rows of the served version that no request of this process can
        read any more, and that readers elsewhere had the grace period to finish with."""
        oldest = self._pins.oldest(lambda: self.state)
        if oldest is None:  # nothing served, or no change yet: nothing was retired
            return
        version_id, up_to = oldest
        try:
            purge_retired(
                self.engine,
                version_id,
                up_to_revision=up_to,
                grace_seconds=self.settings.jobs.retire_grace_seconds,
            )
        except Exception:  # the next change or poll tries again
            logger.warning("Purging retired documents failed", exc_info=True)

    # --- state ---------------------------------------------------------------------------
    def swap(self, state: ServiceState | None) -> None:
        """Serve `state` from now on (requests already running keep the one they took; its
        predecessor's shard actors close after the retire grace)."""
        previous, self.state = self.state, state
        if previous is not None and previous is not state and previous.shards is not None:
            self._retiring.retire(previous.shards, self.settings.jobs.retire_grace_seconds)

    def _close_all_shards(self) -> None:
        """Close the shard actors of retired states at once, and those of the served state:
        on stopping, and on a cluster without room for two versions' shards, where a swap
        then goes on with a gap (requests get 503 with a retry hint) rather than failing."""
        self._retiring.close_all()
        if self.state is not None and self.state.shards is not None:
            self.state.shards.close()

    def refresh(self) -> bool:
        """Load and swap in the active version if it differs from the served one (version
        or revision), or if nothing is served; returns whether it swapped.

        Raises whatever the load raised, after `fail` recorded it (nothing is served then)."""
        with self._reload_lock:
            try:
                active = active_version(self.engine, self.collection)
            except NoActiveIndexError:
                return False
            current = self.state
            if current is not None and (current.version_id, current.revision) == (
                active.version_id,
                active.revision,
            ):
                return False
            try:
                self._load_and_swap_again_if_moved(current)
            except Exception as error:
                self.fail(error)
                raise
            return True

    def poll(self, woken: bool) -> None:
        """The watcher's tick: `refresh` when SQL's active version or revision is not the
        served one (or something is served although SQL has nothing active). SQL is read at
        most once per half interval for all collections (`ActiveVersions`); when woken, now.

        Raises what `refresh` raised."""
        interval = self.settings.api.swap_poll_seconds
        active = self._versions.get(self.collection, max_age=0.0 if woken else interval / 2)
        state = self.state
        served = (state.version_id, state.revision) if state is not None else None
        if served != active:
            self.refresh()
        else:
            self._lost.tick()

    def _load_and_swap_again_if_moved(self, current: ServiceState | None) -> None:
        """`_load_and_swap`, once more when it failed because a document change committed
        while it read (`again_while_moving`)."""

        def slot() -> tuple[int, int]:
            active = active_version(self.engine, self.collection)
            return active.version_id, active.revision

        again_while_moving(
            slot, lambda first: self._load_and_swap(current if first else self.state)
        )

    def _load_and_swap(self, current: ServiceState | None) -> None:
        state = load_state(self.settings, self.engine, self._close_all_shards)
        previous = current.version_id if current is not None else None
        if current is not None:
            carry_queries(current, state)
        self.swap(state)
        self.failure = None
        logger.info(
            "Collection %r: now serving version %d (revision %d; was %s)",
            self.collection,
            state.version_id,
            state.revision,
            previous,
        )

    def fail(self, error: BaseException) -> None:
        """Serve nothing, and say why, until a load succeeds: the served state no longer
        follows SQL. The first report of a reason logs its traceback, repeats one line."""
        reason = f"{type(error).__name__}: {error}"
        if reason != self.failure:
            logger.error(
                "The active index could not be loaded; serving nothing until it can: %s",
                reason,
                exc_info=error,
            )
        else:
            logger.warning("Loading the active index failed again: %s", reason)
        self.failure = reason
        self.swap(None)

    def follow(self, state: ServiceState, change: DocumentChange) -> None:
        """Serve `state`'s index with a committed document change applied (copy on write).
        Should that fail, the version is loaded again from SQL, which holds the change; should
        that fail too, nothing is served (`fail`) until the watcher manages to load it."""
        with self._reload_lock:
            try:
                self.swap(
                    with_change(self.settings, state, change, self.engine, self._close_all_shards)
                )
                return
            except Exception:
                logger.exception("Applying the change in memory failed; loading it from SQL")
            try:
                self._load_and_swap_again_if_moved(self.state)
            except Exception as error:
                self.fail(error)

    def has_active_version(self) -> bool:
        """Whether SQL has a published version of the collection (loaded here or not)."""
        try:
            active_version(self.engine, self.collection)
        except NoActiveIndexError:
            return False
        return True

    def wake(self, _version_id: int | None = None) -> None:
        """Poll SQL now rather than at the next tick."""
        self._watcher.wake()

    def serve_published(self, _version_id: int) -> None:
        """The embedded worker's hook once it has published a version: load and swap it in
        now, in the worker's thread, so that the job turns succeeded only once this process
        answers from it. Raises what the load raised (`fail` recorded it; the watcher retries)."""
        self.refresh()

    # --- threads -------------------------------------------------------------------------
    def start(self) -> None:
        """Load the active version if there is one (a failure is recorded in `failure`:
        503 with the reason, and the watcher retries), then follow SQL."""
        try:
            if not self.refresh():
                logger.warning(
                    "Collection %r has no version yet; searches answer 409 (default: 503)",
                    self.collection,
                )
        except Exception:  # recorded in self.failure
            logger.warning("Collection %r starts without an index; retrying", self.collection)
        try:  # once, not per change: a change only needs the directory's lock
            self.indexes_dir = prepare_data_dir(self.settings.indexes_dir)
        except IndexBuildError as error:
            self.unwritable = str(error)
            logger.warning("Document changes are refused: %s", error)
        self._watcher.start()

    def stop(self, timeout: float = 600.0) -> None:
        """Stop the watcher and close the shard actors."""
        self._watcher.stop(timeout)
        self._close_all_shards()


def again_while_moving(active: Callable[[], tuple[int, int]], load: Callable[[bool], None]) -> None:
    """Run `load` (given whether it is the first attempt) until it ran with SQL's `active`
    (version, revision) standing still, at most `LOAD_ATTEMPTS` times: a load reads files
    and several SQL queries, and may see a mix of two revisions when a document change
    commits meanwhile. A failure with SQL standing still, or on the last attempt, is raised."""
    for attempt in range(LOAD_ATTEMPTS):
        before = active()
        try:
            load(attempt == 0)
            failed = None
        except Exception as error:
            failed = error
        if active() == before:
            if failed is not None:
                raise failed
            return
        if failed is not None and attempt == LOAD_ATTEMPTS - 1:
            raise failed
        logger.info("The index changed while it was loading; loading it again")


def carry_queries(current: ServiceState, state: ServiceState) -> None:
    """Give `state` the live posted queries of `current`: their ids, and their vectors where
    they come from the same model on the same backend."""
    old, new = current.searcher.encoder.identity(), state.searcher.encoder.identity()
    same_encoder = old["config_hash"] == new["config_hash"] and old.get("backend") == new.get(
        "backend"
    )
    state.queries.adopt(current.queries, same_encoder=same_encoder)
