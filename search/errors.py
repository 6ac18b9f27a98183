"""The errors the search layer raises for a caller to handle, in a leaf that imports nothing but
the models' leaf (`DocsimError`): the service gives each its HTTP status in
`app.core.errors.STATUS`, the one table; a command answers any of them with one line."""

from __future__ import annotations

from docsim.models.errors import DocsimError


class QueryError(DocsimError, ValueError):
    """The query cannot be answered as asked (422)."""


class FilterError(DocsimError, ValueError):
    """A filter that is malformed, or names a field this collection does not have, or
    compares a field with a value of another type (422)."""


class PairTooLargeError(DocsimError, ValueError):
    """The pair's paragraph matrix exceeds the configured size (413)."""


class IndexMismatchError(DocsimError, RuntimeError):
    """The index on disk does not match its manifest or the serving encoder (the server's
    fault: 500)."""


class ShardUnavailableError(DocsimError, RuntimeError):
    """A shard could not answer (dead, restarting or unreachable): no partial ranking is
    returned (503 with a retry hint)."""
