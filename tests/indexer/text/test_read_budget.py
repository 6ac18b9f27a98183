"""Every file is read under a budget (issue 68): the bytes its compressed parts inflate to and
the characters of text taken from it are counted while it is read, and a file that passes a
limit is skipped there, its reason naming the setting; a PDF's page count is checked before
any page is laid out. The hostile files are built here (`tests.utils.bombs`), small, against
lowered limits."""

from __future__ import annotations

import tracemalloc
import zipfile
import zlib

import pytest

from docsim.indexer.text.corpus import read_document
from docsim.indexer.text.documents import Skipped, SourceDocument
from docsim.indexer.text.readers.budget import CHUNK, OverBudgetError, ReadBudget
from docsim.indexer.text.readers.docx import MAX_RATIO
from docsim.indexer.text.readers.registry import FileLimits
from tests.utils.bombs import (
    flate,
    flate_bomb_page,
    nested_archive,
    padded_word_bomb,
    pages_pdf,
    ratio,
    text_page,
    word_file,
)

pytestmark = pytest.mark.no_sql

INFLATED = "DOCSIM_FILES__MAX_INFLATED_BYTES"
CHARACTERS = "DOCSIM_FILES__MAX_CHARACTERS"
MiB = 2**20


def refused(name: str, data: bytes, limits: FileLimits) -> str:
    """The reason `data` is skipped for passing `limits`."""
    read = read_document(name, data, {}, limits)
    assert isinstance(read, Skipped) and read.over_limit, read
    return read.reason


def test_inflating_stops_within_a_chunk_of_the_limit() -> None:
    budget = ReadBudget(max_inflated=MiB, max_characters=1, characters_setting=CHARACTERS)
    with pytest.raises(OverBudgetError, match=INFLATED):
        budget.inflate(flate(64 * MiB))
    assert budget.inflated <= MiB + CHUNK  # never inflated whole
    # within the limit it inflates as zlib does, and fails where zlib fails
    assert ReadBudget.of(FileLimits()).inflate(zlib.compress(b"abc") + b"after") == b"abc"
    with pytest.raises(zlib.error):
        ReadBudget.of(FileLimits()).inflate(zlib.compress(b"abc" * 1000)[:-10])


def test_a_pdf_stream_that_inflates_past_the_limit_is_refused_as_it_inflates() -> None:
    """Issue 68: a 1 MB PDF whose one FlateDecode stream inflated to 1 GiB raised the
    server's memory by 1.95 GB. Here 64 KiB inflating to 64 MiB, against a 1 MiB limit."""
    bomb = pages_pdf([flate_bomb_page(64 * MiB), text_page("Coffee beans roast.")])
    tracemalloc.start()
    try:
        reason = refused("bomb.pdf", bomb, FileLimits(max_inflated_bytes=MiB))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert INFLATED in reason and "1,048,576 bytes" in reason
    assert peak < 16 * MiB  # the limit and a chunk, not the 64 MiB it inflates to


def test_a_pdf_longer_than_the_limit_is_refused_before_any_page_is_laid_out() -> None:
    """Issue 68: a 5,001-page PDF got its 413 after 15.6 s of parsing. The first of these
    pages is a compression bomb: had it been laid out, the inflated bytes would refuse it."""
    pages = [flate_bomb_page(16 * MiB)] + [text_page(f"Page {i} of notes.") for i in range(3)]
    limits = FileLimits(max_pdf_pages=3, max_inflated_bytes=MiB)
    assert refused("long.pdf", pages_pdf(pages), limits) == (
        "too long: more than 3 pages (the limit, DOCSIM_FILES__MAX_PDF_PAGES): its page tree "
        "holds 4"
    )
    # a page tree that understates its pages is caught at the first page past the limit
    lying = pages_pdf([text_page(f"Page {i} of notes.") for i in range(4)], declared=1)
    assert refused("lying.pdf", lying, FileLimits(max_pdf_pages=3)).endswith(
        "(the limit, DOCSIM_FILES__MAX_PDF_PAGES): its pages go on past it"
    )


def test_a_pdf_whose_text_passes_the_limit_is_refused() -> None:
    texts = ["Coffee beans roast slowly. ", "Water boils in the kettle. ", "Bread rises. "]
    pdf = pages_pdf([text_page(text * 30) for text in texts])
    assert isinstance(read_document("notes.pdf", pdf, {}), SourceDocument)
    reason = refused("long.pdf", pdf, FileLimits(max_characters=1_000))
    assert reason == f"too long: more than 1,000 characters of text (the limit, {CHARACTERS})"


def test_a_word_bomb_padded_to_an_ordinary_ratio_is_refused() -> None:
    """Issue 68: 2.5 MB of stored padding brought a Word bomb's overall ratio down to 78, and
    its 3.2 MB inflated to 255 MB, parsed for 17+ minutes. Its document.xml alone is refused
    by its own ratio; the bytes it declares, past the limit, before any is inflated."""
    bomb = padded_word_bomb(paragraphs=30_000, padding=256 * 1024)
    assert ratio(bomb) < MAX_RATIO / 4  # the archive's ratio alone let it through
    reason = refused("bomb.docx", bomb, FileLimits(max_inflated_bytes=4 * MiB))
    assert INFLATED in reason and "declare" in reason
    unlimited = read_document("bomb.docx", bomb, {})
    assert isinstance(unlimited, Skipped) and not unlimited.over_limit
    assert "'word/document.xml' inflates to" in unlimited.reason and "zip bomb" in unlimited.reason


def test_a_word_document_xml_larger_than_its_text_could_need_is_refused() -> None:
    document = word_file(["Coffee beans roast slowly in the pan."] * 2_000)
    reason = refused("long.docx", document, FileLimits(max_characters=1_000))
    assert reason.startswith("too long: its word/document.xml inflates to") and CHARACTERS in reason


def test_a_nested_archive_counts_as_what_it_inflates_to() -> None:
    """A Word file may embed a workbook (an archive of its own), never inflated by docsim:
    it counts as the bytes its members declare."""
    embedded = {"word/embeddings/Book.xlsx": (nested_archive(16 * MiB), zipfile.ZIP_DEFLATED)}
    document = word_file(["Hello there."], embedded)
    assert len(document) < MiB
    reason = refused("nested.docx", document, FileLimits(max_inflated_bytes=4 * MiB))
    assert INFLATED in reason and "inflate to more than 4,194,304 bytes" in reason
    small = word_file(
        ["Hello there."],
        {"word/embeddings/Book.xlsx": (nested_archive(1000), zipfile.ZIP_DEFLATED)},
    )
    read = read_document("small.docx", small, {})
    assert isinstance(read, SourceDocument) and "Hello there." in read.text


def test_the_text_of_word_and_html_files_is_counted_as_it_is_read() -> None:
    document = word_file([f"Paragraph {i}: coffee beans roast slowly." for i in range(100)])
    assert CHARACTERS in refused("long.docx", document, FileLimits(max_characters=1_000))
    # a row of nested tables holds their text again at each level: 40 levels of 400 characters
    depth, words = 40, "Coffee beans roast slowly. " * 15
    page = "<html><body>" + "<table><tr><td>" * depth + words + "</td></tr></table>" * depth
    reason = refused("page.html", page.encode(), FileLimits(max_characters=len(words) * 10))
    assert reason.startswith("too long: more than") and CHARACTERS in reason
    text = ("Coffee beans roast slowly. " * 100).encode()
    assert CHARACTERS in refused("notes.txt", text, FileLimits(max_characters=1_000))


def test_every_reader_stops_where_the_request_reading_it_is_stopped() -> None:
    """Between pages, members and blocks a reader gives the request its checkpoint
    (`models.inference.pacing`: the search slot's hook raises past the deadline); what it raises
    goes through, never read as a corrupt file."""
    from docsim.models.inference.pacing import paced

    class Stopped(RuntimeError):
        pass

    def stop(_rows: int) -> None:
        raise Stopped

    files = {
        "notes.pdf": pages_pdf([text_page("Coffee beans roast slowly.")]),
        "notes.docx": word_file(["Coffee beans roast slowly."]),
        "notes.html": b"<html><body><p>Coffee beans roast slowly.</p></body></html>",
    }
    for name, data in files.items():
        assert isinstance(read_document(name, data, {}), SourceDocument), name
        with paced(stop), pytest.raises(Stopped):
            read_document(name, data, {})
