"""`DocsimError`, the base of every error docsim raises for a caller to handle, and the models'
own, in a leaf that imports nothing (no torch). A command answers a `DocsimError` with one line
and exit 2; the service gives each its HTTP status in `app.core.errors.STATUS`, the one table."""

from __future__ import annotations


class DocsimError(Exception):
    """An error for the caller to handle (bad input, a missing or busy resource), never a bug:
    each layer's leaf of errors (`models.errors`, `indexer.errors`, `search.errors`,
    `app.core.errors`) derives its own from it and a built-in kind (`ValueError`, ...)."""


class EncoderNotFoundError(DocsimError, ValueError):
    """The encoder name is not built in, or the path is not a (usable) model directory."""


class BackendUnavailableError(DocsimError, RuntimeError):
    """The runtime a backend needs is not installed, or cannot run this encoder."""


class TrainingError(DocsimError, ValueError):
    """A run that cannot start as asked (bad base, occupied output, changed config, ...)."""
