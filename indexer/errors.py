"""Every error the indexer raises for a caller to handle, defined here, in a leaf that imports
nothing but the models' own leaf of errors (`docsim --help` and an error handler load no
pipeline to name them), and `OUTCOMES`: the one table that gives each its HTTP status
(`app.core.errors`) and its command-line exit (`indexer.cli.common`). The modules that raise
an error import it from here."""

from __future__ import annotations

from dataclasses import dataclass

from docsim.models.errors import BackendUnavailableError, EncoderNotFoundError, TrainingError

# --- text ------------------------------------------------------------------------------------


class CorpusError(ValueError):
    """The corpus path cannot be read as a corpus at all."""


class EmptyDocumentError(ValueError):
    """The document has no sentences to index."""


class MetadataTypeError(ValueError):
    """A document's metadata value that is not of its field's fixed type (maps to 422)."""


# --- store -----------------------------------------------------------------------------------


class DatabaseError(RuntimeError):
    """The database cannot be opened or migrated."""


class CollectionNameError(ValueError):
    """Not a valid collection name (maps to 422)."""


class CollectionNotFoundError(LookupError):
    """No collection has that name (maps to 404)."""


class CollectionConflictError(RuntimeError):
    """The collection exists already, or cannot be deleted now (maps to 409)."""


class DataDirBusyError(RuntimeError):
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


class CorruptFileError(RuntimeError):
    """A version's file does not hold what its build wrote (its sha256 differs)."""


class RowsPurgedError(LookupError):
    """Rows a reader's snapshot holds are no longer in SQL: its revision was superseded and
    its retired rows purged after the grace period (`indexer.store.generations`). The request
    is answered again from the current revision (503 with a retry hint)."""


class NoActiveIndexError(LookupError):
    """No index version has been published yet."""


# --- builder ---------------------------------------------------------------------------------


class BackendError(ValueError):
    """The configured backend cannot run this encoder here."""


class EngineError(RuntimeError):
    """The engine cannot run here (Ray missing, a bad address, a path too long)."""


class RaySessionError(RuntimeError):
    """Ray cannot be started or joined as configured."""


class IndexBuildError(RuntimeError):
    """The build cannot start or cannot finish; nothing was published."""


class BuildBusyError(IndexBuildError):
    """Another build (or document update) holds the data directory's lock."""


class AlreadyPublishedError(IndexBuildError):
    """A build of a collection's first version found a version published meanwhile."""


# --- search ----------------------------------------------------------------------------------


class QueryError(ValueError):
    """The query cannot be answered as asked (maps to 422)."""


class DocumentNotFoundError(LookupError):
    """An indexed document id that the active version does not have (maps to 404)."""


class FilterError(ValueError):
    """A filter that is malformed, or names a field this collection does not have, or
    compares a field with a value of another type (maps to 422)."""


class PairTooLargeError(ValueError):
    """The pair's paragraph matrix exceeds the configured size (maps to 413)."""


class IndexMismatchError(RuntimeError):
    """The index on disk does not match its manifest or the serving encoder."""


class ShardUnavailableError(RuntimeError):
    """A shard could not answer (dead, restarting or unreachable): no partial ranking is
    returned (maps to 503 with a retry hint)."""


# --- jobs ------------------------------------------------------------------------------------


class JobNotFoundError(LookupError):
    """No job has that id (maps to 404)."""


class JobStateError(RuntimeError):
    """The job is not in a state that allows the request (maps to 409)."""


class IndexChangedError(RuntimeError):
    """The active version or its revision moved since the caller loaded it (maps to 409)."""


# --- what each error answers -----------------------------------------------------------------

USAGE = 2  # the command's exit: one line that says what to fix or to wait for, no traceback


@dataclass(frozen=True)
class Outcome:
    """What an error answers: its HTTP status (None: not the client's, left a 500) and the
    command line's exit code (one line on stderr, no traceback)."""

    status: int | None
    exit_code: int


OUTCOMES: dict[type[Exception], Outcome] = {
    CorpusError: Outcome(None, USAGE),
    EmptyDocumentError: Outcome(422, USAGE),
    MetadataTypeError: Outcome(422, USAGE),
    DatabaseError: Outcome(None, USAGE),
    CollectionNameError: Outcome(422, USAGE),
    CollectionNotFoundError: Outcome(404, USAGE),
    CollectionConflictError: Outcome(409, USAGE),
    DataDirBusyError: Outcome(None, USAGE),
    BuildRunningError: Outcome(409, USAGE),
    ChangesQueuedError: Outcome(429, USAGE),
    CollectionDeletingError: Outcome(404, USAGE),
    CorruptFileError: Outcome(None, USAGE),
    RowsPurgedError: Outcome(503, USAGE),
    NoActiveIndexError: Outcome(503, USAGE),
    BackendError: Outcome(None, USAGE),
    EngineError: Outcome(None, USAGE),
    RaySessionError: Outcome(None, USAGE),
    IndexBuildError: Outcome(None, USAGE),
    BuildBusyError: Outcome(409, USAGE),
    AlreadyPublishedError: Outcome(None, USAGE),
    QueryError: Outcome(422, USAGE),
    DocumentNotFoundError: Outcome(404, USAGE),
    FilterError: Outcome(422, USAGE),
    PairTooLargeError: Outcome(413, USAGE),
    IndexMismatchError: Outcome(None, USAGE),
    ShardUnavailableError: Outcome(503, USAGE),
    JobNotFoundError: Outcome(404, USAGE),
    JobStateError: Outcome(409, USAGE),
    IndexChangedError: Outcome(409, USAGE),
    EncoderNotFoundError: Outcome(None, USAGE),
    BackendUnavailableError: Outcome(None, USAGE),
    TrainingError: Outcome(None, USAGE),
}


def outcome(error: BaseException) -> Outcome | None:
    """The outcome of `error`'s nearest class in `OUTCOMES` (None: none is its own)."""
    for cls in type(error).__mro__:
        if cls in OUTCOMES:
            return OUTCOMES[cls]
    return None
