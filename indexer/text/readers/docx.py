"""Word documents (.docx, through python-docx): the `Title` style gives the title, `Heading N`
styles start sections, every other non-empty paragraph is a paragraph, and each table row is one
paragraph (its cells joined by " | ", each `<w:tc>` once), in body order.

The archive is read under the file's budget (`readers.budget`) before python-docx opens it:
an archive whose members declare too many bytes, or too high a ratio (the archive's or one
deflated member's), is refused unread; then every member is inflated through a counting
reader, its bytes kept only to look inside a nested archive, whose own members count as the
bytes they would inflate to: what the archive truly inflates to is known, whatever its
headers declare, and passing `max_inflated_bytes` stops the reading there (413 when
uploaded). `word/document.xml` may be at most `XML_PER_CHARACTER` bytes per character of text
the limits allow. The text read is counted too, and the request reading the file may stop
between members and every `CHECK_EVERY` blocks."""

from __future__ import annotations

import io
import zipfile
import zlib
from typing import IO, Any

from docsim.indexer.text.documents import Skipped, SourceDocument
from docsim.indexer.text.readers.budget import CHUNK, OverBudgetError, ReadBudget
from docsim.indexer.text.readers.registry import FileLimits, Reader, register
from docsim.indexer.text.readers.sniff import FileFormat, sniff
from docsim.indexer.text.readers.structured import clean, structured_document

MAX_RATIO = 200  # inflated / compressed; real Word files stay far below
RATIO_FROM_BYTES = 2**20  # a deflated member this large is held to MAX_RATIO on its own
XML_PER_CHARACTER = 64  # bytes of document.xml per character of text: markup is verbose
DOCUMENT_XML = "word/document.xml"
ZIP_SIGNATURE = b"PK\x03\x04"
CHECK_EVERY = 256  # body blocks read between checkpoints
# what a corrupt archive raises (not RuntimeError: a checkpoint raises one at the deadline)
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError)


def docx_document(
    doc_id: str, data: bytes, metadata: dict[str, Any], limits: FileLimits | None = None
) -> SourceDocument | Skipped:
    """The Word document whose file content is `data`, read within `limits`."""
    ref = str(metadata.get("source", doc_id))
    budget = ReadBudget.of(limits or FileLimits())
    try:
        refused = zip_bomb(data, budget)
        if refused:
            return Skipped(ref, refused)
        document = _opened(data)
        if isinstance(document, str):
            return Skipped(ref, f"corrupt Word document: {document}")
        title, sections = _content(document, budget)
    except OverBudgetError as error:
        return Skipped(ref, str(error), over_limit=True)
    return structured_document(doc_id, title, sections, metadata)


def _opened(data: bytes) -> Any:
    """python-docx's document of `data`, or why it cannot open it."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        return docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile) as error:
        return str(error)
    except Exception as error:  # noqa: BLE001 - lxml's XML errors and friends: a bad file
        return f"{type(error).__name__}: {error}"


def _content(document: Any, budget: ReadBudget) -> tuple[str, list[tuple[str, list[str]]]]:
    """The title and the (heading, paragraphs) sections of python-docx's `document`, each
    text counted by `budget`. Styles are looked up by id in one table (python-docx's
    `Paragraph.style` searches the styles part for every paragraph)."""
    from docx.enum.style import WD_STYLE_TYPE
    from docx.table import Table, _Cell

    styles = document.styles
    default = styles.default(WD_STYLE_TYPE.PARAGRAPH)
    default_name = (default.name if default is not None else "") or ""
    names = {s.style_id: s.name or "" for s in styles if s.type == WD_STYLE_TYPE.PARAGRAPH}
    title = budget.take_text(clean(document.core_properties.title or ""))
    sections: list[tuple[str, list[str]]] = [("", [])]
    for number, block in enumerate(document.iter_inner_content()):
        if number % CHECK_EVERY == 0:
            budget.checkpoint()
        if isinstance(block, Table):
            for row in block.rows:
                cells = dict.fromkeys(clean(_Cell(tc, block).text) for tc in row._tr.tc_lst)
                sections[-1][1].append(budget.take_text(" | ".join(c for c in cells if c)))
            continue
        style_id = block._p.style  # None: the default paragraph style
        style = names.get(style_id, default_name) if style_id else default_name
        text = budget.take_text(clean(block.text))
        if style == "Title" and text:
            title = title or text
        elif style.startswith("Heading") and text:
            sections.append((text, []))
        else:
            sections[-1][1].append(text)
    if not title:
        title = next((heading for heading, _ in sections if heading), "")
    return title, sections


def zip_bomb(data: bytes, budget: ReadBudget | None = None) -> str | None:
    """Why the archive `data` must not be read (a 422), or None; every member is inflated
    through `budget` (see the module).

    Raises:
        OverBudgetError: the archive inflates past the limits (413).
    """
    budget = budget or ReadBudget.of(FileLimits())
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            refused = _declared(infos, budget)
            if refused:
                return refused
            for info in infos:
                budget.checkpoint()
                if info.flag_bits & 0x1:  # zipfile would want a password
                    return f"corrupt Word document: its member {info.filename!r} is encrypted"
                with archive.open(info) as member:
                    size = _member_size(member, budget)
                if info.filename == DOCUMENT_XML:
                    _check_document_xml(size, budget)
    except _ZIP_ERRORS as error:
        return f"corrupt Word document: {type(error).__name__}: {error}"
    return None


def _declared(infos: list[zipfile.ZipInfo], budget: ReadBudget) -> str | None:
    """Why the archive's headers alone refuse it (a 422), or None.

    Raises:
        OverBudgetError: its members declare more bytes than the limits allow.
    """
    inflated = sum(i.file_size for i in infos)
    compressed = max(1, sum(i.compress_size for i in infos))
    budget.check_declared(inflated)
    for info in infos:
        if info.filename == DOCUMENT_XML:
            _check_document_xml(info.file_size, budget)
    deflated = [
        i
        for i in infos
        if i.compress_type != zipfile.ZIP_STORED and i.file_size >= RATIO_FROM_BYTES
    ]
    worst = max(deflated, key=lambda i: i.file_size / max(1, i.compress_size), default=None)
    if inflated / compressed > MAX_RATIO:
        return (
            f"refused: the archive inflates to {inflated:,} bytes from {compressed:,} "
            f"(limits {budget.max_inflated:,} bytes, ratio {MAX_RATIO}): a zip bomb?"
        )
    if worst is not None and worst.file_size / max(1, worst.compress_size) > MAX_RATIO:
        return (
            f"refused: its member {worst.filename!r} inflates to {worst.file_size:,} bytes "
            f"from {worst.compress_size:,} (ratio limit {MAX_RATIO}): a zip bomb?"
        )
    return None


def _member_size(member: IO[bytes], budget: ReadBudget) -> int:
    """The bytes `member` truly inflates to, counted as they come; a member that is itself an
    archive also counts the bytes its own members declare (it is never inflated: python-docx
    keeps an embedded workbook as it is)."""
    head = member.read(len(ZIP_SIGNATURE))
    budget.take_inflated(len(head))
    if head != ZIP_SIGNATURE:
        return len(head) + budget.read_all(member)
    parts = [head]
    while chunk := member.read(CHUNK):
        budget.take_inflated(len(chunk))
        parts.append(chunk)
    nested = b"".join(parts)
    try:
        with zipfile.ZipFile(io.BytesIO(nested)) as archive:
            budget.take_inflated(sum(i.file_size for i in archive.infolist()))
    except zipfile.BadZipFile:
        pass  # not an archive after all: its bytes are counted
    return len(nested)


def _check_document_xml(size: int, budget: ReadBudget) -> None:
    """Refuse a `word/document.xml` of `size` bytes larger than the text the limits allow
    could need (python-docx parses it whole, in one go)."""
    limit = min(budget.max_inflated, XML_PER_CHARACTER * budget.max_characters)
    if size > limit:
        raise OverBudgetError(
            f"too long: its {DOCUMENT_XML} inflates to {size:,} bytes, more than {limit:,} "
            f"({XML_PER_CHARACTER} bytes for each of the {budget.max_characters:,} characters "
            f"of text the limit allows, {budget.characters_setting})"
        )


DOCX = register(
    Reader(
        "docx",
        detects=lambda data, _suffix: (
            data.startswith(b"PK\x03\x04") and sniff(data) is FileFormat.docx
        ),
        read=lambda doc_id, data, metadata, limits: docx_document(
            doc_id, data, {**metadata, "format": "docx"}, limits
        ),
        order=20,
        suffixes=(".docx",),
    )
)
