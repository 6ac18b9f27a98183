"""The errors the models raise for a caller to handle, in a leaf that imports nothing (no
torch): the indexer's table of outcomes (`indexer.errors.OUTCOMES`) names them."""

from __future__ import annotations


class EncoderNotFoundError(ValueError):
    """The encoder name is not built in, or the path is not a (usable) model directory."""


class BackendUnavailableError(RuntimeError):
    """The runtime a backend needs is not installed, or cannot run this encoder."""


class TrainingError(ValueError):
    """A run that cannot start as asked (bad base, occupied output, changed config, ...)."""
