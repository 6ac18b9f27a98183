"""Every error the indexer raises for a caller to handle, in one module: the app maps these
to HTTP statuses (`app.core.errors`) and the CLI to messages. Each is defined beside the code
that raises it; this module is where callers import them from."""

from __future__ import annotations

from indexer.builder.backend import BackendError
from indexer.builder.engines import EngineError
from indexer.builder.pipeline import BuildBusyError, IndexBuildError
from indexer.jobs.queue import JobNotFoundError, JobStateError
from indexer.jobs.updates import IndexChangedError
from indexer.ray_session import RaySessionError
from indexer.search.explain import PairTooLargeError
from indexer.search.filters import FilterError
from indexer.search.loaded_index import IndexMismatchError
from indexer.search.shards import ShardUnavailableError
from indexer.search.types import DocumentNotFoundError, QueryError
from indexer.store.collections import (
    CollectionConflictError,
    CollectionNameError,
    CollectionNotFoundError,
)
from indexer.store.data_lock import BuildRunningError, ChangesQueuedError, DataDirBusyError
from indexer.store.db import DatabaseError
from indexer.store.manifest import CorruptFileError
from indexer.store.reader import RowsPurgedError
from indexer.store.versions import NoActiveIndexError
from indexer.text.corpus import CorpusError
from indexer.text.split import EmptyDocumentError

__all__ = [
    "BackendError",
    "BuildBusyError",
    "BuildRunningError",
    "ChangesQueuedError",
    "CollectionConflictError",
    "CollectionNameError",
    "CollectionNotFoundError",
    "CorpusError",
    "CorruptFileError",
    "DataDirBusyError",
    "DatabaseError",
    "DocumentNotFoundError",
    "EmptyDocumentError",
    "EngineError",
    "FilterError",
    "IndexBuildError",
    "IndexChangedError",
    "IndexMismatchError",
    "JobNotFoundError",
    "JobStateError",
    "NoActiveIndexError",
    "PairTooLargeError",
    "QueryError",
    "RaySessionError",
    "RowsPurgedError",
    "ShardUnavailableError",
]
