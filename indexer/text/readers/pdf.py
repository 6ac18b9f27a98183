"""PDF files (pdfminer.six's layout analysis).

- Text boxes in reading order (a two-column page column by column); a box is one paragraph.
  The first box of a column or page goes on with the paragraph before it when that one broke
  off mid-sentence before a lower-case word, or when its last line was full: as a typesetter
  fills lines, the paragraph would have ended on that line had the next box's first word fit
  (its last sentence must then be open, or the next box must not start as paragraphs do, with
  a number or a bullet).
- Lines are joined with hyphenation at line ends undone.
- Running headers and footers (the same text near the top or bottom of at least half the
  pages, and of two) and page numbers are removed; a one-page file keeps its header.
- Boxes in a font larger than the body's, or equal to an outline (bookmark) title, start
  sections; the file's Title property, else the first heading, is the title.
- Every paragraph keeps its page: `metadata["pages"]` holds `[character offset, page]`, each
  paragraph's start with its 1-based page.
- An encrypted file, one with no text layer (a scan), a corrupt one and one of more than
  `max_pdf_pages` pages (told by its page tree before any page is laid out) are skipped with
  the reason; so is one whose streams inflate past `max_inflated_bytes`, or whose text passes
  `max_characters`, as soon as it does (`readers.pdf_budget`).
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING, Any

from docsim.indexer.text.documents import Skipped, SourceDocument
from docsim.indexer.text.readers.budget import OverBudgetError, ReadBudget
from docsim.indexer.text.readers.registry import FileLimits, Reader, register
from docsim.indexer.text.readers.structured import clean, structured_document

if TYPE_CHECKING:  # pdfminer is imported when a PDF is read
    from pdfminer.layout import LTChar

HEADING_RATIO = 1.15  # a heading's font is this much larger than the body's
REPEATED_SHARE = 0.5  # a line on at least this share of the pages (and >= 2) is furniture
EDGE = 0.12  # ... when it lies within this share of the page height from the top or bottom
_PAGE_NUMBER = re.compile(r"^(page\s*)?\d+(\s*(of|/)\s*\d+)?$|^[-–]\s*\d+\s*[-–]$", re.I)
_HYPHENATED = re.compile(r"[^\W\d_]-$")
_PARAGRAPH_START = re.compile(r"^(\(?[0-9ivxlc]{1,5}[.)]|\(?[a-zA-Z][.)]|[•▪◦*\-–—])\s")
_SENTENCE_END = ".!?:;\"”')"
SPACE_EM = 0.28  # a space's width in a body font, in ems (Helvetica's is 0.278)
PAGES_SETTING = "DOCSIM_FILES__MAX_PDF_PAGES"


@dataclass
class Box:
    page: int  # 1-based
    lines: list[str]
    size: float  # mean font size of its characters
    chars: int
    top: float  # share of the page height from the top, of its first line
    bottom: float  # share of the page height from the bottom, of its last line
    left: float  # shares of the page width
    right: float
    last_right: float = 0.0  # where its last line ends, in points
    first_word: float = 0.0  # its first word's width, in points
    column: int = 0  # 0, or 1 for a two-column page's right column
    column_right: float = 0.0  # its column's right edge (the furthest line end), in points

    def fills_line_before(self, following: Box) -> bool:
        """Whether this box's last line was full: `following`'s first word would not have
        fit after it in the column."""
        space = SPACE_EM * self.size
        return self.last_right + space + following.first_word > self.column_right + 0.5


DEFAULT_LIMITS = FileLimits()


def pdf_document(
    doc_id: str, data: bytes, metadata: dict[str, Any], limits: FileLimits = DEFAULT_LIMITS
) -> SourceDocument | Skipped:
    """The PDF whose file content is `data`; files of more than `limits.max_pdf_pages` pages
    are refused before any page is read when their page tree says so, else at the first page
    past the limit (layout analysis takes about 50 ms a page), and so are files whose streams
    inflate past `limits.max_inflated_bytes` or whose text passes `limits.max_characters`, as
    soon as they do (`readers.budget`)."""
    ref = str(metadata.get("source", doc_id))
    try:
        boxes, pages, info_title, outline = _read(data, limits.max_pdf_pages, ReadBudget.of(limits))
    except _Unreadable as error:
        return Skipped(ref, str(error), over_limit=isinstance(error, _TooLong))
    except OverBudgetError as error:
        return Skipped(ref, str(error), over_limit=True)
    if not any(b.chars for b in boxes):
        return Skipped(ref, f"no text layer in {pages} page(s): a scanned PDF? Run OCR on it first")
    boxes = _without_furniture(boxes, pages)
    body = median([b.size for b in boxes for _ in range(b.chars)]) if boxes else 0.0
    sections: list[tuple[str, list[str]]] = [("", [])]
    paragraph_pages: list[list[int]] = [[]]
    title = clean(info_title or "")
    previous: Box | None = None  # the last box of the current paragraph
    for box in boxes:
        text = join_lines(box.lines)
        if not text:
            continue
        if text in outline or (box.size > body * HEADING_RATIO and len(text) <= 200):
            title = title or text
            sections.append((text, []))
            paragraph_pages.append([])
            previous = None
            continue
        if previous is not None and continues(previous, sections[-1][1][-1], box, text):
            sections[-1][1][-1] = join_lines([sections[-1][1][-1], text])
        else:
            sections[-1][1].append(text)
            paragraph_pages[-1].append(box.page)
        previous = box
    document = structured_document(doc_id, title, sections, {**metadata})
    if isinstance(document, SourceDocument):
        document.metadata["pages"] = _paragraph_pages(document, sections, paragraph_pages)  # type: ignore[index]
    return document


def join_lines(lines: list[str]) -> str:
    """The lines of a paragraph as one text: a word hyphenated at a line end and continued in
    lower case on the next line is joined again without its hyphen."""
    out = ""
    for line in (clean(line) for line in lines):
        if not line:
            continue
        if _HYPHENATED.search(out) and line[:1].islower():
            out = out[:-1] + line
        else:
            out = f"{out} {line}" if out else line
    return out


class _Unreadable(Exception):
    pass


class _TooLong(_Unreadable):
    pass


def _read(
    data: bytes, max_pages: int, budget: ReadBudget
) -> tuple[list[Box], int, str | None, set[str]]:
    """The boxes of every page, the pages, the Title property and the outline's titles; the
    page count is checked before the first page is laid out, and again at each page (the
    page tree may understate it); `budget` counts what is inflated and read."""
    from pdfminer.layout import LAParams
    from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfexceptions import PDFException
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdfparser import PDFParser
    from pdfminer.psexceptions import PSException

    from docsim.indexer.text.readers.pdf_budget import CountingAggregator, budgeted

    try:
        with io.BytesIO(data) as handle, budgeted(budget):
            document = PDFDocument(PDFParser(handle))
            declared = _declared_pages(document)
            if declared is not None and declared > max_pages:
                raise _TooLong(_too_long(max_pages, f"its page tree holds {declared:,}"))
            title, outline = _properties(document)
            resources = PDFResourceManager()
            device = CountingAggregator(budget, resources, laparams=LAParams(boxes_flow=0.5))
            interpreter = PDFPageInterpreter(resources, device)
            boxes: list[Box] = []
            pages = 0
            for number, page in enumerate(PDFPage.create_pages(document), 1):
                if number > max_pages:
                    raise _TooLong(_too_long(max_pages, "its pages go on past it"))
                budget.checkpoint()
                interpreter.process_page(page)
                boxes += reading_order(_page_boxes(number, device.get_result()))
                pages = number
    except (PDFPasswordIncorrect, PDFEncryptionError) as error:
        raise _Unreadable(f"encrypted PDF: {error or 'a password is needed'}") from error
    except (PDFException, PSException, ValueError, KeyError, TypeError) as error:
        raise _Unreadable(f"corrupt PDF: {type(error).__name__}: {error}") from error
    return boxes, pages, title, outline


def _too_long(max_pages: int, why: str) -> str:
    return f"too long: more than {max_pages:,} pages (the limit, {PAGES_SETTING}): {why}"


def _declared_pages(document: Any) -> int | None:
    """The page count the document's page tree declares (its root's `/Count`), or None."""
    from pdfminer.pdftypes import resolve1

    root = resolve1(document.catalog.get("Pages"))
    count = resolve1(root.get("Count")) if isinstance(root, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def _properties(document: Any) -> tuple[str | None, set[str]]:
    """The document's Title property and its outline's (bookmarks') titles."""
    from pdfminer.pdfdocument import PDFNoOutlines

    info = document.info[0] if document.info else {}
    try:
        outline = {clean(str(entry[1])) for entry in document.get_outlines()}
    except PDFNoOutlines:
        outline = set()
    return _decoded(info.get("Title")), outline


def _page_boxes(number: int, page: Any) -> list[Box]:
    """The text boxes of the laid-out page `page` (pdfminer's `LTPage`), numbered `number`."""
    from pdfminer.layout import LTChar, LTTextBox, LTTextLine

    on_page = []
    for box in page:
        if not isinstance(box, LTTextBox):
            continue
        lines = [line for line in box if isinstance(line, LTTextLine)]
        chars = [c for line in lines for c in line if isinstance(c, LTChar)]
        if not lines:
            continue
        on_page.append(
            Box(
                page=number,
                lines=[line.get_text() for line in lines],
                size=sum(c.size for c in chars) / len(chars) if chars else 0.0,
                chars=len(chars),
                top=(page.height - box.y1) / page.height,
                bottom=box.y0 / page.height,
                left=box.x0 / page.width,
                right=box.x1 / page.width,
                last_right=lines[-1].x1,
                first_word=_first_word_width(lines[0], LTChar),
            )
        )
    return on_page


def _first_word_width(line: Any, char_type: type[LTChar]) -> float:
    """The width in points of the line's first word (up to its first space). `char_type` is
    pdfminer's `LTChar`, which the reader imports when it runs."""
    chars: list[LTChar] = []
    for item in line:
        if not isinstance(item, char_type) or not item.get_text().strip():
            if chars:
                break
            continue
        chars.append(item)
    return chars[-1].x1 - chars[0].x0 if chars else 0.0


def reading_order(boxes: list[Box]) -> list[Box]:
    """One page's boxes top to bottom; on a two-column page (boxes wholly in each half), the
    left column before the right one, boxes across both halves with the left column. Each
    box learns its column and the column's right edge."""
    left = [b for b in boxes if b.right <= 0.55]
    right = [b for b in boxes if b.left >= 0.45]
    if not left or not right:
        ordered = sorted(boxes, key=lambda b: b.top)
    else:
        ordered = sorted(boxes, key=lambda b: (b.left >= 0.45, b.top))
        for box in ordered:
            box.column = int(box.left >= 0.45)
    for column in {b.column for b in ordered}:
        members = [b for b in ordered if b.column == column]
        edge = max(b.last_right for b in members)  # full lines reach it
        for box in members:
            box.column_right = max(edge, box.last_right)
    return ordered


def continues(previous: Box, paragraph: str, box: Box, text: str) -> bool:
    """Whether the box `text` goes on with `paragraph`, whose last box is `previous`."""
    open_sentence = paragraph[-1] not in _SENTENCE_END
    if open_sentence and text[:1].islower():
        return True
    at_break = (box.page, box.column) != (previous.page, previous.column)
    if not at_break or not previous.fills_line_before(box):
        return False
    return open_sentence or not _PARAGRAPH_START.match(text)


def _decoded(value: Any) -> str | None:
    if isinstance(value, bytes):
        if value.startswith(b"\xfe\xff"):
            return value[2:].decode("utf-16-be", errors="replace")
        return value.decode("latin-1")
    return str(value) if value is not None else None


def _without_furniture(boxes: list[Box], pages: int) -> list[Box]:
    """`boxes` without page numbers and without running headers and footers: near the top or
    bottom of the page, and the same text (digits aside) on several pages."""

    def key(box: Box) -> str:
        return re.sub(r"\d+", "#", join_lines(box.lines).lower())

    def at_edge(box: Box) -> bool:
        return box.top < EDGE or box.bottom < EDGE

    seen = Counter(key(b) for b in {(b.page, key(b)): b for b in boxes if at_edge(b)}.values())
    repeated = {k for k, n in seen.items() if n >= max(2, REPEATED_SHARE * pages)}
    return [
        b
        for b in boxes
        if not (at_edge(b) and (key(b) in repeated or _PAGE_NUMBER.match(join_lines(b.lines))))
    ]


def _paragraph_pages(
    document: SourceDocument, sections: list[tuple[str, list[str]]], pages: list[list[int]]
) -> list[list[int]]:
    """`[offset, page]` of each paragraph: `structured_document` keeps the sections that hold
    paragraphs, in order, each body its paragraphs joined by a blank line."""
    kept = [(texts, on) for (_, texts), on in zip(sections, pages, strict=True) if texts]
    out = []
    for layout, (texts, on) in zip(document.sections or (), kept, strict=True):
        offset = layout.start
        for text, page in zip(texts, on, strict=True):
            out.append([offset, page])
            offset += len(text) + 2
    return out


PDF = register(
    Reader(
        "pdf",
        detects=lambda data, _suffix: data.startswith(b"%PDF-"),
        read=lambda doc_id, data, metadata, limits: pdf_document(
            doc_id, data, {**metadata, "format": "pdf"}, limits
        ),
        order=10,
        suffixes=(".pdf",),
    )
)
