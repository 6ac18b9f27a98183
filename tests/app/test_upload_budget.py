"""Uploaded files are read under the same budget as a folder's files (issue 68), against the
real server: a PDF compression bomb, a Word bomb padded to an ordinary ratio, a Word file
holding an archive, a PDF past the page limit, a document.xml larger than a posted document's
text could need: each a 413 naming its setting, as soon as reading passes the limit. A posted
document's title counts against its characters, and a long parse stops at the request's
deadline (503), its slot freed."""

from __future__ import annotations

import time
import zipfile
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from docsim.app.core.settings import ApiSettings, ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.settings import FileSettings
from tests.utils.bombs import (
    flate_bomb_page,
    nested_archive,
    padded_word_bomb,
    pages_pdf,
    shared_content_pdf,
    text_page,
    word_file,
)

MiB = 2**20
INFLATED = "DOCSIM_FILES__MAX_INFLATED_BYTES"
DOCUMENT_BYTES = "DOCSIM_API__MAX_DOCUMENT_BYTES"


@pytest.fixture(scope="module")
def bounded(indexed_settings: ServiceSettings) -> Iterator[TestClient]:
    """The served sample index, with lowered limits on files and on posted documents."""
    settings = indexed_settings.model_copy(
        update={
            "files": FileSettings(max_inflated_bytes=4 * MiB, max_pdf_pages=3),
            "api": ApiSettings(max_document_bytes=20_000),
        }
    )
    with TestClient(create_app(settings)) as client:
        yield client


def too_large(client: TestClient, name: str, data: bytes, setting: str) -> str:
    """The 413's detail for uploading `data` to POST /similar, which names `setting`."""
    answer = client.post("/similar", files={"file": (name, data)})
    assert answer.status_code == 413, answer.text
    detail = answer.json()["detail"]
    assert setting in detail and f"file {name!r} cannot be read" in detail, detail
    return detail


def test_a_pdf_stream_that_inflates_past_the_limit_is_a_413(bounded: TestClient) -> None:
    bomb = pages_pdf([flate_bomb_page(64 * MiB), text_page("Coffee beans roast.")])
    assert len(bomb) < MiB
    too_large(bounded, "bomb.pdf", bomb, INFLATED)


def test_a_pdf_over_the_page_limit_is_a_413_before_its_pages_are_read(
    bounded: TestClient,
) -> None:
    """Its first page is a compression bomb: laid out, it would be refused for that."""
    pages = [flate_bomb_page(16 * MiB)] + [text_page(f"Page {i} of notes.") for i in range(3)]
    detail = too_large(bounded, "long.pdf", pages_pdf(pages), "DOCSIM_FILES__MAX_PDF_PAGES")
    assert "its page tree holds 4" in detail


def test_word_bombs_are_a_413(bounded: TestClient) -> None:
    padded = padded_word_bomb(paragraphs=30_000, padding=256 * 1024)
    assert "declare" in too_large(bounded, "padded.docx", padded, INFLATED)
    embedded = {"word/embeddings/Book.xlsx": (nested_archive(16 * MiB), zipfile.ZIP_DEFLATED)}
    too_large(bounded, "nested.docx", word_file(["Hello there."], embedded), INFLATED)
    # 1.4 MB of XML for a posted document's 20,000 characters (64 bytes each at most)
    long = word_file(["Coffee beans roast slowly in the pan. " * 3] * 10_000)
    assert "word/document.xml" in too_large(bounded, "long.docx", long, DOCUMENT_BYTES)


def test_an_uploaded_file_stops_at_a_posted_documents_characters(bounded: TestClient) -> None:
    text = "Coffee beans roast slowly in the pan. " * 1_000
    detail = too_large(bounded, "long.txt", text.encode(), DOCUMENT_BYTES)
    assert "more than 20,000 characters of text" in detail


def test_a_posted_documents_title_counts_against_its_characters(bounded: TestClient) -> None:
    """Issue 68: a 10 MB `title` was not counted against the document's size."""
    document = {"title": "Coffee " * 4_000, "text": "Coffee beans roast. Water boils."}
    answer = bounded.post("/similar", json={"document": document})
    assert answer.status_code == 413, answer.text
    assert DOCUMENT_BYTES in answer.json()["detail"]
    sections = {"title": "Coffee", "sections": [{"title": "Beans " * 4_000, "text": "Roast."}]}
    answer = bounded.post("/similar", json={"document": sections})
    assert answer.status_code == 413 and DOCUMENT_BYTES in answer.json()["detail"]
    ordinary = {"title": "Coffee", "text": "Coffee beans roast. Water boils."}
    assert bounded.post("/similar", json={"document": ordinary}).status_code == 200


def test_a_long_parse_stops_at_the_requests_deadline(indexed_settings: ServiceSettings) -> None:
    """The upload is parsed in the request's search slot; between pages (and every few
    thousand characters) it may stop at the deadline. These 150 pages take about 12 s to
    lay out (80 ms each) on one core: the answer comes at the deadline, not after them."""
    pdf = shared_content_pdf(150, "Coffee beans roast slowly in the pan. " * 60)
    settings = indexed_settings.model_copy(update={"api": ApiSettings(search_deadline_seconds=0.5)})
    with TestClient(create_app(settings)) as client:
        started = time.monotonic()
        answer = client.post("/similar", files={"file": ("slow.pdf", pdf)})
        elapsed = time.monotonic() - started
        assert answer.status_code == 503, answer.text
        assert "DOCSIM_API__SEARCH_DEADLINE_SECONDS" in answer.json()["detail"]
        assert elapsed < 5, elapsed
