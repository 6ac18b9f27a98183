"""PDF files for the tests, laid out here with reportlab: headings and paragraphs wrapped into
one or two columns, long words hyphenated at line ends, a running header and page numbers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from docsim.indexer.text.documents import SourceDocument
from docsim.indexer.text.sentences import load_splitter
from docsim.indexer.text.split import split_document

HEADER = "Docsim Test Reports, volume 7"
BODY, HEADING = ("Helvetica", 11.0, 14.0), ("Helvetica-Bold", 16.0, 20.0)  # font, size, leading


@dataclass(frozen=True)
class Block:
    text: str
    heading: bool = False


def structure(document: SourceDocument) -> list[tuple[str, list[str]]]:
    """(section title, paragraph texts) as docsim splits the document."""
    doc = split_document(document, load_splitter())
    return [
        (s.title, [doc.text[p.start : p.end] for p in s.paragraphs])
        for s in doc.sections
        if s.paragraphs
    ]


def blocks_of(parts: list[tuple[str, list[str]]]) -> list[Block]:
    """Headings and paragraphs to lay out, from `structure`'s sections."""
    return [
        block
        for title, paragraphs in parts
        for block in ([Block(title, heading=True)] if title else [])
        + [Block(p) for p in paragraphs]
    ]


def write_document_pdf(
    document: SourceDocument, path: Path, *, columns: int = 1, title: str | None = None
) -> Path:
    """`document`'s sections and paragraphs laid out as a PDF at `path`."""
    write_pdf(path, blocks_of(structure(document)), title=title or document.title, columns=columns)
    return path


def wrap(text: str, font: str, size: float, width: float) -> list[str]:
    """Lines of at most `width` points; a word of letters only that does not fit is
    hyphenated when at least three letters stay on each line."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    lines, line = [], ""
    for word in text.split():
        trial = f"{line} {word}".strip()
        if stringWidth(trial, font, size) <= width:
            line = trial
            continue
        for cut in range(len(word) - 3, 2, -1):
            head = f"{line} {word[:cut]}-".strip()
            if word.isalpha() and stringWidth(head, font, size) <= width:
                lines.append(head)
                line = word[cut:]
                break
        else:
            lines.append(line)
            line = word
    return [*lines, line] if line else lines


def write_pdf(
    path: Path, blocks: list[Block], *, title: str, columns: int = 1, encrypt: str | None = None
) -> list[int]:
    """Render `blocks` on A4 pages of `columns` columns, with the running header and a page
    number on every page (and a user password `encrypt`); the page each block starts on."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4, encrypt=encrypt)
    pdf.setTitle(title)
    width, height = A4
    margin, gap = 72.0, 24.0
    column_width = (width - 2 * margin - (columns - 1) * gap) / columns
    top, bottom = height - margin, margin
    state = {"page": 1, "column": 0, "y": top}

    def furniture() -> None:
        pdf.setFont("Helvetica", 9)
        pdf.drawString(margin, height - 40, HEADER)
        pdf.drawCentredString(width / 2, 36, str(state["page"]))

    def advance(leading: float) -> None:
        if state["y"] - leading < bottom:
            if state["column"] + 1 < columns:
                state["column"] += 1
            else:
                furniture()
                pdf.showPage()
                state["page"] += 1
                state["column"] = 0
            state["y"] = top
        state["y"] -= leading

    starts = []
    for block in blocks:
        font, size, leading = HEADING if block.heading else BODY
        state["y"] -= 12 if block.heading else 8  # space before a block
        for number, line in enumerate(wrap(block.text, font, size, column_width)):
            advance(leading)
            if number == 0:
                starts.append(state["page"])
            pdf.setFont(font, size)
            pdf.drawString(margin + state["column"] * (column_width + gap), state["y"], line)
    furniture()
    pdf.save()
    return starts
