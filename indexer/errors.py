"""Every error the indexer raises for a caller to handle, in one module: the app maps these
to HTTP statuses (`app.core.errors`) and the CLI to messages. Each is defined beside the code
that raises it; this module is where callers import them from."""

from __future__ import annotations

from docsim.indexer.builder.backend import BackendError
from docsim.indexer.builder.engines import EngineError
from docsim.indexer.builder.pipeline import AlreadyPublishedError, BuildBusyError, IndexBuildError
from docsim.indexer.jobs.queue import JobNotFoundError, JobStateError
from docsim.indexer.jobs.updates import IndexChangedError
from docsim.indexer.ray_session import RaySessionError
from docsim.indexer.search.explain import PairTooLargeError
from docsim.indexer.search.filters import FilterError
from docsim.indexer.search.loaded_index import IndexMismatchError
from docsim.indexer.search.shards import ShardUnavailableError
from docsim.indexer.search.types import DocumentNotFoundError, QueryError
from docsim.indexer.store.collections import (
    CollectionConflictError,
    CollectionNameError,
    CollectionNotFoundError,
)
from docsim.indexer.store.data_lock import (
    BuildRunningError,
    ChangesQueuedError,
    CollectionDeletingError,
    DataDirBusyError,
)
from docsim.indexer.store.db import DatabaseError
from docsim.indexer.store.manifest import CorruptFileError
from docsim.indexer.store.reader import RowsPurgedError
from docsim.indexer.store.versions import NoActiveIndexError
from docsim.indexer.text.corpus import CorpusError
from docsim.indexer.text.field_types import MetadataTypeError
from docsim.indexer.text.split import EmptyDocumentError

__all__ = [
    "AlreadyPublishedError",
    "BackendError",
    "BuildBusyError",
    "BuildRunningError",
    "ChangesQueuedError",
    "CollectionConflictError",
    "CollectionDeletingError",
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
    "MetadataTypeError",
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
