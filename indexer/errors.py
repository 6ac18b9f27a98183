"""Every error the indexer raises for a caller to handle, in a leaf that imports nothing but the
models' leaf of errors (`docsim --help` and an error handler load no pipeline to name them).
Each is a `DocsimError`: a command answers it with one line and exit 2, and the service gives
it its HTTP status in `app.core.errors.STATUS`, the one table. The modules that raise an error
import it from here; the search layer's own are in `search.errors`."""

from __future__ import annotations

from docsim.models.errors import DocsimError

# --- text ------------------------------------------------------------------------------------


class CorpusError(DocsimError, ValueError):
    """The corpus path cannot be read as a corpus at all."""


class EmptyDocumentError(DocsimError, ValueError):
    """The document has no sentences to index."""


class MetadataTypeError(DocsimError, ValueError):
    """A document's metadata value that is not of its field's fixed type (422)."""


# --- store -----------------------------------------------------------------------------------


class DatabaseError(DocsimError, RuntimeError):
    """The database cannot be opened or migrated."""


class CollectionNameError(DocsimError, ValueError):
    """Not a valid collection name (422)."""


class CollectionNotFoundError(DocsimError, LookupError):
    """No collection has that name (404)."""


class CollectionConflictError(DocsimError, RuntimeError):
    """The collection exists already, or cannot be deleted now (409)."""


class DataDirBusyError(DocsimError, RuntimeError):
    """Another writer holds the data directory."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BuildRunningError(DataDirBusyError):
    """A build holds the data directory (409: it may run for minutes)."""


class ChangesQueuedError(DataDirBusyError):
    """Document changes held the data directory for longer than this writer could wait
    (429: retry after a moment)."""


class CollectionDeletingError(DataDirBusyError):
    """The data directory's collection is being deleted (404: it will be gone)."""


class CorruptFileError(DocsimError, RuntimeError):
    """A version's file does not hold what its build wrote (its sha256 differs)."""


class RowsPurgedError(DocsimError, LookupError):
    """Rows a reader's snapshot holds are no longer in SQL: its revision was superseded and
    its retired rows purged after the grace period (`indexer.store.generations`). The request
    is answered again from the current revision (503 with a retry hint)."""


class NoActiveIndexError(DocsimError, LookupError):
    """No index version has been published yet."""


class DocumentNotFoundError(DocsimError, LookupError):
    """An indexed document id that the active version does not have (404)."""


# --- builder ---------------------------------------------------------------------------------


class BackendError(DocsimError, ValueError):
    """The configured backend cannot run this encoder here."""


class EngineError(DocsimError, RuntimeError):
    """The engine cannot run here (Ray missing, a bad address, a path too long)."""


class RaySessionError(DocsimError, RuntimeError):
    """Ray cannot be started or joined as configured."""


class IndexBuildError(DocsimError, RuntimeError):
    """The build cannot start or cannot finish; nothing was published."""


class BuildBusyError(IndexBuildError):
    """Another build (or document update) holds the data directory's lock."""


class AlreadyPublishedError(IndexBuildError):
    """A build of a collection's first version found a version published meanwhile."""


# --- jobs ------------------------------------------------------------------------------------


class JobNotFoundError(DocsimError, LookupError):
    """No job has that id (404)."""


class JobStateError(DocsimError, RuntimeError):
    """The job is not in a state that allows the request (409)."""


class IndexChangedError(DocsimError, RuntimeError):
    """The active version or its revision moved since the caller loaded it (409)."""
