"""Logging for every docsim process: plain text lines for a terminal, or one JSON object per
line (`DOCSIM_LOG__FORMAT=json`, python-json-logger) for a log collector. Fields passed with
`extra=` (job ids, routes, durations) become JSON keys."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from pythonjsonlogger.json import JsonFormatter

from docsim.indexer.config import LogSettings

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET = ("transformers", "httpx", "alembic.runtime.migration", "bm25s", "filelock")


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
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
