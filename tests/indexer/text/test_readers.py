"""HTML and Word files made here, read back: their sections, paragraphs and title, the format
told by content, and the bad files skipped with their reasons."""

from __future__ import annotations

import zipfile
from pathlib import Path

import docx
import pytest

from docsim.indexer.text.corpus import Skipped, read_corpus, read_file
from docsim.indexer.text.documents import SourceDocument
from docsim.indexer.text.readers.docx import MAX_RATIO
from docsim.indexer.text.readers.sniff import FileFormat, sniff
from docsim.indexer.text.sentences import load_splitter
from docsim.indexer.text.split import split_document

PAGE = """<!DOCTYPE html>
<html><head><meta charset="iso-8859-1"><title>Bread at home</title>
<style>p {{ color: red }}</style><script>var x = "Not text";</script></head>
<body><nav>Home | Recipes | About</nav>
<h1>Dough</h1>
<p>Yeast ferments the sugars
   in flour.</p>
<div>A short note.<p>Knead until smooth.</p></div>
<h2>Oven</h2>
<ul><li>A hot oven sets the crumb.</li><li>Steam keeps the <b>crust</b> soft.</li></ul>
<table><tr><th>Flour</th><th>Water</th></tr><tr><td>500 g</td><td>350 g</td></tr></table>
<aside>Related: cakes</aside>
<p>Caf\xe9 cr\xe8me.</p>
</body></html>"""


def split(document: SourceDocument) -> list[tuple[str, list[str]]]:
    """(section title, paragraph texts) as docsim splits the document."""
    doc = split_document(document, load_splitter())
    return [
        (section.title, [doc.text[p.start : p.end] for p in section.paragraphs])
        for section in doc.sections
    ]


def write_docx(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Contract law notes", 0)  # the Title style
    document.add_paragraph("These notes open the file.")
    document.add_heading("Formation", 1)
    document.add_paragraph("An offer must be accepted.")
    document.add_paragraph("")  # empty paragraphs are not paragraphs
    document.add_paragraph("Consideration is needed too.")
    document.add_heading("Remedies", 2)
    table = document.add_table(rows=2, cols=2)
    for (r, c), text in {
        (0, 0): "Breach",
        (0, 1): "Damages",
        (1, 0): "Delay",
        (1, 1): "Interest",
    }.items():
        table.cell(r, c).text = text
    document.add_paragraph("Specific performance is rare.")
    document.save(str(path))
    return path


def test_html_sections_paragraphs_and_title(tmp_path: Path) -> None:
    file = tmp_path / "bread.html"
    file.write_bytes(PAGE.encode("iso-8859-1"))
    document = read_file(file)
    assert isinstance(document, SourceDocument) and document.doc_id == "bread"
    assert document.title == "Bread at home" and document.metadata["format"] == "html"
    assert split(document) == [
        (
            "Dough",
            ["Yeast ferments the sugars in flour.", "A short note.", "Knead until smooth."],
        ),
        (
            "Oven",
            [
                "A hot oven sets the crumb.",
                "Steam keeps the crust soft.",
                "Flour | Water",
                "500 g | 350 g",
                "Café crème.",  # decoded with the page's declared charset
            ],
        ),
    ]
    assert "Not text" not in document.text and "Recipes" not in document.text


def test_word_headings_paragraphs_tables_and_title(tmp_path: Path) -> None:
    document = read_file(write_docx(tmp_path / "contract.docx"))
    assert isinstance(document, SourceDocument) and document.doc_id == "contract"
    assert document.title == "Contract law notes" and document.metadata["format"] == "docx"
    assert split(document) == [
        ("", ["These notes open the file."]),
        ("Formation", ["An offer must be accepted.", "Consideration is needed too."]),
        ("Remedies", ["Breach | Damages", "Delay | Interest", "Specific performance is rare."]),
    ]


def test_the_format_is_told_by_content_not_by_name(tmp_path: Path) -> None:
    html_as_txt = tmp_path / "page.txt"
    html_as_txt.write_bytes(PAGE.encode("iso-8859-1"))
    word_without_extension = write_docx(tmp_path / "contract")
    pdf = tmp_path / "scan.txt"
    pdf.write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    assert sniff(html_as_txt.read_bytes()) is FileFormat.html
    assert sniff(word_without_extension.read_bytes()) is FileFormat.docx
    assert sniff(pdf.read_bytes()) is FileFormat.pdf
    assert read_file(html_as_txt).metadata["format"] == "html"  # type: ignore[union-attr]
    assert read_file(word_without_extension).doc_id == "contract"  # type: ignore[union-attr]


def test_a_mixed_folder_reads_each_file_by_its_format_and_skips_with_reasons(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nA paragraph of notes.\n")
    (folder / "bread.htm").write_bytes(PAGE.encode("iso-8859-1"))
    write_docx(folder / "contract.docx")
    (folder / "scan.pdf").write_bytes(b"%PDF-1.4\n")  # a header and nothing after it
    (folder / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64)
    (folder / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (folder / "data.csv").write_text("a,b\n1,2\n")
    (folder / ".hidden.txt").write_text("Never read.")
    items = list(read_corpus(folder))
    documents = sorted(i.doc_id for i in items if isinstance(i, SourceDocument))
    assert documents == ["bread", "contract", "notes"]
    reasons = {Path(i.ref).name: i.reason for i in items if isinstance(i, Skipped)}
    assert reasons.keys() == {"scan.pdf", "old.doc", "broken.docx", "data.csv"}
    assert reasons["scan.pdf"].startswith("corrupt PDF")
    assert "password-protected" in reasons["old.doc"]
    assert "zip" in reasons["broken.docx"]
    assert "no document format (.csv)" in reasons["data.csv"]


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr(
            "word/document.xml", "<w:document>" + " " * (MAX_RATIO * 200_000) + "</w:document>"
        )
    skipped = read_file(bomb)
    assert isinstance(skipped, Skipped) and "zip bomb" in skipped.reason


@pytest.mark.parametrize(
    "content",
    [b"<!DOCTYPE html><html><body><script>only()</script></body></html>", b"<html></html>"],
)
def test_a_page_without_text_is_skipped(tmp_path: Path, content: bytes) -> None:
    page = tmp_path / "empty.html"
    page.write_bytes(content)
    skipped = read_file(page)
    assert isinstance(skipped, Skipped) and skipped.reason == "no text found"


def test_a_corrupt_word_document_is_skipped(tmp_path: Path) -> None:
    broken = tmp_path / "broken.docx"
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("word/document.xml", "<not-closed")
    skipped = read_file(broken)
    assert isinstance(skipped, Skipped) and skipped.reason.startswith("corrupt Word document")
