"""The document formats docsim reads, each a `Reader` registered by its own module of this
package: adding a format is adding one file that calls `register`. `reader_for` asks the
readers in their `order` whether a file's content (and, for text that could be HTML, its
name's extension) is theirs; `indexer.text.corpus.read_document` reads with the one that says
so, or explains why none did (`sniff`)."""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from docsim.indexer.text.documents import Skipped, SourceDocument

# the package's modules that hold no reader
_HELPERS = {"budget", "pdf_budget", "registry", "sniff", "structured"}

INFLATED_SETTING = "DOCSIM_FILES__MAX_INFLATED_BYTES"
CHARACTERS_SETTING = "DOCSIM_FILES__MAX_CHARACTERS"


@dataclass(frozen=True)
class FileLimits:
    """What a document file may be: larger files and longer PDFs are skipped unread; a file
    whose compressed parts inflate to more than `max_inflated_bytes` together, or that holds
    more than `max_characters` characters of text, is skipped as soon as reading it passes
    the limit (`readers.budget`). `characters_setting` names the characters' limit in
    messages: the API holds an upload to its own limit on a document's characters."""

    max_bytes: int = 100 * 2**20
    max_pdf_pages: int = 5000
    max_inflated_bytes: int = 256 * 2**20
    max_characters: int = 20_000_000
    characters_setting: str = CHARACTERS_SETTING


# (document id, file content, metadata, limits) -> the document, or why it is skipped
Read = Callable[[str, bytes, dict[str, Any], FileLimits], SourceDocument | Skipped]


@dataclass(frozen=True)
class Reader:
    """One format: whether a file is in it, told by its content `(data, suffix)` (the name's
    lower-case extension, for text the content cannot tell apart), and how to read it.
    Readers are asked from the lowest `order`: binary signatures before text patterns."""

    name: str
    detects: Callable[[bytes, str], bool]
    read: Read
    order: int
    suffixes: tuple[str, ...] = ()  # the extensions its files usually have, for messages


_READERS: dict[str, Reader] = {}
_LOADED = threading.Lock()
_loaded = False


def register(reader: Reader) -> Reader:
    """Add `reader` (a module of this package calls it when imported).

    Raises:
        ValueError: another reader has its name.
    """
    if reader.name in _READERS and _READERS[reader.name] != reader:
        raise ValueError(f"a reader of {reader.name!r} is registered already")
    _READERS[reader.name] = reader
    return reader


def readers() -> list[Reader]:
    """Every registered reader, in the order they are asked; the package's modules are
    imported on the first call (each registers its own)."""
    global _loaded
    with _LOADED:
        if not _loaded:
            package = importlib.import_module(__package__ or "docsim.indexer.text.readers")
            for module in pkgutil.iter_modules(package.__path__):
                if module.name not in _HELPERS:
                    importlib.import_module(f"{package.__name__}.{module.name}")
            _loaded = True
    return sorted(_READERS.values(), key=lambda r: (r.order, r.name))


def reader_for(data: bytes, suffix: str) -> Reader | None:
    """The first reader that takes a file of content `data` named with `suffix`, or None."""
    return next((r for r in readers() if r.detects(data, suffix)), None)
