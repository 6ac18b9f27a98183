"""PDF files laid out here (reportlab: one and two columns, hyphenated line ends, a running
header, page numbers) read back: the same sections, paragraphs and pages as the text they were
made from, and the bad files skipped with their reasons."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from docsim.indexer.text.corpus import SAMPLE_CORPUS, read_corpus, read_file
from docsim.indexer.text.documents import Skipped, SourceDocument
from docsim.indexer.text.readers.pdf import Box, continues, join_lines, reading_order
from docsim.indexer.text.readers.registry import FileLimits
from docsim.indexer.text.sentences import load_splitter
from docsim.indexer.text.split import split_document
from tests.utils.pdfs import BODY, HEADER, Block, blocks_of, structure, wrap, write_pdf

SOURCES = ("medieval-01", "oceans-03", "databases-02", "running-04")


@pytest.fixture(scope="module")
def markdown() -> list[tuple[str, list[str]]]:
    """Four sample documents' sections and paragraphs, one after the other."""
    parts = []
    for name in SOURCES:
        parts += structure(read_file(SAMPLE_CORPUS / f"{name}.md"))  # type: ignore[arg-type]
    return parts


@pytest.mark.parametrize("columns", [1, 2])
def test_a_pdf_reads_back_as_the_text_it_was_made_from(
    tmp_path: Path, markdown: list[tuple[str, list[str]]], columns: int
) -> None:
    blocks = blocks_of(markdown)
    starts = write_pdf(tmp_path / "report.pdf", blocks, title="Four essays", columns=columns)
    assert max(starts) >= 3  # several pages: running headers can be told
    hyphenated = [line for b in blocks if not b.heading for line in wrap(b.text, *BODY[:2], 200.0)]
    assert any(line.endswith("-") for line in hyphenated)  # the layout hyphenates

    document = read_file(tmp_path / "report.pdf")
    assert isinstance(document, SourceDocument) and document.metadata["format"] == "pdf"
    assert document.title == "Four essays"
    found = structure(document)
    assert [t for t, _ in found if t] == [t for t, _ in markdown if t]
    expected = [p for _, paragraphs in markdown for p in paragraphs]
    got = [p for _, paragraphs in found for p in paragraphs]
    assert got == expected  # every paragraph, whole: headers, page numbers and hyphens gone
    assert HEADER not in document.text
    paragraph_starts = [s for b, s in zip(blocks, starts, strict=True) if not b.heading]
    pages = document.metadata["pages"]
    assert [page for _, page in pages] == paragraph_starts
    for (offset, _), text in zip(pages, expected, strict=True):
        assert document.text[offset : offset + len(text)] == text


def test_hyphenation_is_undone_only_before_a_lower_case_continuation() -> None:
    assert join_lines(["The charac-", "teristic rise"]) == "The characteristic rise"
    assert join_lines(["Anglo-", "Saxon law"]) == "Anglo- Saxon law"
    assert join_lines(["in 1990-", "1995 it"]) == "in 1990- 1995 it"
    assert join_lines(["  spaced  ", "", "out "]) == "spaced out"


def test_an_encrypted_pdf_is_skipped(tmp_path: Path) -> None:
    write_pdf(tmp_path / "locked.pdf", [Block("Secret text.")], title="x", encrypt="s3cret")
    skipped = read_file(tmp_path / "locked.pdf")
    assert isinstance(skipped, Skipped) and skipped.reason.startswith("encrypted PDF")


def test_a_scan_without_a_text_layer_is_skipped(tmp_path: Path) -> None:
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(tmp_path / "scan.pdf"))
    pdf.rect(72, 72, 300, 500, fill=1)  # a page of ink and no text
    pdf.showPage()
    pdf.save()
    skipped = read_file(tmp_path / "scan.pdf")
    assert isinstance(skipped, Skipped) and "no text layer in 1 page(s)" in skipped.reason


def test_a_corrupt_pdf_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\ngarbage")
    skipped = read_file(tmp_path / "broken.pdf")
    assert isinstance(skipped, Skipped) and skipped.reason.startswith("corrupt PDF")


def test_files_beyond_the_limits_are_skipped_unread(tmp_path: Path) -> None:
    """A file larger than `max_bytes` is refused before it is read, and a PDF longer than
    `max_pdf_pages` before its first page is laid out (its page tree says how many it has);
    smaller ones are read as usual."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    blocks = [
        Block(f"Paragraph {i} of a long report, set on its own page. " * 30) for i in range(4)
    ]
    write_pdf(folder / "long.pdf", blocks, title="Long")
    (folder / "notes.md").write_text("# Notes\n\nShort notes on bread.\n")
    size = (folder / "long.pdf").stat().st_size

    def outcome(limits: FileLimits) -> dict[str, str]:
        return {
            Path(getattr(i, "ref", "")).name or i.doc_id: getattr(i, "reason", "read")
            for i in read_corpus(folder, limits=limits)
        }

    assert outcome(FileLimits()) == {"long": "read", "notes": "read"}
    assert outcome(FileLimits(max_bytes=size - 1))["long.pdf"] == (
        f"too large: {size:,} bytes; the limit is {size - 1:,}"
    )
    assert outcome(FileLimits(max_pdf_pages=1))["long.pdf"] == (
        "too long: more than 1 pages (the limit, DOCSIM_FILES__MAX_PDF_PAGES): its page tree "
        "holds 2"
    )


def test_the_same_text_as_markdown_and_as_pdf_encodes_alike(
    tmp_path: Path, markdown: list[tuple[str, list[str]]], minilm
) -> None:  # noqa: ANN001
    """Issue 16's check: the same sections and paragraphs (at least 95% identical; here all),
    and MiniLM document vectors with cosine at least 0.99."""
    from docsim.indexer.text.chunking import add_chunks
    from docsim.indexer.text.readers.structured import structured_document

    first = markdown[: len(structure(read_file(SAMPLE_CORPUS / f"{SOURCES[0]}.md")))]  # type: ignore[arg-type]
    md = structured_document("essay", "Fairs", first, {})
    write_pdf(tmp_path / "essay.pdf", blocks_of(first), title="Fairs")
    pdf = read_file(tmp_path / "essay.pdf")
    assert isinstance(md, SourceDocument) and isinstance(pdf, SourceDocument)
    from_md, from_pdf = structure(md), structure(pdf)
    paragraphs = [p for _, ps in from_md for p in ps]
    read_back = [p for _, ps in from_pdf for p in ps]
    same = sum(a == b for a, b in zip(paragraphs, read_back, strict=False))
    assert same >= 0.95 * len(paragraphs) and [t for t, _ in from_md] == [t for t, _ in from_pdf]
    splitter = load_splitter()
    vectors = [
        minilm.encode_documents(
            [add_chunks([split_document(d, splitter)], minilm, 256)[0].encoder_input()]
        )[0].document
        for d in (md, pdf)
    ]
    cosine = torch.nn.functional.cosine_similarity(vectors[0], vectors[1], dim=0)
    assert float(cosine) >= 0.99


def box(page: int, text: str, last_right: float, first_word: float = 30.0) -> Box:
    """A one-line box of 11 pt text in a column whose right edge is at 500 pt."""
    return Box(
        page=page,
        lines=[text],
        size=11.0,
        chars=len(text),
        top=0.1,
        bottom=0.8,
        left=0.1,
        right=0.9,
        last_right=last_right,
        first_word=first_word,
        column_right=500.0,
    )


@pytest.mark.parametrize(
    ("paragraph", "last_right", "following", "same_page", "joined"),
    [
        # a lower-case word after an open sentence goes on, wherever it stands
        ("the court held that", 300.0, "the appeal fails.", True, True),
        # a full last line at a page end: the next word did not fit, the paragraph goes on ...
        ("the High Court of", 495.0, "Australia said so.", False, True),
        ("and so it was decided.", 495.0, "The appeal fails.", False, True),
        # ... unless the next box starts as paragraphs do, after a finished sentence
        ("and so it was decided.", 495.0, "12. The appeal fails.", False, False),
        ("and so it was decided.", 495.0, "(iv) The appeal fails.", False, False),
        # an open sentence goes on even before a number
        ("as held in", 495.0, "12 SCC 400.", False, True),
        # a short last line ended its paragraph: the next word would have fit after it
        ("and so it was decided.", 300.0, "The appeal fails.", False, False),
        ("the High Court of", 300.0, "Australia said so.", False, False),
        # within a column, boxes are paragraphs unless a lower-case word goes on
        ("the High Court of", 495.0, "Australia said so.", True, False),
    ],
)
def test_a_paragraph_goes_on_across_a_break_as_a_typesetter_would_have_set_it(
    paragraph: str, last_right: float, following: str, same_page: bool, joined: bool
) -> None:
    previous = box(1, paragraph, last_right)
    assert (
        continues(previous, paragraph, box(1 if same_page else 2, following, 60.0), following)
        is joined
    )


def test_a_columns_right_edge_is_where_its_longest_line_ends() -> None:
    short, full = box(1, "a short line", 200.0), box(1, "a full line", 480.0)
    right = box(1, "the right column", 470.0)
    right.left, short.right, full.right = 0.6, 0.4, 0.45
    ordered = reading_order([right, full, short])
    assert [b.column for b in ordered] == [0, 0, 1]
    assert [b.column_right for b in ordered] == [480.0, 480.0, 470.0]
    assert full.fills_line_before(box(2, "Next", 0.0, first_word=20.0))
    assert not short.fills_line_before(box(2, "Next", 0.0, first_word=20.0))
