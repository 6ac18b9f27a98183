"""Corpus readers: a directory of documents (plain text, Markdown, HTML, Word; each file's
format told by its content, `indexer.text.readers`), a JSONL file, or the AILA 2019 layout.

Each reader yields `SourceDocument`s, or `Skipped` records for inputs that cannot be indexed
(empty, binary, not UTF-8, invalid JSON, duplicate id), so that one bad file never stops a
build and every skip is reported.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from docsim.indexer.choices import CorpusFormat
from docsim.indexer.errors import CorpusError
from docsim.indexer.text.documents import Skipped, SourceDocument  # noqa: F401 - Skipped is read from here too
from docsim.indexer.text.readers.registry import FileLimits
from docsim.indexer.text.readers.structured import sectioned_document
from docsim.indexer.text.readers.text import BINARY, TEXT_SUFFIXES, decode_text

logger = logging.getLogger(__name__)

# The sample corpus shipped with docsim (48 documents on 8 topics).
SAMPLE_CORPUS = Path(__file__).parents[1] / "sample_corpus"
DEFAULT_LIMITS = FileLimits()

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
_AILA_HEADER_END = re.compile(r"^the (judgment was delivered by|order of the court)", re.IGNORECASE)


def read_corpus(
    path: Path, fmt: CorpusFormat | str = CorpusFormat.auto, limits: FileLimits | None = None
) -> Iterator[SourceDocument | Skipped]:
    """Read every document of a corpus, skipping duplicates of an id already seen and files
    beyond `limits` (default: `FileLimits()`)."""
    limits = limits or FileLimits()
    fmt = CorpusFormat(fmt)
    if fmt is CorpusFormat.auto:
        fmt = detect_format(path)
    logger.info("Reading %s (format: %s)", path, fmt.value)
    readers: dict[CorpusFormat, Callable[[Path], Iterator[SourceDocument | Skipped]]] = {
        CorpusFormat.text: partial(_read_text_dir, limits=limits),
        CorpusFormat.jsonl: _read_jsonl,
        CorpusFormat.aila: partial(_read_aila_dir, limits=limits),
    }
    seen: dict[str, str] = {}
    for item in readers[fmt](path):
        if isinstance(item, SourceDocument):
            ref = item.metadata.get("source", item.doc_id)
            if item.doc_id in seen:
                item = Skipped(
                    str(ref),
                    f"duplicate document id {item.doc_id!r} (first in {seen[item.doc_id]})",
                )
            else:
                seen[item.doc_id] = str(ref)
        yield item


def detect_format(path: Path) -> CorpusFormat:
    if not path.exists():
        raise CorpusError(f"corpus path {str(path)!r} does not exist")
    if path.is_file():
        if path.suffix.lower() in JSONL_SUFFIXES:
            return CorpusFormat.jsonl
        raise CorpusError(
            f"corpus file {str(path)!r} is not JSONL ({', '.join(JSONL_SUFFIXES)}); "
            "pass a directory of .txt/.md files or a JSONL file"
        )
    files = _corpus_files(path)
    if not files:
        raise CorpusError(f"corpus directory {str(path)!r} holds no files")
    sample = [f for f in files if f.suffix == ".txt"][:5]
    if sample and all(_looks_like_aila(f) for f in sample):
        return CorpusFormat.aila
    return CorpusFormat.text


def _corpus_files(path: Path) -> list[Path]:
    """Every file below `path`, hidden ones (a name starting with '.') left out."""
    if not path.is_dir():
        raise CorpusError(f"corpus path {str(path)!r} is not a directory")
    return sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )


def _text_files(path: Path) -> list[Path]:
    return [p for p in _corpus_files(path) if p.suffix.lower() in TEXT_SUFFIXES]


def _looks_like_aila(path: Path) -> bool:
    try:
        head = path.read_bytes()[:4096].decode("utf-8", errors="replace").splitlines()[:15]
    except OSError:
        return False
    return any(_AILA_HEADER_END.match(line) for line in head)


def _read_text_dir(path: Path, limits: FileLimits) -> Iterator[SourceDocument | Skipped]:
    for file in _corpus_files(path):
        yield read_file(file, limits)


def read_file(file: Path, limits: FileLimits = DEFAULT_LIMITS) -> SourceDocument | Skipped:
    """One file of a document folder, read by the format its content shows; its id is the
    file name without the extension."""
    try:
        size = file.stat().st_size
        if size > limits.max_bytes:
            return Skipped(str(file), too_large(size, limits), over_limit=True)
        data = file.read_bytes()
    except OSError as error:
        return Skipped(str(file), f"unreadable: {error.strerror or error}")
    return read_document(file.name, data, {"source": str(file)}, limits)


def too_large(size: int, limits: FileLimits) -> str:
    return f"too large: {size:,} bytes; the limit is {limits.max_bytes:,}"


def read_document(
    name: str, data: bytes, metadata: dict[str, Any], limits: FileLimits = DEFAULT_LIMITS
) -> SourceDocument | Skipped:
    """A document file's content `data`, read by the format it shows (`indexer.text.readers`:
    its `name`'s extension only tells HTML fragments and text files apart); its id is `name`
    without the extension. `metadata` (with the file's `source`) is kept, and its `format`
    added."""
    from docsim.indexer.text.readers.registry import reader_for, readers
    from docsim.indexer.text.readers.sniff import FileFormat, sniff

    stem, suffix = Path(name).stem, Path(name).suffix.lower()
    ref = str(metadata.get("source", name))
    if len(data) > limits.max_bytes:
        return Skipped(ref, too_large(len(data), limits), over_limit=True)
    reader = reader_for(data, suffix)
    if reader is not None:
        return reader.read(stem, data, metadata, limits)
    suffixes = [s for r in readers() if r.name in ("text", "html") for s in r.suffixes]
    reasons = {
        FileFormat.ole: "a legacy .doc or a password-protected Word file: save it as .docx "
        "without a password",
        FileFormat.zip: "a zip archive that is not a Word document",
        FileFormat.binary: BINARY,
        FileFormat.text: f"text file of no document format ({suffix}): supported are "
        f"{', '.join(suffixes)} and files without an extension",
    }
    return Skipped(ref, reasons.get(sniff(data), f"no reader takes this {suffix} file"))


def _read_aila_dir(path: Path, limits: FileLimits) -> Iterator[SourceDocument | Skipped]:
    for file in _text_files(path):
        try:
            size = file.stat().st_size
            if size > limits.max_bytes:
                yield Skipped(str(file), too_large(size, limits), over_limit=True)
                continue
            text = decode_text(file.read_bytes(), str(file))
        except OSError as error:
            text = Skipped(str(file), f"unreadable: {error.strerror or error}")
        if isinstance(text, Skipped):
            yield text
            continue
        yield aila_document(file.stem, text, source=str(file))


def aila_document(doc_id: str, text: str, source: str = "") -> SourceDocument:
    """AILA layout: title line, a header block (court, date, case number, judge), then one
    paragraph per line. The header goes to metadata, as its lines and as the fields of
    `aila_fields`; the body starts after it."""
    lines = text.split("\n")
    header_end = next(
        (i for i, line in enumerate(lines[:20]) if _AILA_HEADER_END.match(line.strip())), None
    )
    header = lines[1 : header_end + 1] if header_end is not None else lines[1:5]
    body_line = 1 + len(header)
    body_start = sum(len(line) + 1 for line in lines[:body_line])
    fields = [line.strip() for line in header if line.strip()]
    metadata: dict[str, Any] = {"source": source, "header": fields}
    if header_end is not None:
        metadata["delivered_by"] = lines[header_end].strip()
    metadata.update(aila_fields(fields))
    return SourceDocument(
        doc_id=doc_id,
        title=lines[0].strip() or doc_id,
        text=text,
        metadata=metadata,
        body_start=min(body_start, len(text)),
    )


def aila_fields(header: list[str]) -> dict[str, str]:
    """The filterable fields of an AILA header: `court` (the line naming a court), `date`
    (ISO 8601, from "26 September 1973"), `case_number` (the first other line before the
    judge's) and `judge` (after "delivered by:"), each where the header has it."""
    found: dict[str, str] = {}
    for line in header:
        if _AILA_HEADER_END.match(line):
            judge = line.split(":", 1)[1].strip() if ":" in line else ""
            if judge:
                found.setdefault("judge", judge)
            continue
        try:
            found.setdefault("date", datetime.strptime(line, "%d %B %Y").date().isoformat())
            continue
        except ValueError:
            pass
        if "court" in line.lower() and "court" not in found:
            found["court"] = line
        else:
            found.setdefault("case_number", line)
    return found


def _read_jsonl(path: Path) -> Iterator[SourceDocument | Skipped]:
    try:
        handle = path.open("rb")
    except OSError as error:
        raise CorpusError(f"cannot open corpus file {str(path)!r}: {error.strerror}") from error
    with handle:
        for number, raw in enumerate(handle, start=1):
            ref = f"{path}:{number}"
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8-sig"))
            except UnicodeDecodeError:
                yield Skipped(ref, "not UTF-8")
                continue
            except json.JSONDecodeError as error:
                yield Skipped(ref, f"invalid JSON ({error.msg} at column {error.colno})")
                continue
            yield json_document(record, ref)


def has_nul(value: Any) -> bool:
    """Whether a string, or any key or string inside a JSON-like value, holds a NUL character
    (which PostgreSQL text cannot store, and no document needs)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_nul(v) for v in value)
    return False


def json_document(record: Any, ref: str = "") -> SourceDocument | Skipped:
    """A document from DESIGN.md section 2's JSON forms (with `sections` or with `text`)."""
    if not isinstance(record, dict):
        return Skipped(ref, "not a JSON object")
    if has_nul(record):
        return Skipped(ref, "contains NUL characters (\\u0000), which text cannot hold")
    doc_id = record.get("id")
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id.strip():
        return Skipped(ref, "missing or non-string 'id'")
    title = record.get("title") or doc_id
    metadata = record.get("metadata") or {}
    if not isinstance(title, str) or not isinstance(metadata, dict):
        return Skipped(ref, "'title' must be a string and 'metadata' an object")
    metadata = {**metadata, "source": ref} if ref else metadata
    sections = record.get("sections")
    if sections is not None:
        if not isinstance(sections, list) or not all(
            isinstance(s, dict)
            and isinstance(s.get("text", ""), str)
            and isinstance(s.get("title", ""), str)
            for s in sections
        ):
            return Skipped(ref, "'sections' must be a list of {title, text} objects")
        return sectioned_document(
            doc_id, title, [(s.get("title", ""), s.get("text", "")) for s in sections], metadata
        )
    text = record.get("text")
    if not isinstance(text, str):
        return Skipped(ref, "needs 'text' (a string) or 'sections'")
    if not text.strip():
        return Skipped(ref, "empty text")
    return SourceDocument(
        doc_id=doc_id, title=title, text=text.replace("\r\n", "\n"), metadata=metadata
    )
