"""Plain text and Markdown: UTF-8, or UTF-16 or UTF-32 told by its byte order mark; a
`# Title` or a short first line is the title."""

from __future__ import annotations

import re
from typing import Any

from docsim.indexer.text.documents import Skipped, SourceDocument
from docsim.indexer.text.readers.budget import OverBudgetError, ReadBudget
from docsim.indexer.text.readers.registry import FileLimits, Reader, register
from docsim.indexer.text.readers.sniff import UNICODE_MARKS, FileFormat, sniff

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
BINARY = "binary file (NUL bytes; UTF-16 and UTF-32 text needs its byte order mark)"
_MD_TITLE = re.compile(r"^#[ \t]+(?P<title>.+?)[ \t#]*$")


def decode_text(data: bytes, ref: str) -> str | Skipped:
    """The text of a plain-text file's content with Unix newlines, or why it cannot be
    indexed. UTF-8, or UTF-16 or UTF-32 told by its byte order mark (as Windows tools save
    text)."""
    encoding = next((name for mark, name in UNICODE_MARKS if data.startswith(mark)), "utf-8-sig")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        if b"\x00" in data:
            return Skipped(ref, BINARY)
        return Skipped(ref, f"not UTF-8 (invalid byte at offset {error.start})")
    if "\x00" in text:  # text with NULs could not be stored in PostgreSQL
        return Skipped(ref, BINARY)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return Skipped(ref, "empty file")
    return text


def text_document(doc_id: str, text: str, metadata: dict[str, Any] | None = None) -> SourceDocument:
    """A plain-text or Markdown document: a `# Title` or short first line is its title."""
    first_start = len(text) - len(text.lstrip())
    first_end = text.find("\n", first_start)
    first_end = len(text) if first_end < 0 else first_end
    first = text[first_start:first_end].strip()
    match = _MD_TITLE.match(first)
    if match:
        title, body_start = match.group("title"), first_end
    elif len(first) <= 200 and text[first_end:].strip():
        title, body_start = first, first_end
    else:
        title, body_start = doc_id, 0
    return SourceDocument(
        doc_id=doc_id, title=title, text=text, metadata=metadata or {}, body_start=body_start
    )


def _read(
    doc_id: str, data: bytes, metadata: dict[str, Any], limits: FileLimits
) -> SourceDocument | Skipped:
    ref = str(metadata.get("source", doc_id))
    text = decode_text(data, ref)
    if isinstance(text, Skipped):
        return text
    try:
        ReadBudget.of(limits).take_characters(len(text))
    except OverBudgetError as error:
        return Skipped(ref, str(error), over_limit=True)
    return text_document(doc_id, text, metadata)


TEXT = register(
    Reader(
        "text",
        detects=lambda data, suffix: (
            suffix in (*TEXT_SUFFIXES, "") and sniff(data) is FileFormat.text
        ),
        read=_read,
        order=90,  # last: text is what no signature claims
        suffixes=TEXT_SUFFIXES,
    )
)
