"""Word documents (.docx, through python-docx): the `Title` style gives the title, `Heading N`
styles start sections, every other non-empty paragraph is a paragraph, and each table row is one
paragraph (cells joined by " | "), in body order. The archive is checked before it is opened:
a zip bomb (too many bytes once inflated, or too high a ratio) is refused unread."""

from __future__ import annotations

import io
import zipfile
from typing import Any

from docsim.indexer.text.documents import Skipped, SourceDocument
from docsim.indexer.text.readers.registry import Reader, register
from docsim.indexer.text.readers.sniff import FileFormat, sniff
from docsim.indexer.text.readers.structured import clean, structured_document

MAX_INFLATED_BYTES = 256 * 1024 * 1024
MAX_RATIO = 200  # inflated / compressed; real Word files stay far below


def docx_document(doc_id: str, data: bytes, metadata: dict[str, Any]) -> SourceDocument | Skipped:
    """The Word document whose file content is `data`."""
    ref = str(metadata.get("source", doc_id))
    refused = zip_bomb(data)
    if refused:
        return Skipped(ref, refused)
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile) as error:
        return Skipped(ref, f"corrupt Word document: {error}")
    except Exception as error:  # noqa: BLE001 - lxml's XML errors and friends: a bad file
        return Skipped(ref, f"corrupt Word document: {type(error).__name__}: {error}")
    title = clean(document.core_properties.title or "")
    sections: list[tuple[str, list[str]]] = [("", [])]
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                cells = dict.fromkeys(clean(cell.text) for cell in row.cells)  # merged cells once
                sections[-1][1].append(" | ".join(c for c in cells if c))
            continue
        assert isinstance(block, Paragraph)
        style = (block.style.name if block.style is not None else "") or ""
        text = clean(block.text)
        if style == "Title" and text:
            title = title or text
        elif style.startswith("Heading") and text:
            sections.append((text, []))
        else:
            sections[-1][1].append(text)
    if not title:
        title = next((heading for heading, _ in sections if heading), "")
    return structured_document(doc_id, title, sections, metadata)


def zip_bomb(data: bytes) -> str | None:
    """Why the archive `data` must not be inflated, or None."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile as error:
        return f"corrupt Word document: {error}"
    inflated = sum(i.file_size for i in infos)
    compressed = max(1, sum(i.compress_size for i in infos))
    if inflated > MAX_INFLATED_BYTES or inflated / compressed > MAX_RATIO:
        return (
            f"refused: the archive inflates to {inflated:,} bytes from {compressed:,} "
            f"(limits {MAX_INFLATED_BYTES:,} bytes, ratio {MAX_RATIO}): a zip bomb?"
        )
    return None


DOCX = register(
    Reader(
        "docx",
        detects=lambda data, _suffix: (
            data.startswith(b"PK\x03\x04") and sniff(data) is FileFormat.docx
        ),
        read=lambda doc_id, data, metadata, _limits: docx_document(
            doc_id, data, {**metadata, "format": "docx"}
        ),
        order=20,
        suffixes=(".docx",),
    )
)
