"""Logging for every docsim process: plain text lines for a terminal, or one JSON object per
line (`DOCSIM_LOG__FORMAT=json`, python-json-logger) for a log collector. Fields passed with
`extra=` (job ids, routes, durations) become JSON keys."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

from pythonjsonlogger.json import JsonFormatter

from docsim.indexer.settings import LogSettings

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET = (
    "transformers",
    "httpx",
    "alembic.runtime.migration",
    "alembic.runtime.plugins",  # a line per plugin at every start
    "faiss.loader",  # the CPU variants it tried, as ModuleNotFoundError lines
    "bm25s",
    "filelock",
)


class _DropLossTypeNotice(logging.Filter):
    """transformers warns, on every load of an encoder's config, that `loss_type=None` is
    unknown: a training setting that inference never reads."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "loss_type" not in record.getMessage()


class StderrHandler(logging.StreamHandler):
    """Writes each record to `sys.stderr` as it is when the record is written. A handler
    bound to the stream of its creation keeps writing to it after whoever set `sys.stderr`
    (a test runner, Typer's `CliRunner`) has closed it, and every later record from a worker
    thread then prints a "Logging error" traceback instead of the message."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        """Ignored: the stream is always the current `sys.stderr`."""


def configure_logging(settings: LogSettings, verbose: bool = False) -> None:
    """Send every logger's records to stderr in the configured format (replacing handlers
    set before, so that uvicorn's and ours share one format)."""
    handler = StderrHandler()
    if settings.format == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                datefmt="%Y-%m-%dT%H:%M:%S%z",
            )
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else settings.level)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    notices = logging.getLogger("transformers.modeling_utils")
    if not any(isinstance(f, _DropLossTypeNotice) for f in notices.filters):
        notices.addFilter(_DropLossTypeNotice())
    # transformers' "Loading weights" bar at every encoder load (read when it is imported)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
